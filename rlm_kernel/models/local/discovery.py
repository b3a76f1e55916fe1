"""Finding the embedded model's server from any process: the state file
(``server-<name>.json`` in the cache directory), liveness checks and the start lock.

Who may do what with the state file: a process finds a server through it (a server
busy generating counts as running: its pid is a live llama.cpp server and its port
takes connections), starts one only while holding ``server-<name>.lock``
(``flock``), deletes the file only if it wrote it (its server's pid), and removes a
file whose pid is dead.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from .weights import LocalModelSpec, cache_dir

__all__ = ["ServerInfo"]


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


def _log_tail(spec: LocalModelSpec, lines: int = 3) -> str:
    try:
        text = _log_path(spec).read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return " | ".join(text[-lines:]) or "empty log"
