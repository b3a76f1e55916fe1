"""Serve the embedded model with llama-cpp-python's OpenAI-compatible server.

The server runs as a child process on a free 127.0.0.1 port, is started on the
first call that needs it, reused by later calls, and stopped when the Python
process that started it exits.  A small state file in the cache directory lets
other processes (``rlm model status``, a second ``rlm run``) find and reuse a
server that ``rlm model serve`` keeps running.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..litellm_client import LiteLLMClient, LLMError, Message
from ..usage import Completion
from .weights import LocalModelError, LocalModelSpec, cache_dir, get_spec, prepare

__all__ = ["ServerInfo", "LocalModelClient", "ensure_server", "find_running", "stop_server",
           "DEFAULT_N_CTX", "START_TIMEOUT"]

DEFAULT_N_CTX = 8192  # tokens; llama.cpp's own default (2048) is too small for RLM prompts
START_TIMEOUT = 180.0  # seconds to wait for the server to answer /v1/models
_lock = threading.Lock()
_servers: dict[str, tuple[subprocess.Popen, ServerInfo]] = {}


@dataclass(slots=True)
class ServerInfo:
    """A running model server: its model alias, port, process id and context size."""

    model: str
    port: int
    pid: int
    n_ctx: int

    @property
    def api_base(self) -> str:
        """OpenAI-compatible base URL, e.g. ``http://127.0.0.1:43121/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"


def _state_path(spec: LocalModelSpec) -> Path:
    return cache_dir() / f"server-{spec.name}.json"


def _log_path(spec: LocalModelSpec) -> Path:
    return cache_dir() / f"server-{spec.name}.log"


def _healthy(info: ServerInfo, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{info.api_base}/models", timeout=timeout) as resp:
            return resp.status == 200
    except OSError:
        return False


def _accepting(info: ServerInfo, timeout: float = 1.0) -> bool:
    """True when the server's port takes a TCP connection: a server busy generating
    (which may not answer HTTP within seconds) still accepts."""
    try:
        with socket.create_connection(("127.0.0.1", info.port), timeout=timeout):
            return True
    except OSError:
        return False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def find_running(name: str | None = None) -> ServerInfo | None:
    """Return a healthy server for the embedded model, started here or elsewhere."""
    spec = get_spec(name)
    entry = _servers.get(spec.name)
    if entry and entry[0].poll() is None:  # ours and alive: no HTTP round trip per call
        return entry[1]
    try:
        info = ServerInfo(**json.loads(_state_path(spec).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    if _pid_alive(info.pid) and _accepting(info):
        return info
    return None


@contextlib.contextmanager
def _start_lock(spec: LocalModelSpec) -> Iterator[None]:
    """An exclusive lock (``flock``) across processes around find-or-start, so two
    processes never start two servers for one model."""
    path = cache_dir() / f"server-{spec.name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def ensure_server(name: str | None = None, *, n_ctx: int = DEFAULT_N_CTX,
                  threads: int | None = None, timeout: float = START_TIMEOUT) -> ServerInfo:
    """Return a running server for the embedded model, starting one if needed.

    Args:
        name: embedded model short name (default model if None).
        n_ctx: context window in tokens.
        threads: CPU threads for generation and prompt processing
            (default: all cores; llama.cpp would use half).
        timeout: seconds to wait for the server to become ready.

    Raises:
        LocalModelError: llama-cpp-python is not installed, the weights cannot be
            prepared, or the server exits or does not answer within ``timeout``.
    """
    spec = get_spec(name)
    with _lock, _start_lock(spec):
        running = find_running(spec.name)
        if running is not None:
            return running
        if importlib.util.find_spec("llama_cpp") is None:
            raise LocalModelError(
                "the embedded model needs llama-cpp-python: pip install 'rlm-kernel[local]'"
            )
        path = prepare(spec.name)
        port = _free_port()
        threads = threads or os.cpu_count() or 2
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(path),
               "--model_alias", spec.name, "--host", "127.0.0.1", "--port", str(port),
               "--n_ctx", str(n_ctx), "--n_threads", str(threads),
               "--n_threads_batch", str(threads), "--verbose", "False",
               # llama-cpp-python's server keeps logits for every position by default
               # (n_ctx x vocabulary floats: ~5 GB at 8,192 x 151,936); replies need none.
               "--logits_all", "False"]
        log = _log_path(spec).open("wb")
        # A session of its own: Ctrl-C or a kernel interrupt (sent to the process
        # group) must not kill the server mid-run.  It still dies with its parent
        # (Linux ties that to the creating thread, so only from the main thread).
        main = threading.current_thread() is threading.main_thread()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=_die_with_parent if main else None)
        log.close()
        info = ServerInfo(model=spec.name, port=port, pid=proc.pid, n_ctx=n_ctx)
        deadline = time.monotonic() + timeout
        while not _healthy(info, timeout=1.0):
            if proc.poll() is not None:
                raise LocalModelError(
                    f"the model server exited with code {proc.returncode}: {_log_tail(spec)}"
                )
            if time.monotonic() > deadline:
                proc.kill()
                raise LocalModelError(
                    f"the model server did not answer within {timeout:.0f} s: {_log_tail(spec)}"
                )
            time.sleep(0.25)
        _servers[spec.name] = (proc, info)
        _state_path(spec).write_text(json.dumps(asdict(info)))
        return info


