"""An executor that runs model code in a child process behind a wall the child cannot widen.

:class:`IsolatedExecutor` is an :class:`~rlm_kernel.executors.Executor`: the engine binds
its variables and its functions (``llm_query``, ``FINAL`` ... closures over the host's
budget, depth and ``FINAL`` record) into :attr:`IsolatedExecutor.namespace` and calls
:meth:`IsolatedExecutor.execute`, exactly as with the in-process
:class:`~rlm_kernel.executors.plain.PlainExecutor`.  Here the namespace lives in a worker
process (:mod:`rlm_kernel.executors.worker`), and :attr:`namespace` is a proxy:

* setting a data value pickles it to the child once; setting a host callable registers
  it in a table on the host and binds a stub in the child that calls it back over the
  socket (the host serves those calls while the step runs).  The child can call only
  what was registered: there is no generic call, attribute or import request;
* getting a name fetches the child's value.  Bytes from the child are never given to
  :func:`pickle.loads`: :func:`safe_loads` allows plain data types only (builtins'
  containers and scalars, ``collections``, ``datetime``, ``decimal``, ``fractions``,
  ``uuid``, ``pathlib``, numpy arrays); anything else arrives as a
  :class:`RemoteValue` (its guarded ``repr``, made in the child) or a
  :class:`RemoteFunction`, which put back into the namespace rebind the child's own
  object.  A value the host bound and model code did not rebind is answered by the
  host's own object (no transfer; ``is`` holds); a copy of a child value is kept while
  the child's value is unchanged (a digest the child compares), so identity holds
  between steps for values that did not change.

Limits held by the operating system (set in the child before model code runs):

* **time**: the child applies the in-process limit of
  :mod:`~rlm_kernel.executors.timeouts` (the namespace survives); ``kill_grace``
  seconds past the limit the host sends ``SIGTERM`` to the child's process group, and
  ``SIGKILL`` ``kill_grace`` seconds later.  The child is then restarted with the last
  good snapshot of its namespace (pickled in the child after every step that returned;
  the host keeps the bytes, never loads them) and the step's output lists the names
  that were lost;
* a child that dies on its own (``os._exit``, a segfault, ``SIGKILL``) is a failed
  step with the reason, restarted likewise;
* **memory** (``RLIMIT_AS``, ``memory_limit`` bytes), **core dumps** off, **CPU** per
  step (``RLIMIT_CPU`` soft limit, ``cpu_seconds``), **processes**: a ``pids`` cgroup
  of ``max_processes`` when the host may make one (root), else ``RLIMIT_NPROC`` set to
  the user's current count plus ``max_processes`` (``RLIMIT_NPROC`` counts every
  process of the user and does not apply to root); a step that reaches the process
  limit has its processes killed and the child restarted;
* **network** off unless ``network=True``: the child moves into a new network namespace
  (no interface up) with ``unshare(2)``, as root or through a user namespace; where
  that is refused the executor logs a warning and :attr:`IsolatedExecutor.limits` says
  ``network: on``;
* a **PID namespace** where allowed: model code cannot see or signal the host (its
  parent is PID 1 of the namespace, an init that reaps orphans); when the child is
  killed, the kernel kills everything it started;
* **files**, with ``workdir``: model code runs in that folder, and nothing outside it is
  writable: the child builds a mount namespace where every mount is read-only but the
  working folder, and ``/tmp`` and ``/dev/shm`` are private ``tmpfs`` mounts of
  ``tmp_bytes`` each (so programs that need a scratch folder work; what they write
  there never reaches the host and is gone when the child ends; ``tmp_bytes=None``
  leaves them read-only too); see :func:`~rlm_kernel.executors.worker.enter_wall`.
  Reading is not restricted.  Where the platform refuses (not Linux >= 5.12, no user
  namespaces), the executor logs a warning and :attr:`IsolatedExecutor.limits` says
  ``files: not walled (...)``.  The file helpers of
  :class:`~rlm_kernel.executors.workfolder.WorkFolder`, bound into the namespace, are
  copied into the child (callables that carry
  :data:`~rlm_kernel.executors.workfolder.PORTABLE` are pickled, not served), so
  ``bash`` and ``apply_patch`` run behind the same wall;
* the child's environment has no secret variables (names like ``*_API_KEY``; see
  :mod:`~rlm_kernel.executors.redaction`), and its stdout and stderr are pipes: output
  (``print`` or ``os.write(1, ...)``) streams to ``on_output`` through the same capped,
  coalesced, redacted :class:`~rlm_kernel.executors.streams.StreamTee` as in-process.

:meth:`IsolatedExecutor.close` (or leaving its ``with`` block, or garbage collection)
kills the child's process group and every process of its cgroup.

Not held: a value the host bound and model code changed in place (without rebinding
it) reads back on the host as the host's own object when its pickle is over
:data:`~rlm_kernel.executors.worker.RECHECK_BYTES` (smaller ones are compared);
arguments of host functions and values read back that are not plain data arrive as
:class:`RemoteValue`; reading files is not restricted, and without ``workdir`` neither
is writing them.
"""

from __future__ import annotations

