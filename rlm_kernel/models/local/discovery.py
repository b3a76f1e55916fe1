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

__all__ = ["ServerInfo", "accepting", "healthy", "is_server", "log_path", "log_tail", "read_state",
           "remove_state", "start_lock", "write_state"]


@dataclass(slots=True)
class ServerInfo:
    """A running model server: its model alias, port, process id, context size (tokens)
    and keep-alive (seconds idle before it stops itself; 0: it stops with its starter)."""

    model: str
    port: int
    pid: int
    n_ctx: int
    keep_alive: float = 0.0

    @property
    def api_base(self) -> str:
        """OpenAI-compatible base URL, e.g. ``http://127.0.0.1:43121/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"


def _state_path(spec: LocalModelSpec) -> Path:
    return cache_dir() / f"server-{spec.name}.json"


def log_path(spec: LocalModelSpec) -> Path:
    """The file the server of ``spec`` writes its output to (in the weights' cache)."""
    return cache_dir() / f"server-{spec.name}.log"


def healthy(info: ServerInfo, timeout: float = 2.0) -> bool:
    """True when the server answers ``GET /v1/models`` with 200 within ``timeout``
    seconds (a server busy with a request may not: see :func:`accepting`)."""
    try:
        with urllib.request.urlopen(f"{info.api_base}/models", timeout=timeout) as resp:
            return resp.status == 200
    except OSError:
        return False


def accepting(info: ServerInfo, timeout: float = 1.0) -> bool:
    """True when the server's port takes a TCP connection: a server busy generating
    (which may not answer HTTP within seconds) still accepts."""
    try:
        with socket.create_connection(("127.0.0.1", info.port), timeout=timeout):
            return True
    except OSError:
        return False


def is_server(pid: int) -> bool:
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


def read_state(spec: LocalModelSpec) -> ServerInfo | None:
    """The running server the state file of ``spec`` names, or None (no file, or not
    readable as one)."""
    try:
        return ServerInfo(**json.loads(_state_path(spec).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def write_state(spec: LocalModelSpec, info: ServerInfo) -> None:
    """Write the state file atomically (temp file + rename): a reader never sees half."""
    path = _state_path(spec)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(info)))
    os.replace(tmp, path)


def remove_state(spec: LocalModelSpec, pid: int) -> None:
    """Delete the state file if it still names ``pid`` (call with the start lock held)."""
    info = read_state(spec)
    if info is not None and info.pid == pid:
        with contextlib.suppress(OSError):
            _state_path(spec).unlink()


@contextlib.contextmanager
def start_lock(spec: LocalModelSpec, timeout: float | None = None) -> Iterator[bool]:
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
                if deadline is not None and time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.05)
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def log_tail(spec: LocalModelSpec, lines: int = 3) -> str:
    """The last ``lines`` lines of the server's log, joined with `` | `` (for an error
    message); ``"no log"`` or ``"empty log"`` when there are none."""
    try:
        text = log_path(spec).read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return " | ".join(text[-lines:]) or "empty log"