def _die_with_parent() -> None:
    """In the child before exec: ask Linux to SIGKILL it when its parent dies
    (``prctl(PR_SET_PDEATHSIG)``), so a killed ``rlm`` leaves no orphan server.
    SIGKILL, not SIGTERM: uvicorn waits for an in-flight generation on SIGTERM, which
    kept orphans generating for minutes; the server holds nothing worth saving."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        pr_set_pdeathsig = 1  # from <linux/prctl.h>
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def _log_tail(spec: LocalModelSpec, lines: int = 3) -> str:
    try:
        text = _log_path(spec).read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return " | ".join(text[-lines:]) or "empty log"


def stop_server(name: str | None = None) -> bool:
    """Stop the server this process started for ``name``; True if one was stopped."""
    spec = get_spec(name)
    entry = _servers.pop(spec.name, None)
    if entry is None:
        return False
    proc, info = entry
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    try:
        state = json.loads(_state_path(spec).read_text())
        if state.get("pid") == info.pid:
            _state_path(spec).unlink()
    except (OSError, ValueError):
        pass
    return True


@atexit.register
def _stop_all() -> None:
    for name in list(_servers):
        stop_server(name)


class LocalModelClient(LiteLLMClient):
    """A :class:`LiteLLMClient` for the embedded model, served on 127.0.0.1.

    litellm talks to llama-cpp-python's OpenAI-compatible server as
    ``openai/<alias>``.  The server is started (or found) at the first request
    and looked up again before each one, so a server that died is restarted.

    Args:
        name: embedded model short name (see :data:`rlm_kernel.local_model.MODELS`).
        **kwargs: as for :class:`LiteLLMClient` (``api_base``/``api_key`` are set here).
    """

    def __init__(self, name: str, **kwargs: Any) -> None:
        kwargs.setdefault("num_retries", 1)
        super().__init__(f"openai/{name}", api_key="local", priced=False, **kwargs)
        self.local_name = name
        self._context_window = DEFAULT_N_CTX

    def check(self) -> None:
        """Nothing to check before the run: the server starts on first use."""

    def complete(self, messages: list[Message], **kwargs: Any) -> Completion:
        """Start or find the server, then send ``messages`` (see :class:`LanguageModel`).

        Raises:
            LLMError: the weights cannot be prepared, the server cannot start,
                or the request failed.
        """
        try:
            self.api_base = ensure_server(self.local_name).api_base
        except LocalModelError as exc:
            raise LLMError(f"embedded model: {exc}") from exc
        return super().complete(messages, **kwargs)