import builtins
import contextvars
import io
import itertools
import logging
import os
import pickle
import queue
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import types
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Any

from ..repl_types import REPLResult
from ..termination import FinalOutput
from .redaction import SECRET_NAME, Redactor
from .streams import MAX_KEPT_CHARS, OutputCallback, StreamTee
from .timeouts import timeout_message
from .worker import ERRORS, WALL_REFUSED, read_frame, write_message
from .workfolder import PORTABLE

__all__ = ["IsolatedExecutor", "IsolatedNamespace", "RemoteValue", "RemoteFunction",
           "WorkerError", "safe_loads", "DEFAULT_MEMORY", "DEFAULT_PROCESSES",
           "DEFAULT_TMP_BYTES"]

log = logging.getLogger(__name__)

DEFAULT_MEMORY = 4 << 30
"""Address space of the child (``RLIMIT_AS``), bytes."""
DEFAULT_PROCESSES = 64
"""Processes model code may have running at once (besides the worker's own)."""
DEFAULT_TMP_BYTES = 256 << 20
"""Size of each private ``tmpfs`` (``/tmp``, ``/dev/shm``) behind the working-folder wall,
bytes."""
_OWN_PROCESSES = 3  # outer, init and worker
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_MISSING = object()


# -- what may come back from the child -------------------------------------------------
_BUILTIN_TYPES = frozenset({
    "int", "float", "complex", "str", "bytes", "bytearray", "list", "tuple", "dict", "set",
    "frozenset", "bool", "slice", "range", "NoneType", "Ellipsis", "NotImplemented"})
_ALLOWED_GLOBALS = frozenset({
    ("collections", "OrderedDict"), ("collections", "defaultdict"), ("collections", "deque"),
    ("collections", "Counter"), ("collections", "ChainMap"),
    ("datetime", "date"), ("datetime", "time"), ("datetime", "datetime"),
    ("datetime", "timedelta"), ("datetime", "timezone"),
    ("decimal", "Decimal"), ("fractions", "Fraction"),
    ("uuid", "UUID"), ("uuid", "SafeUUID"),
    ("pathlib", "PurePosixPath"), ("pathlib", "PureWindowsPath"), ("pathlib", "PosixPath"),
    ("_codecs", "encode"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "scalar"),
})


class _SafeUnpickler(pickle.Unpickler):
    """An unpickler that builds plain data only: ``find_class`` allows the types listed
    in :data:`_ALLOWED_GLOBALS`, builtins' data types and builtins' exception classes
    (see "Restricting Globals" in the :mod:`pickle` documentation)."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins":
            if name in _BUILTIN_TYPES:
                return super().find_class(module, name)
            value = getattr(builtins, name, None)
            if isinstance(value, type) and issubclass(value, BaseException):
                return value
        elif (module, name) in _ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("persistent references are not accepted")


def safe_loads(data: bytes) -> Any:
    """Load a pickle from the child, allowing plain data types only.

    Args:
        data: pickle bytes (untrusted).

    Raises:
        pickle.UnpicklingError: the pickle needs a type that is not plain data.
        Exception: other errors of malformed data (``EOFError``, ``ValueError`` ...).
    """
    return _SafeUnpickler(io.BytesIO(data)).load()


class RemoteValue:
    """A value of the child's that cannot be copied to the host: its guarded ``repr``.

    Attributes:
        type_name: the type's name in the child; text: the guarded repr; note: why
            it is not here; ref: the child's reference (binding this object to a name
            of the namespace binds the child's own object, while that child lives).
    """

    def __init__(self, type_name: str, text: str, note: str, ref: int | None = None,
                 generation: int = -1) -> None:
        self.type_name, self.text, self.note = type_name, text, note
        self.ref, self.generation = ref, generation

    def __repr__(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text

    def __reduce__(self) -> tuple[Any, ...]:
        return (str, (self.text,))


class RemoteFunction(RemoteValue):
    """A callable of the child's (a function model code defined): it lives in the child;
    calling it on the host raises."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{self.text} lives in the isolated REPL; call it from model code")


class WorkerError(RuntimeError):
    """The worker process could not be started or did not answer."""


# -- the child process -----------------------------------------------------------------
def _process_cgroup(max_pids: int) -> Path | None:
    """A new ``pids`` cgroup under the host's own, limited to ``max_pids``; None when the
    host may not make one."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    base: Path | None = None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):  # cgroup v1: the pids hierarchy wins
            base = Path("/sys/fs/cgroup/pids") / path.lstrip("/")
            break
        if controllers == "" and Path("/sys/fs/cgroup/cgroup.controllers").exists():
            base = Path("/sys/fs/cgroup") / path.lstrip("/")  # cgroup v2 (unified)
    if base is None:
        return None
    folder = base / f"rlm-worker-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        folder.mkdir()
    except OSError:
        return None
    try:
        (folder / "pids.max").write_text(str(max_pids))
        return folder
    except OSError:
        _remove_cgroup(folder)
        return None


def _cgroup_pids(folder: Path) -> list[int]:
    try:
        return [int(p) for p in (folder / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _limit_hits(folder: Path | None) -> int:
    """How many times the cgroup's process limit refused a fork."""
    if folder is None:
        return 0
    try:
        for line in (folder / "pids.events").read_text().splitlines():
            if line.startswith("max "):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _kill_cgroup(folder: Path) -> None:
    """SIGKILL every process of the cgroup until it is empty (a fork bomb refills it)."""
    for _ in range(200):
        pids = _cgroup_pids(folder)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)
    log.warning("processes left in %s after repeated kills", folder)


