"""Serve the embedded model with llama-cpp-python's OpenAI-compatible server.

The server runs as a child process on a free 127.0.0.1 port, is started on the
first call that needs it, reused by later calls, and stopped when the Python
process that started it exits.  A small state file in the cache directory lets
other processes (``rlm model status``, a second ``rlm run``) find and reuse a
server that ``rlm model serve`` keeps running.

Who may do what with the state file: a process finds a server through it (a server
busy generating counts as running: its pid is a live llama.cpp server and its port
takes connections), starts one only while holding ``server-<name>.lock``
(``flock``), deletes the file only if it wrote it (its server's pid), and removes a
file whose pid is dead.  A server is SIGKILLed by Linux when the process that
started it dies (``PR_SET_PDEATHSIG``), so a killed client leaves no orphan.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import importlib.util
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..base import LLMError, Message
from ..litellm_client import LiteLLMClient
from ..usage import Completion
from .weights import LocalModelError, LocalModelSpec, cache_dir, get_spec, prepare

__all__ = ["ServerInfo", "LocalModelClient", "ensure_server", "find_running", "stop_server",
           "server_command", "DEFAULT_N_CTX", "START_TIMEOUT"]

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


def _is_server(pid: int) -> bool:
    """True when ``pid`` is a live llama-cpp-python server (not a zombie, not a pid
    the system has since given to another program); without ``/proc``, when alive."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True
    try:
        return b"llama_cpp.server" in (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return False


def _read_state(spec: LocalModelSpec) -> ServerInfo | None:
    try:
        return ServerInfo(**json.loads(_state_path(spec).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _write_state(spec: LocalModelSpec, info: ServerInfo) -> None:
    """Write the state file atomically (temp file + rename): a reader never sees half."""
    path = _state_path(spec)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(info)))
    os.replace(tmp, path)


def _remove_state(spec: LocalModelSpec, pid: int) -> None:
    """Delete the state file if it still names ``pid`` (call with the start lock held)."""
    info = _read_state(spec)
    if info is not None and info.pid == pid:
        with contextlib.suppress(OSError):
            _state_path(spec).unlink()


def _lookup(spec: LocalModelSpec, *, clean: bool) -> ServerInfo | None:
    entry = _servers.get(spec.name)
    if entry and entry[0].poll() is None:  # ours and alive: no round trip per call
        return entry[1]
    info = _read_state(spec)
    if info is None:
        return None
    if not _is_server(info.pid):
        if clean:  # its server died without cleaning up (killed, or its host was)
            _remove_state(spec, info.pid)
        return None
    return info if _accepting(info) else None


def find_running(name: str | None = None) -> ServerInfo | None:
    """Return a running server for the embedded model, started here or elsewhere.

    A server busy generating counts: it is found by its pid and an accepted TCP
    connection, not by an HTTP answer it may take minutes to give.  A state file
    whose server is dead is removed (when no other process holds the start lock).

    Args:
        name: embedded model short name (default model if None).
    """
    spec = get_spec(name)
    with _start_lock(spec, timeout=0) as locked:
        return _lookup(spec, clean=locked)


@contextlib.contextmanager
def _start_lock(spec: LocalModelSpec, timeout: float | None = None) -> Iterator[bool]:
    """An exclusive lock (``flock``) across processes around find-or-start, so two
    processes never start two servers for one model.

    Yields True once held; with ``timeout`` (seconds; 0 = one try) it gives up after
    that long and yields False."""
    path = cache_dir() / f"server-{spec.name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | (0 if deadline is None else fcntl.LOCK_NB))
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:  # type: ignore[operator]
                    yield False
                    return
                time.sleep(0.05)
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_command(model_path: Path, alias: str, port: int, *, n_ctx: int = DEFAULT_N_CTX,
                   threads: int | None = None) -> list[str]:
    """The command that runs llama-cpp-python's server for the embedded model.

    Args:
        model_path: the GGUF weights file.
        alias: the model name clients send (``openai/<alias>`` for litellm).
        port: TCP port on 127.0.0.1.
        n_ctx: context window in tokens.
        threads: CPU threads for generation and prompt processing (default: all
            cores; llama.cpp would use half).

    ``--logits_all False``: llama-cpp-python's server keeps the logits of every
    position by default, an n_ctx x vocabulary float array (8,192 x 151,936 x 4
    bytes, about 5 GB for Qwen2.5); replies need the last position's only (which
    llama.cpp's sampler reads itself), and requests for ``logprobs`` fail without it.
    ``bench/bench_memory.py`` measures both and checks replies at temperature 0
    are the same.
    """
    threads = threads or os.cpu_count() or 2
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path),
            "--model_alias", alias, "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", str(n_ctx), "--n_threads", str(threads),
            "--n_threads_batch", str(threads), "--verbose", "False",
            "--logits_all", "False"]


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
        running = _lookup(spec, clean=True)
        if running is not None:
            return running
        if importlib.util.find_spec("llama_cpp") is None:
            raise LocalModelError(
                "the embedded model needs llama-cpp-python: pip install 'rlm-kernel[local]'"
            )
        path = prepare(spec.name)
        port = _free_port()
        cmd = server_command(path, spec.name, port, n_ctx=n_ctx, threads=threads)
        log = _log_path(spec).open("wb")
        # A session of its own: Ctrl-C or a kernel interrupt (sent to the process
        # group) must not kill the server mid-run.  It still dies with this process.
        try:
            proc = _spawner.popen(_with_parent_death(cmd), stdout=log,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  start_new_session=True)
        finally:
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
                proc.wait()
                raise LocalModelError(
                    f"the model server did not answer within {timeout:.0f} s: {_log_tail(spec)}"
                )
            time.sleep(0.25)
        _servers[spec.name] = (proc, info)
        _write_state(spec, info)
        return info