def _remove_cgroup(folder: Path) -> None:
    for _ in range(100):
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)
    log.warning("could not remove the cgroup %s", folder)


def _user_processes() -> int:
    """Processes of this real user now (what ``RLIMIT_NPROC`` counts)."""
    uid, count = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


def _exit_reason(code: int | None) -> str:
    """Readable words for a worker's exit status (``Popen.returncode`` or the
    128 + signal the worker's init reports)."""
    if code is None:
        return "stopped answering"
    number = -code if code < 0 else code - 128 if code > 128 else 0
    if number:
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"was killed by {name}"
    return f"exited with status {code}"


class _Child:
    """One worker process: its socket, its output pipes and the threads reading them."""

    def __init__(self, config: dict[str, Any], env: dict[str, str], python: str,
                 start_timeout: float, max_frame: int) -> None:
        self.max_frame = max_frame
        host, child = socket.socketpair()
        cfg = {**config, "fd": child.fileno()}
        self.proc = subprocess.Popen(
            [python, "-m", "rlm_kernel.executors.worker", _json(cfg)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            pass_fds=(child.fileno(),), start_new_session=True, env=env, close_fds=True)
        child.close()
        self.sock = host
        self.sink: Callable[[str, str], None] | None = None
        self.marker = b""
        self.seen = {"stdout": threading.Event(), "stderr": threading.Event()}
        self.early: list[str] = []  # what the worker wrote outside any step (kept short)
        self.readers = [threading.Thread(target=self._read, args=(name, pipe),
                                         name=f"rlm-isolated-{name}", daemon=True)
                        for name, pipe in (("stdout", self.proc.stdout),
                                           ("stderr", self.proc.stderr))]
        for reader in self.readers:
            reader.start()
        try:
            ready = self.receive(start_timeout)
        except TimeoutError:
            ready = None
        if not isinstance(ready, tuple) or ready[0] != "ready":
            self.kill()
            raise WorkerError("the isolated REPL process did not start "
                              f"({_exit_reason(self.proc.poll())}): "
                              + "".join(self.early)[-2000:])
        info = ready[2]
        self.pid: int = int(info.get("pid", self.proc.pid))
        self.notes: list[str] = [str(n) for n in info.get("notes", [])]
        self.pid_namespace = info.get("ns_pid") == 2

    def _read(self, name: str, pipe: Any) -> None:
        """Forward a pipe to :attr:`sink`, decoded; strip and signal step markers."""
        import codecs

        decoder = codecs.getincrementaldecoder("utf-8")(ERRORS)
        fd, carry = pipe.fileno(), b""
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                self._emit(name, decoder.decode(carry, final=True))
                self.seen[name].set()
                return
            data = carry + chunk
            while True:
                marker = self.marker
                at = data.find(marker) if marker else -1
                if at < 0:
                    break
                self._emit(name, decoder.decode(data[:at], final=True))
                data = data[at + len(marker):]
                self.seen[name].set()
            keep = _partial_suffix(data, self.marker)
            carry = data[len(data) - keep:] if keep else b""
            self._emit(name, decoder.decode(data[: len(data) - keep]))

    def _emit(self, name: str, text: str) -> None:
        if not text:
            return
        sink = self.sink
        if sink is not None:
            sink(name, text)
        else:
            if sum(map(len, self.early)) < 20_000:
                self.early.append(text)
            log.debug("isolated REPL %s outside a step: %r", name, text[:200])

    def send(self, message: tuple[Any, ...]) -> None:
        write_message(self.sock, message)

    def receive(self, timeout: float | None) -> tuple[Any, ...] | None:
        """The next message; None when the child is gone.

        Raises:
            TimeoutError: nothing arrived within ``timeout`` seconds.
        """
        if timeout is not None:
            ready, _, _ = select.select([self.sock], [], [], max(timeout, 0))
            if not ready:
                raise TimeoutError
        try:
            frame = read_frame(self.sock, self.max_frame)
        except OSError as exc:
            log.warning("isolated REPL channel failed: %s", exc)
            return None
        if frame is None:
            return None
        try:
            message = safe_loads(frame)
        except Exception as exc:  # noqa: BLE001 - a forged frame: the child is not trusted
            log.warning("isolated REPL sent a message that is not plain data: %s", exc)
            return None
        return message if isinstance(message, tuple) and message else None

    def signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except OSError:
            pass

    def kill(self) -> None:
        """SIGKILL the process group and reap the worker."""
        self.signal_group(signal.SIGKILL)
        try:
            self.proc.kill()
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            log.warning("isolated REPL process %d did not end after SIGKILL", self.proc.pid)
        try:
            self.sock.close()
        except OSError:
            pass

def _partial_suffix(data: bytes, marker: bytes) -> int:
    """Length of the longest end of ``data`` that begins ``marker``."""
    for k in range(min(len(marker) - 1, len(data)), 0, -1):
        if data.endswith(marker[:k]):
            return k
    return 0


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


def _child_env() -> dict[str, str]:
    """The host's environment without secrets, with this package importable."""
    env = {k: v for k, v in os.environ.items() if not SECRET_NAME.search(k)}
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = _PACKAGE_ROOT + (os.pathsep + path if path else "")
    env.pop("PYTHONSTARTUP", None)
    return env


# -- the namespace proxy ----------------------------------------------------------------
class IsolatedNamespace(MutableMapping[str, Any]):
    """The host's view of the child's namespace (see the module docstring).

    Args:
        executor: the executor whose child holds the values.
    """

    def __init__(self, executor: IsolatedExecutor) -> None:
        self._ex = weakref.proxy(executor)
        self._functions: dict[int, Any] = {}
        self._keys: dict[int, int] = {}  # id(host callable) -> key
        self._host_values: dict[str, tuple[Any, int]] = {}
        self._copies: dict[str, tuple[Any, str]] = {}
        self._bindings: dict[str, tuple[Any, ...]] = {}
        self._versions = itertools.count(1)
        self._key_numbers = itertools.count(1)

    # -- MutableMapping -------------------------------------------------------------------
    def __getitem__(self, name: str) -> Any:
        if not self._ex.in_step:
            token = self._bindings.get(name)
            if token is None:
                raise KeyError(name)
            local = self._local(name, token)
            if local is not _MISSING:
                return local
        reply = self._ex.request("get", name, self._copies.get(name, (None, None))[1])
        if reply.get("missing"):
            raise KeyError(name)
        return self._value(name, reply)

    def __setitem__(self, name: str, value: Any) -> None:
        if not isinstance(name, str):
            raise TypeError(f"namespace names are str, not {type(name).__name__}")
        version = next(self._versions)
        kind, payload = self._encode(name, value)
        self._ex.request("set", name, kind, payload, version, check=True)
        self._copies.pop(name, None)
        if kind == "stub":
            self._bindings[name] = ("stub", payload[0])
            self._host_values.pop(name, None)
        elif kind == "ref":
            self._bindings[name] = ("child",)
            self._host_values.pop(name, None)
        else:
            self._host_values[name] = (value, version)
            self._bindings[name] = ("host", version)

    def __delitem__(self, name: str) -> None:
        reply = self._ex.request("del", name)
        self._bindings.pop(name, None)
        self._host_values.pop(name, None)
        self._copies.pop(name, None)
        if reply.get("missing"):
            raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        if self._ex.in_step:
            return iter(list(self._ex.request("keys").get("bindings", {})))
        return iter(list(self._bindings))

    def __len__(self) -> int:
        return len(list(iter(self)))

    def __contains__(self, name: object) -> bool:
        if not self._ex.in_step:
            return name in self._bindings
        return isinstance(name, str) and not self._ex.request("has", name).get("missing")

    # -- helpers ----------------------------------------------------------------------------
    def _local(self, name: str, token: tuple[Any, ...]) -> Any:
        """The value of ``name`` known on the host for ``token``, or ``_MISSING``."""
        if token[0] == "stub" and token[1] in self._functions:
            return self._functions[token[1]]
        if token[0] == "host":
            held = self._host_values.get(name)
            if held is not None and held[1] == token[1]:
                return held[0]
        return _MISSING

    def _value(self, name: str, reply: dict[str, Any]) -> Any:
        """The host's object for a ``get`` reply."""
        token = reply.get("token")
        if token is not None:
            local = self._local(name, tuple(token))
            if local is not _MISSING:
                return local
            return RemoteValue("object", f"<{name}: a value of the host's no longer held>",
                               "unknown host binding")
        if reply.get("same"):
            return self._copies[name][0]
        kind, generation = reply.get("kind"), self._ex.generation
        if kind == "module":
            module = sys.modules.get(str(reply.get("module")))  # never imported on request
            return module if module is not None else types.ModuleType(str(reply.get("module")))
        text, type_name = str(reply.get("repr")), str(reply.get("type"))
        cls = RemoteFunction if reply.get("callable") else RemoteValue
        if kind == "value":
            try:
                value = safe_loads(reply["data"])
            except Exception as exc:  # noqa: BLE001 - not plain data: its repr instead
                value = cls(type_name, text, f"not plain data ({exc})", reply.get("ref"),
                            generation)
            self._copies[name] = (value, str(reply.get("digest")))
            return value
        return cls(type_name, text, str(reply.get("reason", "cannot be copied")),
                   reply.get("ref"), generation)

    def _encode(self, name: str, value: Any) -> tuple[str, Any]:
        """How ``value`` goes to the child: (kind, payload) for the worker's ``set``."""
        if isinstance(value, RemoteValue) and value.ref is not None \
                and value.generation == self._ex.generation:
            return "ref", value.ref
        if isinstance(value, types.ModuleType):
            return "module", value.__name__
        if callable(value) and getattr(value, PORTABLE, False) is True:
            try:  # runs in the child (behind its wall), not served from the host
                return "value", pickle.PickleBuffer(pickle.dumps(value, protocol=5))
            except Exception as exc:  # noqa: BLE001 - served from the host instead
                log.warning("%r cannot be copied into the isolated REPL (%s); the host "
                            "serves it", value, exc)
        if callable(value) and not isinstance(value, type) \
                and not isinstance(value, RemoteValue):
            key = self._keys.get(id(value))
            if key is None or self._functions.get(key) is not value:
                key = next(self._key_numbers)
                self._functions[key] = value
                self._keys[id(value)] = key
            return "stub", (key, getattr(value, "__name__", name), getattr(value, "__doc__", None))
        try:
            return "value", pickle.PickleBuffer(pickle.dumps(value, protocol=5))
        except Exception as exc:  # noqa: BLE001 - the child gets a stand-in
            log.warning("variable %r (%s) cannot be copied into the isolated REPL: %s",
                        name, type(value).__name__, exc)
            return "placeholder", (f"<{type(value).__name__} object: could not be copied "
                                   f"into the isolated REPL ({type(exc).__name__})>")

    def resend(self) -> None:
        """Bind the host's own values and functions again (in a new child)."""
        for name, token in list(self._bindings.items()):
            if token[0] == "stub" and token[1] in self._functions:
                fn = self._functions[token[1]]
                self._ex.request("set", name, "stub", (token[1], getattr(fn, "__name__", name),
                                                       getattr(fn, "__doc__", None)), 0,
                                 check=True)
            elif token[0] == "host" and name in self._host_values:
                value, version = self._host_values[name]
                kind, payload = self._encode(name, value)
                self._ex.request("set", name, kind, payload, version, check=True)
        self._copies.clear()

    def function(self, key: int) -> Any:
        """The host callable registered as ``key``, or None."""
        return self._functions.get(key)

    def update_bindings(self, bindings: Mapping[str, Any]) -> None:
        self._bindings = {str(n): tuple(t) for n, t in bindings.items()}
        for name in [n for n in self._host_values if self._bindings.get(n, ("",))[0] != "host"]:
            del self._host_values[name]
        for name in [n for n in self._copies if n not in self._bindings]:
            del self._copies[name]


# -- the executor ------------------------------------------------------------------------
class IsolatedExecutor:
    """Run model code in a worker process (see the module docstring).

    Args:
        namespace: initial variables (copied into the child; callables registered
            as host functions).
        memory_limit: the child's address space in bytes (``RLIMIT_AS``); None: none.
        max_processes: processes model code may run at once; None: no limit.
        cpu_seconds: CPU seconds per step (``RLIMIT_CPU`` soft limit); None: none.
        network: let model code use the network (default: a namespace without it).
        cwd: the child's working folder (default: the host's; with ``workdir``, that).
        workdir: the only folder model code may write (see the module docstring):
            its working folder, behind a mount-namespace wall; None: no wall.
        tmp_bytes: with ``workdir``, the size in bytes of the private ``/tmp`` and
            ``/dev/shm``; None: they are read-only like the rest.
        kill_grace: seconds after a step's limit before ``SIGTERM``, and again before
            ``SIGKILL``.
        max_output_chars: characters of each stream of a step kept and shown live.
        snapshot: pickle the namespace after each step, to restart from after a kill.
        start_timeout: seconds to wait for the worker to start.
        python: the interpreter for the worker (default: this one).

    Raises:
        WorkerError: the worker did not start.
        FileNotFoundError / NotADirectoryError: ``workdir`` is missing / not a folder.
        ValueError: ``cwd`` and ``workdir`` differ, or ``workdir`` is ``/``.
    """

    def __init__(self, namespace: Mapping[str, Any] | None = None, *,
                 memory_limit: int | None = DEFAULT_MEMORY,
                 max_processes: int | None = DEFAULT_PROCESSES,
                 cpu_seconds: float | None = None, network: bool = False,
                 cwd: str | os.PathLike[str] | None = None, kill_grace: float = 1.0,
                 max_output_chars: int = MAX_KEPT_CHARS, snapshot: bool = True,
                 start_timeout: float = 30.0, python: str | None = None,
                 workdir: str | os.PathLike[str] | None = None,
                 tmp_bytes: int | None = DEFAULT_TMP_BYTES) -> None:
        self.memory_limit, self.max_processes = memory_limit, max_processes
        self.cpu_seconds, self.network, self.kill_grace = cpu_seconds, network, kill_grace
        self.max_output_chars, self.take_snapshots = max_output_chars, snapshot
        self.workdir: str | None = None
        self.tmp_bytes = tmp_bytes
        if workdir is not None:
            self.workdir = os.path.realpath(os.fspath(workdir))
            if not os.path.exists(self.workdir):
                raise FileNotFoundError(f"working folder {os.fspath(workdir)!r} does not exist")
            if not os.path.isdir(self.workdir):
                raise NotADirectoryError(f"working folder {os.fspath(workdir)!r} is not a "
                                         "folder")
            if self.workdir == os.path.realpath("/"):
                raise ValueError("the working folder cannot be / (nothing would be walled)")
            if cwd is not None and os.path.realpath(os.fspath(cwd)) != self.workdir:
                raise ValueError(f"cwd {os.fspath(cwd)!r} is not the working folder "
                                 f"{self.workdir!r}")
            cwd = self.workdir
        self.cwd = str(cwd) if cwd is not None else os.getcwd()
        self.start_timeout, self.python = start_timeout, python or sys.executable
        self.in_step = False
        self.generation = 0
        self.restarts = 0
        self.limits: dict[str, str] = {}
        self._snapshot: dict[str, bytes] = {}
        self._lost: list[str] = []
        self._rids = itertools.count(1)
        self._waiting: dict[int, queue.Queue[dict[str, Any] | None]] = {}
        self._lock = threading.RLock()  # one requester on the socket outside steps
        self._send_lock = threading.Lock()
        self._step_final: dict[str, Any] | None = None
        self._cgroup: Path | None = None
        self._child: _Child | None = None
        self._closed = False
        self.namespace: IsolatedNamespace = IsolatedNamespace(self)
        self._start()
        self._finalizer = weakref.finalize(self, _cleanup, self._child, self._cgroup)
        if namespace:
            self.namespace.update(namespace)

    # -- life -------------------------------------------------------------------------------
    def _start(self) -> None:
        """Start a worker (a new generation) with the configured limits."""
        if self._cgroup is None and self.max_processes is not None:
            self._cgroup = _process_cgroup(self.max_processes + _OWN_PROCESSES)
        nproc = None
        if self._cgroup is None and self.max_processes is not None and os.getuid() != 0:
            nproc = _user_processes() + self.max_processes + _OWN_PROCESSES
        config = {"cwd": self.cwd, "memory": self.memory_limit, "nproc": nproc,
                  "cgroup": str(self._cgroup) if self._cgroup else None,
                  "network": self.network, "pid_ns": True, "workdir": self.workdir,
                  "tmp_bytes": self.tmp_bytes}
        max_frame = (self.memory_limit or 16 << 30) + (64 << 20)
        self._child = _Child(config, _child_env(), self.python, self.start_timeout, max_frame)
        self.generation += 1
        self.limits = self._describe(self._child, nproc)
        for note in self._child.notes:
            log.warning("isolated REPL: %s", note)
        if hasattr(self, "_finalizer"):
            self._finalizer.detach()
            self._finalizer = weakref.finalize(self, _cleanup, self._child, self._cgroup)

    def _describe(self, child: _Child, nproc: int | None) -> dict[str, str]:
        notes = " ".join(child.notes)
        network = "on" if self.network or "namespaces not available" in notes and \
            "network namespace only" not in notes else "off"
        processes = (f"cgroup pids.max {self.max_processes}" if self._cgroup
                     else f"RLIMIT_NPROC {nproc}" if nproc else "not limited")
        return {"memory": f"{self.memory_limit} bytes" if self.memory_limit else "not limited",
                "processes": processes, "network": network,
                "pid_namespace": "yes" if child.pid_namespace else "no",
                "cpu_per_step": f"{self.cpu_seconds} s" if self.cpu_seconds else "not limited",
                "files": self._describe_files(child)}

    def _describe_files(self, child: _Child) -> str:
        """The ``files`` entry of :attr:`limits`."""
        if self.workdir is None:
            return "not restricted"
        refused = [n for n in child.notes if n.startswith(WALL_REFUSED)]
        if refused:
            return f"not walled: {refused[0][len(WALL_REFUSED):].strip(' ()')}; model code " \
                   f"runs in {self.workdir} and may write anywhere the user may"
        tmp = (f"/tmp and /dev/shm private ({self.tmp_bytes} bytes each, gone with the "
               "REPL)" if self.tmp_bytes else "/tmp read-only")
        return f"read-only except {self.workdir}; {tmp}; reading not restricted"

    def close(self) -> None:
        """Kill the child and everything it started; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._finalizer()

    def __enter__(self) -> IsolatedExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """The host-visible pid of the worker running model code (None when closed)."""
        return None if self._closed or self._child is None else self._child.pid

    # -- requests -----------------------------------------------------------------------------
    def request(self, kind: str, *args: Any, check: bool = False) -> dict[str, Any]:
        """Send a request to the child and return its reply.

        Args:
            kind: ``get``, ``has``, ``set``, ``del``, ``keys`` or ``load`` (the
                worker's ``do_*``).
            check: raise if the child reports an error.

        Raises:
            WorkerError: the child is gone, closed, or (``check``) refused.
        """
        if self._closed or self._child is None:
            raise WorkerError("the isolated REPL is closed")
        child, rid = self._child, next(self._rids)
        if self.in_step:  # the step loop reads; it hands our reply over
            box: queue.Queue[dict[str, Any] | None] = queue.Queue()
            self._waiting[rid] = box
            try:
                self._send(child, (kind, rid, *args))
                reply = box.get()
            finally:
                self._waiting.pop(rid, None)
        else:
            with self._lock:
                self._send(child, (kind, rid, *args))
                reply = self._await(child, rid)
        if reply is None:
            raise WorkerError("the isolated REPL process is gone")
        if check and "error" in reply:
            raise WorkerError(f"the isolated REPL refused {kind}: {reply['error']}")
        return reply

    def _send(self, child: _Child, message: tuple[Any, ...]) -> None:
        with self._send_lock:
            try:
                child.send(message)
            except OSError as exc:
                raise WorkerError(f"the isolated REPL process is gone ({exc})") from exc

    def _await(self, child: _Child, rid: int) -> dict[str, Any] | None:
        """Read until the reply to ``rid`` (outside steps: host calls are refused)."""
        while True:
            try:
                message = child.receive(None)
            except TimeoutError:
                continue
            if message is None:
                return None
            if message[0] == "reply" and message[1] == rid:
                return message[2] if isinstance(message[2], dict) else {}
            if message[0] == "call":
                self._send(child, ("result", message[1], {"error": {
                    "type": "RuntimeError",
                    "message": "host functions can only be called while a step runs"}}))

    # -- a step ----------------------------------------------------------------------------
    def execute(self, code: str, *, timeout: float | None = None,
                on_output: OutputCallback | None = None) -> REPLResult:
        """Run ``code`` in the child; see :meth:`rlm_kernel.executors.Executor.execute`.

        Raises:
            KeyboardInterrupt: the user interrupted (the child's step is interrupted,
                or the child killed and restarted).
            WorkerError: the executor is closed, or a restarted worker did not start.
        """
        if self._closed or self._child is None:
            raise WorkerError("the isolated REPL is closed")
        redact = Redactor()
        out = StreamTee("stdout", on_output, max_chars=self.max_output_chars, redact=redact)
        err = StreamTee("stderr", on_output, max_chars=self.max_output_chars, redact=redact)
        start = time.perf_counter()
        child = self._child
        marker = b"\x00\x1erlm-step-end-" + uuid.uuid4().hex.encode() + b"\x1e\x00"
        for event in child.seen.values():
            event.clear()
        child.marker = marker
        child.sink = lambda name, text: (out if name == "stdout" else err).write(text)
        hits = _limit_hits(self._cgroup)
        self._step_final = None
        try:
            reply, problem, interrupted = self._run_step(child, code, timeout)
        finally:
            self.in_step = False
            for box in list(self._waiting.values()):  # no reply comes after the step
                box.put(None)
        if reply is not None:
            for event in child.seen.values():
                event.wait(2.0)
        child.sink = None
        final_output, success = None, False
        if reply is not None:
            success = bool(reply.get("success"))
            final_output = self._final(reply)
            self.namespace.update_bindings(reply.get("bindings", {}))
            if isinstance(reply.get("snapshot"), dict):
                self._snapshot = reply["snapshot"]
                self._lost = [str(n) for n in reply.get("lost", [])]
            if self._cgroup is not None and _limit_hits(self._cgroup) > hits:
                problem = (f"the step reached the limit of {self.max_processes} processes; "
                           "its processes were killed")
                success = False
        if problem is not None:
            err.write(self._recover(problem))
        out.flush()
        err.flush()
        if interrupted:
            raise KeyboardInterrupt
        return REPLResult(stdout=out.getvalue(), stderr=err.getvalue(), locals=self.namespace,
                          execution_time=time.perf_counter() - start, llm_calls=[],
                          success=success, final_output=final_output)

    def _run_step(self, child: _Child, code: str, timeout: float | None
                  ) -> tuple[dict[str, Any] | None, str | None, bool]:
        """Send the step and serve the child until its reply, a kill or its death.

        Returns:
            (the worker's reply or None, the problem to recover from or None,
            whether the user interrupted).
        """
        rid = next(self._rids)
        step_context = contextvars.copy_context()  # host calls run in it, as in-process
        with self._lock:
            self._send(child, ("exec", rid, code, timeout, self.cpu_seconds,
                               child.marker, self.take_snapshots))
            self.in_step = True
            limit = timeout if timeout and 0 < timeout <= threading.TIMEOUT_MAX else None
            # the child's own limit acts at ``limit``; the host's signals after that
            deadline = time.monotonic() + limit + self.kill_grace if limit else None
            stage, interrupted = 0, False  # 0 running, 1 SIGTERM sent, 2 SIGKILL sent
            while True:
                wait = None if deadline is None else deadline - time.monotonic()
                try:
                    message = child.receive(wait)
                except TimeoutError:
                    if stage == 2:
                        child.kill()
                        return None, self._killed_reason(timeout, interrupted), interrupted
                    child.signal_group(signal.SIGTERM if stage == 0 and not interrupted
                                       else signal.SIGKILL)
                    stage = 1 if stage == 0 and not interrupted else 2
                    deadline = time.monotonic() + self.kill_grace
                    continue
                except KeyboardInterrupt:
                    interrupted = True
                    try:
                        os.kill(child.pid, signal.SIGINT)
                    except OSError:
                        pass
                    deadline, stage = time.monotonic() + self.kill_grace, 1
                    continue
                if message is None:
                    try:  # the worker's status reaches the outer process in a moment
                        child.proc.wait(1.0)
                    except subprocess.TimeoutExpired:
                        pass
                    child.kill()
                    if stage:
                        return None, self._killed_reason(timeout, interrupted), interrupted
                    return None, (f"the REPL process {_exit_reason(child.proc.returncode)} "
                                  "during the step"), interrupted
                if message[0] == "call":  # in the step's context (a tracing span ...)
                    threading.Thread(target=step_context.copy().run,
                                     args=(self._serve_call, child, message),
                                     name="rlm-isolated-call", daemon=True).start()
                elif message[0] == "reply" and message[1] == rid:
                    reply = message[2] if isinstance(message[2], dict) else {}
                    if "error" in reply:
                        return None, f"the REPL process failed: {reply['error']}", interrupted
                    return reply, None, interrupted or bool(reply.get("interrupted"))
                elif message[0] == "reply":
                    box = self._waiting.get(message[1])
                    if box is not None:
                        box.put(message[2] if isinstance(message[2], dict) else {})

    def _killed_reason(self, timeout: float | None, interrupted: bool) -> str:
        if interrupted:
            return "the REPL process did not stop after the interrupt and was killed"
        return (timeout_message(timeout).rstrip("\n") + f"; the REPL process did not stop "
                f"within {self.kill_grace:g} s and was killed")

    def _serve_call(self, child: _Child, message: tuple[Any, ...]) -> None:
        """Run a host function the child called and send back its result or error."""
        _, cid, key, packed = message[:4]
        fn = self.namespace.function(key) if isinstance(key, int) else None
        try:
            if fn is None:
                raise RuntimeError(f"no host function number {key!r}")
            args = [_unpack_arg(a, self.generation) for a in packed[0]]
            kwargs = {str(k): _unpack_arg(v, self.generation) for k, v in packed[1].items()}
            value = fn(*args, **kwargs)
            try:
                reply: dict[str, Any] = {"value": pickle.dumps(value, protocol=5)}
            except Exception as exc:  # noqa: BLE001 - the child gets the text instead
                log.warning("the result of %s cannot go to the isolated REPL: %s", fn, exc)
                reply = {"value": pickle.dumps(repr(value), protocol=5)}
        except FinalOutput as exc:
            if self._step_final is None:
                self._step_final = exc.output
            reply = {"error": {"type": "FinalOutput",
                               "output": pickle.dumps(exc.output, protocol=5)}}
        except BaseException as exc:  # noqa: BLE001 - the child's model code gets it
            reply = {"error": {"type": type(exc).__name__, "module": type(exc).__module__,
                               "message": str(exc),
                               "base_only": not isinstance(exc, Exception)}}
        try:
            self._send(child, ("result", cid, reply))
        except WorkerError:
            pass

    def _final(self, reply: dict[str, Any]) -> dict[str, Any] | None:
        """The step's ``FINAL`` output when the step ended with one (model code may
        catch it): the host's record of it, else the child's."""
        if "final" not in reply and "final_repr" not in reply:
            return None
        if self._step_final is not None:
            return self._step_final
        if "final" in reply:
            try:
                value = safe_loads(reply["final"])
                if isinstance(value, dict):
                    return value
            except Exception:  # noqa: BLE001 - not plain data
                pass
        return {"answer": RemoteValue("object", str(reply.get("final_repr", "<answer>")),
                                      "not plain data"), "type": "direct"}

    def _recover(self, problem: str) -> str:
        """Kill what is left, start a new child from the last snapshot; the text that
        tells the model (ends with a newline)."""
        if self._child is not None:
            self._child.kill()
        if self._cgroup is not None:
            _kill_cgroup(self._cgroup)
        self.restarts += 1
        self._start()
        self.namespace.resend()
        failed = self.request("load", self._snapshot, check=True).get("lost", [])
        lost = sorted(set(self._lost) | {str(n) for n in failed})
        self.namespace.update_bindings(self.request("keys").get("bindings", {}))
        text = (f"{problem}.\nThe REPL was restarted with the variables as they were after "
                "the last step that finished; what this step changed is gone")
        if lost:
            text += f"; these could not be saved and are lost: {', '.join(lost)}"
        log.warning("isolated REPL restarted: %s", problem)
        return text + ".\n"


def _unpack_arg(packed: Any, generation: int) -> Any:
    """An argument of a host call: loaded when it is plain data, else its repr."""
    try:
        data, text, type_name = packed
    except (TypeError, ValueError):
        return RemoteValue("object", "<malformed argument>", "malformed")
    if isinstance(data, bytes):
        try:
            return safe_loads(data)
        except Exception:  # noqa: BLE001 - not plain data
            pass
    return RemoteValue(str(type_name), str(text), "not plain data", None, generation)


def _cleanup(child: _Child | None, cgroup: Path | None) -> None:
    """Kill a worker and its cgroup (the finalizer of :class:`IsolatedExecutor`)."""
    if child is not None:
        child.kill()
    if cgroup is not None:
        _kill_cgroup(cgroup)
        _remove_cgroup(cgroup)