# Run by the child's own interpreter, then replaced by the server (``execv`` keeps
# the setting): ask Linux to SIGKILL it when its parent dies (``prctl``
# PR_SET_PDEATHSIG = 1, from <linux/prctl.h>), and stop if the parent died already.
# SIGKILL, not SIGTERM: uvicorn waits for an in-flight generation on SIGTERM, which
# kept orphans generating for minutes; the server holds nothing worth saving.
_PARENT_DEATH = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit('rlm-kernel: the process that started the server is gone')\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])\n"
)


def _with_parent_death(cmd: list[str]) -> list[str]:
    """``cmd`` (a ``sys.executable`` command) wrapped so that its process is killed
    with the one starting it (Linux); unchanged elsewhere."""
    if not sys.platform.startswith("linux"):
        return cmd
    return [sys.executable, "-c", _PARENT_DEATH, str(os.getpid()), *cmd[1:]]


class _Spawner:
    """Starts child processes from one thread that lives as long as the process.

    Linux sends the parent-death signal when the *thread* that forked the child
    ends, not the process: a server started from a worker thread (a batched
    sub-call's pool) would be killed when the pool shuts down.  This thread never
    ends before the process does (a daemon thread; a forked child starts its own).
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()

    def popen(self, cmd: list[str], **kwargs: Any) -> subprocess.Popen:
        """``subprocess.Popen(cmd, **kwargs)``, run on the spawner thread.

        Raises:
            OSError: the program cannot be started (as ``Popen`` raises it).
        """
        with self._guard:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, daemon=True,
                                                name="rlm-server-spawner")
                self._thread.start()
        done: Future[subprocess.Popen] = Future()
        self._jobs.put((cmd, kwargs, done))
        return done.result()

    def _serve(self) -> None:
        while True:
            cmd, kwargs, done = self._jobs.get()
            try:
                done.set_result(subprocess.Popen(cmd, **kwargs))
            except BaseException as exc:  # handed to the caller
                done.set_exception(exc)


_spawner = _Spawner()


def _log_tail(spec: LocalModelSpec, lines: int = 3) -> str:
    try:
        text = _log_path(spec).read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return " | ".join(text[-lines:]) or "empty log"


def stop_server(name: str | None = None, grace: float = 3.0) -> bool:
    """Stop the server this process started for ``name``; True if one was stopped.

    Args:
        name: embedded model short name (default model if None).
        grace: seconds to wait after SIGTERM before SIGKILL (a server busy
            generating finishes its request first on SIGTERM).

    The state file is removed only if it still names this server: a server some
    other process started, and its state file, are left alone.
    """
    spec = get_spec(name)
    entry = _servers.pop(spec.name, None)
    if entry is None:
        return False
    proc, info = entry
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    with _start_lock(spec, timeout=2.0):  # best effort when another process holds it
        _remove_state(spec, info.pid)
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

        A server that died during the request (killed, out of memory) is started
        again and the request sent once more; any other failure is raised.

        Raises:
            LLMError: the weights cannot be prepared, the server cannot start,
                or the request failed (the message names the cause).
        """
        self._serve()
        try:
            return super().complete(messages, **kwargs)
        except LLMError:
            if find_running(self.local_name) is not None:  # alive: the error is real
                raise
        self._serve()
        return super().complete(messages, **kwargs)

    def _serve(self) -> None:
        try:
            self.api_base = ensure_server(self.local_name).api_base
        except LocalModelError as exc:
            raise LLMError(f"embedded model: {exc}") from exc
