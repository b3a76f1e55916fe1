"""The child side of :class:`~rlm_kernel.executors.isolated.IsolatedExecutor`.

Started by the host as ``python -m rlm_kernel.executors.worker CONFIG_JSON``, with a
socket to the host on the file descriptor ``CONFIG["fd"]`` and its stdout and stderr
on pipes the host reads.  Before any model code runs it

1. joins the process-count cgroup the host made (``CONFIG["cgroup"]``), sets the
   ``resource`` limits (``RLIMIT_CORE`` 0, ``RLIMIT_AS``, ``RLIMIT_NPROC``);
2. with a working folder (``CONFIG["workdir"]``), builds the wall of
   :func:`enter_wall`: a mount namespace where every mount is read-only but the working
   folder (and a private ``/tmp``); where the platform refuses, a note says so and the
   file system stays as it is;
3. moves into new namespaces where the platform allows (``unshare(2)`` through
   ``ctypes``: a network namespace with no interface up when the network is off; a
   PID namespace, so model code sees neither its parent nor any other process of
   the host); with a PID namespace it forks twice: an *outer* process the host
   started (waits), an *init* (PID 1 in the namespace: reaps orphans; when it
   ends the kernel kills everything left in the namespace) and the worker (PID 2);
4. says ``ready`` and serves the host's requests.

The wire: frames of an 8-byte big-endian length and a pickle.  What the host sends is
loaded with :func:`pickle.loads` (the host is trusted here); what this side sends is
loaded on the host by a restricted unpickler, so it is plain data: tuples, dicts,
``str``, ``bytes``, numbers, and values pickled one by one.

Requests (``(kind, request id, ...)``): ``set``, ``del``, ``get``, ``keys``, ``exec``,
``load``; this side sends ``reply`` and, while a step runs, ``call`` (a host function,
by key) and handles the host's requests that arrive while it waits for the answer.
Host functions are bound as :class:`HostFunction` stubs; they work only in the
worker process itself (not in a process model code forked), only while a step runs and
not from a thread an earlier step left running (a timer's ``FINAL`` would end a later
step; its ``llm_query`` calls would be spent outside the step that started it).  Model
code that writes ``call`` frames on the socket itself gets past that last check: the
host cannot tell the child's threads apart, but still budgets and records every call.
A ``SIGTERM`` is the host's (the step is past its time limit: ``StepTimeout``) only near
or past the limit; earlier, model code sent it, and it is a model error.
"""

from __future__ import annotations

import builtins
import codecs
import ctypes
import hashlib
import io
import json
import linecache
import logging
import os
import pickle
import pwd
import reprlib
import resource
import signal
import socket
import struct
import sys
import threading
import time
import traceback
import types
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

from ..termination import FinalOutput
from .host_state import step_scope
from .plain import PlainExecutor
from .thread_output import is_quarantined
from .timeouts import StepTimeout, time_limit

__all__ = ["HostFunction", "main", "read_frame", "write_frame", "read_message",
           "write_message", "enter_wall", "CLONE_NEWNET", "CLONE_NEWNS",
           "CLONE_NEWPID", "CLONE_NEWUSER", "RECHECK_BYTES", "WALL_REFUSED"]

log = logging.getLogger(__name__)

CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNS = 0x00020000
WALL_REFUSED = "files not walled"
"""How a note of the worker begins when the working-folder wall could not be built."""
HEADER = struct.Struct(">Q")
RECHECK_BYTES = 1 << 20
"""A value the host bound and model code did not rebind is re-pickled after a step to
see whether it changed in place only when its pickle is smaller than this (bytes)."""
PICKLE_PROTOCOL = 5
SIGTERM_MARGIN = 0.5
"""Seconds before a step's time limit from which a ``SIGTERM`` counts as the host's
(it sends one only ``kill_grace`` past the limit; this side's clock starts a little
later than the host's)."""
_BASIC = (str, bytes, int, float, bool, type(None), complex)
ERRORS = "rlm-surrogates"
"""Codec error handler of both ends of the output pipes: lone surrogates round-trip
(``surrogatepass``), other bytes that are not UTF-8 become U+FFFD."""


def _surrogates(exc: UnicodeError) -> tuple[str | bytes, int]:
    try:
        return codecs.lookup_error("surrogatepass")(exc)
    except UnicodeError:
        if isinstance(exc, UnicodeDecodeError):
            return "\ufffd", exc.start + 1
        raise exc from None


codecs.register_error(ERRORS, _surrogates)


# -- frames ------------------------------------------------------------------------------
def write_frame(sock: socket.socket, payload: bytes) -> None:
    """Send one frame: the length of ``payload`` (8 bytes, big-endian), then it.

    Raises:
        OSError: the other end is gone.
    """
    sock.sendall(HEADER.pack(len(payload)))
    sock.sendall(payload)


def write_message(sock: socket.socket, message: Any) -> None:
    """Send a host message: a count of out-of-band buffers, the pickle, the buffers
    (a :class:`pickle.PickleBuffer` in ``message``, such as a large value, is sent
    without being copied into the pickle).

    Raises:
        OSError: the other end is gone.
    """
    buffers: list[pickle.PickleBuffer] = []
    meta = pickle.dumps(message, protocol=PICKLE_PROTOCOL, buffer_callback=buffers.append)
    sock.sendall(HEADER.pack(len(buffers)))
    write_frame(sock, meta)
    for buffer in buffers:
        write_frame(sock, buffer.raw())  # type: ignore[arg-type]


def read_message(sock: socket.socket) -> Any:
    """Receive what :func:`write_message` sent (only ever from the trusted host);
    None when the socket closed."""
    head = _read_exact(sock, HEADER.size)
    if head is None:
        return None
    (count,) = HEADER.unpack(head)
    frames = [read_frame(sock) for _ in range(count + 1)]
    if any(f is None for f in frames):
        return None
    return pickle.loads(frames[0], buffers=frames[1:])  # type: ignore[arg-type]


def read_frame(sock: socket.socket, max_bytes: int | None = None) -> bytes | None:
    """Receive one frame's payload; None when the other end closed the socket.

    Args:
        sock: a connected stream socket.
        max_bytes: largest payload accepted (None: any).

    Raises:
        OSError: the frame is longer than ``max_bytes``, or the socket failed.
    """
    head = _read_exact(sock, HEADER.size)
    if head is None:
        return None
    (size,) = HEADER.unpack(head)
    if max_bytes is not None and size > max_bytes:
        raise OSError(f"a frame of {size:,} bytes is over the limit of {max_bytes:,}")
    body = _read_exact(sock, size)
    if body is None:
        raise OSError("the connection closed in the middle of a frame")
    return body


def _read_exact(sock: socket.socket, size: int) -> bytes | None:
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:], min(size - got, 1 << 24))
        if n == 0:
            return None
        got += n
    return bytes(buf) if size < 1 << 16 else buf  # type: ignore[return-value]


# -- the worker's streams ----------------------------------------------------------------
class _FdWriter(io.TextIOBase):
    """``sys.stdout``/``sys.stderr`` of the worker: text straight to a file descriptor
    (a pipe the host reads), nothing kept; writes of threads an earlier step left
    running are dropped (:mod:`rlm_kernel.executors.thread_output`)."""

    def __init__(self, fd: int, name: str) -> None:
        self.fd = fd
        self.name = name

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if not text or is_quarantined():
            return len(text)
        _write_all(self.fd, text.encode("utf-8", ERRORS))
        return len(text)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# -- values ------------------------------------------------------------------------------
def guarded_repr(value: Any, max_chars: int = 2000, seconds: float = 1.0) -> str:
    """``repr`` of ``value`` bounded by :mod:`reprlib`, a time limit and ``max_chars``;
    never raises."""
    short = reprlib.Repr()
    short.maxstring = short.maxother = max_chars
    short.maxlong = 200
    try:
        with time_limit(seconds):
            text = short.repr(value)
    except BaseException as exc:  # noqa: BLE001 - model objects may raise anything
        return f"<{type(value).__name__} object: repr failed ({type(exc).__name__})>"
    return text if len(text) <= max_chars else text[: max_chars - 3] + "..."


def _dump(value: Any) -> bytes:
    return pickle.dumps(value, protocol=PICKLE_PROTOCOL)


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class HostFunction:
    """A function of the host's (``llm_query``, ``FINAL`` ...) as model code sees it:
    calling it asks the host to run it and returns its result or raises its error.

    Args:
        worker: the worker that talks to the host.
        key: the host's number for the function.
        name: its name (for ``repr``); doc: its docstring.
    """

    def __init__(self, worker: Worker, key: int, name: str, doc: str | None) -> None:
        self._worker, self.key, self.__name__ = worker, key, name
        self.__doc__ = doc

    def __repr__(self) -> str:
        return f"<host function {self.__name__}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._worker.call_host(self.key, args, kwargs)


def _host_error(info: dict[str, Any]) -> BaseException:
    """The exception a host function raised, rebuilt here: ``FinalOutput`` as such, a
    built-in exception type as itself, another as a class of the same name."""
    name, message = info.get("type", "Exception"), info.get("message", "")
    if name == "FinalOutput":
        return FinalOutput(pickle.loads(info["output"]))
    kind = getattr(builtins, name, None)
    if isinstance(kind, type) and issubclass(kind, BaseException) and \
            kind not in (SystemExit, KeyboardInterrupt, GeneratorExit):
        try:
            return kind(message)
        except Exception:  # noqa: BLE001 - an exception type with other arguments
            pass
    base = BaseException if info.get("base_only") else Exception
    made = type(name, (base,), {"__module__": info.get("module", "host")})
    return made(message)


class Worker:
    """The REPL's namespace and the loop that serves the host.

    Args:
        sock: the socket to the host.
        out_fd / err_fd: private copies of the stdout/stderr pipes (fds 1 and 2 are
            put back to them after every step).
    """

    def __init__(self, sock: socket.socket, out_fd: int, err_fd: int) -> None:
        self.sock, self.out_fd, self.err_fd = sock, out_fd, err_fd
        self.pid = os.getpid()
        self.ns: dict[str, Any] = {"__name__": "__rlm__", "__builtins__": builtins}
        self.plain = PlainExecutor(self.ns)
        self.host_set: dict[str, tuple[Any, int, str | None]] = {}  # obj, version, digest
        self.refs: dict[int, Any] = {}  # objects handed to the host by reference
        self.lock = threading.RLock()
        self.in_step = False
        self.steps = 0
        self.sigterm_from = None  # monotonic time after which SIGTERM may be the host's
        self.stdout = _FdWriter(1, "<stdout>")
        self.stderr = _FdWriter(2, "<stderr>")

    # -- the channel ------------------------------------------------------------------
    def send(self, message: tuple[Any, ...]) -> None:
        write_frame(self.sock, _dump(message))

    def receive(self) -> tuple[Any, ...]:
        message = read_message(self.sock)
        if message is None:
            os._exit(0)  # the host is gone: so is the REPL
        return message

    def serve(self) -> None:
        """Handle the host's requests until it closes the socket."""
        while True:
            self.handle(self.receive())

    def handle(self, message: tuple[Any, ...]) -> None:
        kind, rid = message[0], message[1]
        handler = getattr(self, f"do_{kind}", None)
        try:
            payload = handler(*message[2:]) if handler else {"error": f"unknown {kind!r}"}
        except Exception as exc:  # noqa: BLE001 - the host gets the reason
            payload = {"error": f"{type(exc).__name__}: {exc}"}
        self.send(("reply", rid, payload))

    def call_host(self, key: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run host function ``key`` with the given arguments; see :class:`HostFunction`.

        Raises:
            RuntimeError: called from a forked process, outside a step, or from a
                thread an earlier step left running (its ``FINAL`` is not this step's,
                and its model calls would be spent outside the step that made them).
            Any exception the host function raised (rebuilt by :func:`_host_error`).
        """
        if os.getpid() != self.pid:
            raise RuntimeError("host functions cannot be called from a forked process")
        if not self.in_step:
            raise RuntimeError("host functions can only be called while a step runs")
        if is_quarantined():
            raise RuntimeError("a thread that an earlier step left running may not call "
                               "host functions (llm_query, FINAL ...)")
        packed = ([self.pack_arg(a) for a in args],
                  {k: self.pack_arg(v) for k, v in kwargs.items()})
        with self.lock:
            self.send(("call", 0, key, packed))
            while True:
                message = self.receive()
                if message[0] != "result":
                    self.handle(message)
                    continue
                reply = message[2]
                break
        if "error" in reply:
            raise _host_error(reply["error"])
        return pickle.loads(reply["value"])

    def pack_arg(self, value: Any) -> tuple[bytes | None, str | None, str]:
        """An argument for the host: (its pickle or None, a guarded repr unless it is
        a plain value, its type name)."""
        try:
            data = _dump(value)
        except Exception:  # noqa: BLE001 - unpicklable: the host gets the repr
            data = None
        text = None if isinstance(value, _BASIC) else guarded_repr(value)
        return data, text, type(value).__name__

    # -- requests -----------------------------------------------------------------------
    def do_set(self, name: str, kind: str, payload: Any, version: int) -> dict[str, Any]:
        """Bind ``name``: ``value`` (a pickle), ``stub`` ((key, name, doc)), ``module``
        (its name), ``ref`` (an object handed to the host earlier) or ``placeholder``
        (a text: the host could not copy the value)."""
        if kind == "value":
            value = pickle.loads(payload)
            digest = _digest(_dump(value)) if len(payload) < RECHECK_BYTES else None
            self.host_set[name] = (value, version, digest)
        elif kind == "stub":
            value = HostFunction(self, *payload)
            self.host_set[name] = (value, version, None)
        elif kind == "module":
            value = __import__(payload, fromlist=["_"])
            self.host_set[name] = (value, version, None)
        elif kind == "ref":
            value = self.refs[payload]
            self.host_set.pop(name, None)
        else:
            value = _Placeholder(payload)
            self.host_set[name] = (value, version, None)
        self.ns[name] = value
        return {}

    def do_del(self, name: str) -> dict[str, Any]:
        self.host_set.pop(name, None)
        if name not in self.ns:
            return {"missing": True}
        del self.ns[name]
        return {}

    def do_has(self, name: str) -> dict[str, Any]:
        """Whether ``name`` is bound (``missing`` when not), without copying its value."""
        return {"missing": name not in self.ns}

    def do_keys(self) -> dict[str, Any]:
        return {"bindings": self.bindings()}

    def do_get(self, name: str, known: str | None) -> dict[str, Any]:
        """The value of ``name`` for the host: ``same`` (its copy is current), ``host``
        (the host's own binding is unchanged), ``stub``, ``module``, ``value`` (a
        pickle and its digest) or ``ref`` (cannot be copied: a guarded repr)."""
        if name not in self.ns:
            return {"missing": True}
        value = self.ns[name]
        token = self.token(name, value)
        if token[0] in ("host", "stub"):
            return {"token": token}
        if isinstance(value, types.ModuleType):
            return {"kind": "module", "module": value.__name__}
        try:
            data = _dump(value)
        except Exception as exc:  # noqa: BLE001 - a model object that cannot be copied
            self.refs[id(value)] = value
            return {"kind": "ref", "ref": id(value), "type": type(value).__name__,
                    "repr": guarded_repr(value), "callable": callable(value),
                    "reason": f"{type(exc).__name__}: {exc}"}
        digest = _digest(data)
        if digest == known:
            return {"same": True}
        self.refs[id(value)] = value
        return {"kind": "value", "data": data, "digest": digest, "ref": id(value),
                "type": type(value).__name__,
                "repr": None if isinstance(value, _BASIC) else guarded_repr(value),
                "callable": callable(value)}

    def token(self, name: str, value: Any) -> tuple[Any, ...]:
        """How ``name`` is bound: ``("stub", key)``, ``("host", version)`` (the host's
        value, not rebound and, when small, not changed in place) or ``("child",)``."""
        if isinstance(value, HostFunction):
            return ("stub", value.key)
        held = self.host_set.get(name)
        if held is None or held[0] is not value:
            return ("child",)
        if held[2] is not None:  # small: changed in place?
            try:
                if _digest(_dump(value)) != held[2]:
                    return ("child",)
            except Exception:  # noqa: BLE001
                return ("child",)
        return ("host", held[1])

    def bindings(self) -> dict[str, tuple[Any, ...]]:
        return {n: self.token(n, v) for n, v in list(self.ns.items())
                if n not in ("__builtins__",)}

    def do_load(self, snapshot: dict[str, bytes]) -> dict[str, Any]:
        """Bind the names of a snapshot (``{name: pickle}``); those that fail are lost."""
        lost = []
        for name, data in snapshot.items():
            try:
                self.ns[name] = pickle.loads(data)
            except Exception:  # noqa: BLE001
                lost.append(name)
        return {"lost": lost}

    def snapshot(self) -> tuple[dict[str, bytes], list[str]]:
        """Pickles of the names the host cannot rebuild itself (not its own values or
        functions), and the names that cannot be pickled."""
        saved: dict[str, bytes] = {}
        lost: list[str] = []
        for name, value in list(self.ns.items()):
            if name in ("__builtins__", "__name__") or self.token(name, value)[0] != "child":
                continue
            if isinstance(value, types.ModuleType):
                saved[name] = _dump(_ModuleRef(value.__name__))
                continue
            try:
                saved[name] = _dump(value)
            except Exception:  # noqa: BLE001
                lost.append(name)
        return saved, lost

    def do_exec(self, code: str, timeout: float | None, cpu_seconds: float | None,
                marker: bytes, snapshot: bool) -> dict[str, Any]:
        """Run one step; output goes to fds 1 and 2, then ``marker`` on each."""
        self.steps += 1
        self.sigterm_from = time.monotonic() + max(timeout - SIGTERM_MARGIN, 0) \
            if timeout and timeout > 0 else None
        filename = f"<rlm-step-{self.steps}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        if cpu_seconds:
            used = resource.getrusage(resource.RUSAGE_SELF)
            spent = used.ru_utime + used.ru_stime
            _, hard = resource.getrlimit(resource.RLIMIT_CPU)
            soft = int(spent + cpu_seconds) + 1
            resource.setrlimit(resource.RLIMIT_CPU, (soft if hard < 0 else min(soft, hard), hard))
        final = None
        interrupted = False
        self.in_step = True
        try:
            with redirect_stdout(self.stdout), redirect_stderr(self.stderr), \
                    step_scope(self.stdout, self.stderr, namespace=self.ns) as scope:
                final, success = self.plain._run_limited(
                    code, filename, timeout, self.stderr, scope)  # type: ignore[arg-type]
        except KeyboardInterrupt:
            success, interrupted = False, True
            self.stderr.write("KeyboardInterrupt: the step was interrupted\n")
        finally:
            self.in_step = False
        if os.getpid() != self.pid:  # a process model code forked ended its copy of the step
            os._exit(0)
        with self.lock:  # no host call still in flight
            pass
        if not interrupted and scope.notes():
            self.stderr.write(scope.notes())
        self._restore_fds()
        for fd in (self.out_fd, self.err_fd):
            try:
                _write_all(fd, marker)
            except OSError:
                pass
        reply: dict[str, Any] = {"success": success, "interrupted": interrupted,
                                 "bindings": self.bindings()}
        if final is not None:
            try:
                reply["final"] = _dump(final)
            except Exception:  # noqa: BLE001 - the host has its own record of FINAL
                reply["final_repr"] = guarded_repr(final)
        if snapshot:
            reply["snapshot"], reply["lost"] = self.snapshot()
        return reply

    def _restore_fds(self) -> None:
        """fds 1 and 2 back to the pipes (model code may have closed or moved them)."""
        for fd, saved in ((1, self.out_fd), (2, self.err_fd)):
            try:
                os.dup2(saved, fd)
            except OSError:
                pass


class _Placeholder:
    """What the REPL holds for a host value that could not be copied into it."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


class _ModuleRef:
    """A module in a snapshot: imported again by name when the snapshot is loaded."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __reduce__(self) -> tuple[Any, ...]:
        return (_import, (self.name,))


def _import(name: str) -> types.ModuleType:
    return __import__(name, fromlist=["_"])


# -- start-up ----------------------------------------------------------------------------
def _unshare(flags: int) -> str | None:
    """``unshare(2)``; None when it worked, else the reason."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(ctypes.c_int(flags)) != 0:
        return os.strerror(ctypes.get_errno())
    return None


def _set_limits(cfg: dict[str, Any], notes: list[str]) -> None:
    """Join the cgroup, then set the ``resource`` limits of ``cfg``."""
    if cfg.get("cgroup"):
        try:
            with open(os.path.join(cfg["cgroup"], "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        except OSError as exc:
            notes.append(f"process cgroup not joined: {exc}")
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for name, value in (("RLIMIT_AS", cfg.get("memory")), ("RLIMIT_NPROC", cfg.get("nproc"))):
        if value:
            try:
                resource.setrlimit(getattr(resource, name), (value, value))
            except (ValueError, OSError) as exc:
                notes.append(f"{name} not set: {exc}")


def _enter_namespaces(cfg: dict[str, Any], notes: list[str]) -> bool:
    """Unshare the network and PID namespaces asked for; True when a PID namespace
    was made (the caller must fork)."""
    want_net, want_pid = not cfg.get("network"), bool(cfg.get("pid_ns"))
    if not (want_net or want_pid):
        return False
    flags = (CLONE_NEWNET if want_net else 0) | (CLONE_NEWPID if want_pid else 0)
    if os.geteuid() != 0:
        flags |= CLONE_NEWUSER
    failed = _unshare(flags)
    if failed is None:
        return want_pid
    notes.append(f"namespaces not available ({failed})")
    if want_net and want_pid:  # try the network alone
        net = CLONE_NEWNET | (CLONE_NEWUSER if os.geteuid() != 0 else 0)
        if _unshare(net) is None:
            notes[-1] += "; network namespace only"
    return False


# -- the working-folder wall -------------------------------------------------------------
_MS_NOSUID, _MS_NODEV, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x4000, 1 << 18
_AT_FDCWD, _AT_RECURSIVE = -100, 0x8000
_OPEN_TREE_CLONE, _OPEN_TREE_CLOEXEC = 0x1, os.O_CLOEXEC
_MOVE_MOUNT_F_EMPTY_PATH = 0x4
_MOUNT_ATTR_RDONLY = 0x1
# Generic syscall numbers (the same on x86_64, arm64 and every architecture since 5.1).
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_MOUNT_SETATTR = 428, 429, 442
_PRIVATE_TMP = ("/tmp", "/dev/shm")
_MS_RDONLY = 0x1
HIDDEN_IN_HOME = (".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".config/gcloud",
                  ".password-store")
"""Folders of the user's home that hold keys and credentials: behind the working-folder
wall each one that exists is covered by an empty read-only ``tmpfs`` (model code reads
nothing there), unless the working folder lies inside it."""


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _check(result: int, what: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
    return result


def _write_proc(proc: int, name: str, text: str) -> None:
    fd = os.open(f"self/{name}", os.O_WRONLY | os.O_CLOEXEC, dir_fd=proc)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _map_user(proc: int, uid: int, gid: int) -> None:
    """In a new user namespace: be root there, as ``uid``/``gid`` outside.

    Args:
        proc: a descriptor of ``/proc`` opened before any mount was made read-only (the
            map files are written through that mount, which stays writable).
    """
    _write_proc(proc, "uid_map", f"0 {uid} 1")
    try:
        _write_proc(proc, "gid_map", f"0 {gid} 1")
    except PermissionError:  # without CAP_SETGID outside: setgroups(2) must be off first
        _write_proc(proc, "setgroups", "deny")
        _write_proc(proc, "gid_map", f"0 {gid} 1")


def enter_wall(workdir: str, tmp_bytes: int | None) -> None:
    """Make every file outside ``workdir`` read-only for this process and its children.

    In a new mount namespace (with a user namespace when not root): every mount becomes
    private (nothing propagates to the host) and read-only (``mount_setattr(2)``,
    recursive); ``workdir``, cloned beforehand with ``open_tree(2)``, is mounted back
    read-write at its own path; with ``tmp_bytes``, ``/tmp`` and ``/dev/shm`` are new
    private ``tmpfs`` mounts of that many bytes each (empty, gone with the process; a
    working folder under ``/tmp`` is put back on top).  Last, the process moves into a
    further user and mount namespace: the kernel then *locks* the mounts it copies
    (``mount_namespaces(7)``, "restrictions on mount namespaces"), so model code, even
    as root (it stays uid 0, with every id mapped one to one, but its capabilities now
    hold in that user namespace only), can neither make them writable again, nor unmount
    them, nor ``setns(2)`` back.  Reading is not restricted, but for the key and credential
folders of the user's home (:data:`HIDDEN_IN_HOME`), each covered by an empty read-only
``tmpfs``.  Needs Linux 5.12.

    Args:
        workdir: the working folder, an absolute path without symbolic links.
        tmp_bytes: size of the private ``/tmp`` in bytes; None or 0: ``/tmp`` is
            read-only like the rest.

    Raises:
        OSError: a step was refused (the process may then be in a new mount namespace
            with part of the wall built: the caller must not run model code).
    """
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNS | (CLONE_NEWUSER if os.geteuid() != 0 else 0)
    proc = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    mapper = None if flags & CLONE_NEWUSER else _Mapper()
    try:
        _build_wall(libc, proc, mapper, flags, uid, gid, workdir, tmp_bytes)
    finally:
        os.close(proc)
        if mapper is not None:
            mapper.close()


class _Mapper:
    """A helper process that stays in the host's namespaces (forked before any unshare)
    to write the id maps of the worker's last user namespace: mapping every id one to
    one needs ``CAP_SETUID`` in the parent user namespace, which the worker has left."""

    def __init__(self) -> None:
        target = os.getpid()
        go_r, self.go = os.pipe()
        self.done, done_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the helper
            os.close(self.go)
            os.close(self.done)
            status = b"ok"
            try:
                if os.read(go_r, 1) == b"x":
                    for name in ("uid_map", "gid_map"):
                        with open(f"/proc/{target}/{name}", "w") as f:
                            f.write("0 0 4294967295")
                else:
                    status = b"not asked"
            except BaseException as exc:  # noqa: BLE001 - the worker gets the reason
                status = str(exc).encode()[:300] or b"failed"
            try:
                os.write(done_w, status)
            finally:
                os._exit(0)
        os.close(go_r)
        os.close(done_w)

    def map_ids(self) -> None:
        """Have the helper map every id of this process's user namespace as itself.

        Raises:
            OSError: the helper could not.
        """
        os.write(self.go, b"x")
        status = os.read(self.done, 400)
        if status != b"ok":
            raise OSError(1, f"mapping the user ids failed: {status.decode(errors='replace')}")

    def close(self) -> None:
        for fd in (self.go, self.done):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def _build_wall(libc: Any, proc: int, mapper: _Mapper | None, flags: int, uid: int,
                gid: int, workdir: str, tmp_bytes: int | None) -> None:
    """The steps of :func:`enter_wall` (``proc``: see :func:`_map_user`; ``mapper``: for
    root, see :class:`_Mapper`)."""
    _check(libc.unshare(ctypes.c_int(flags)), "unshare")
    if flags & CLONE_NEWUSER:
        _map_user(proc, uid, gid)
    _check(libc.mount(None, b"/", None, ctypes.c_ulong(_MS_REC | _MS_PRIVATE), None),
           "making / private")
    tree = _check(libc.syscall(ctypes.c_long(_SYS_OPEN_TREE), ctypes.c_int(_AT_FDCWD),
                               os.fsencode(workdir),
                               ctypes.c_uint(_OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC
                                             | _AT_RECURSIVE)), "open_tree")
    try:
        attr = _MountAttr(attr_set=_MOUNT_ATTR_RDONLY)
        _check(libc.syscall(ctypes.c_long(_SYS_MOUNT_SETATTR), ctypes.c_int(_AT_FDCWD), b"/",
                            ctypes.c_uint(_AT_RECURSIVE), ctypes.byref(attr),
                            ctypes.c_size_t(ctypes.sizeof(attr))), "mount_setattr read-only")
        if tmp_bytes:
            for target in _PRIVATE_TMP:
                if os.path.isdir(target):
                    _check(libc.mount(b"tmpfs", target.encode(), b"tmpfs",
                                      ctypes.c_ulong(_MS_NOSUID | _MS_NODEV),
                                      f"size={int(tmp_bytes)},mode=1777".encode()),
                           f"tmpfs on {target}")
        for target in _hidden_folders(workdir):
            _check(libc.mount(b"tmpfs", os.fsencode(target), b"tmpfs",
                              ctypes.c_ulong(_MS_RDONLY | _MS_NOSUID | _MS_NODEV),
                              b"size=4k,mode=0700"), f"hiding {target}")
        os.makedirs(workdir, exist_ok=True)  # only ever made in a new tmpfs that hid it
        _check(libc.syscall(ctypes.c_long(_SYS_MOVE_MOUNT), ctypes.c_int(tree), b"",
                            ctypes.c_int(_AT_FDCWD), os.fsencode(workdir),
                            ctypes.c_uint(_MOVE_MOUNT_F_EMPTY_PATH)), "move_mount")
    finally:
        os.close(tree)
    # lock it: mounts copied into a namespace of a less privileged user namespace
    _check(libc.unshare(ctypes.c_int(CLONE_NEWUSER | CLONE_NEWNS)), "unshare (lock)")
    if mapper is None:
        _map_user(proc, 0, 0)  # our user namespace's root, that is ``uid`` outside
    else:
        mapper.map_ids()  # every id as itself: files keep their owners, root stays root


def _hidden_folders(workdir: str) -> list[str]:
    """The :data:`HIDDEN_IN_HOME` folders of ``$HOME`` that exist and do not hold
    ``workdir``, symbolic links resolved."""
    homes = {os.path.expanduser("~")}
    try:
        homes.add(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:  # a uid with no passwd entry
        pass
    found: list[str] = []
    for home in sorted(homes):
        for name in HIDDEN_IN_HOME:
            path = os.path.realpath(os.path.join(home, name))
            if os.path.isdir(path) and path not in found \
                    and not (workdir + os.sep).startswith(path + os.sep):
                found.append(path)
    return found


def _wall(cfg: dict[str, Any], notes: list[str]) -> bool:
    """Build the wall of ``cfg["workdir"]`` (see :func:`enter_wall`); True when built.

    Where the first step (a new mount namespace) is refused, a note starting with
    :data:`WALL_REFUSED` says why and the file system is left as it is; a later step
    that fails ends the worker (exit status 71), since its mounts are then half made.
    """
    workdir = cfg.get("workdir")
    if not workdir:
        return False
    before = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC) \
        if os.path.exists("/proc/self/ns/mnt") else -1
    try:
        enter_wall(str(workdir), cfg.get("tmp_bytes"))
        return True
    except (OSError, AttributeError) as exc:
        libc = ctypes.CDLL(None, use_errno=True)
        if before >= 0 and os.readlink("/proc/self/ns/mnt") != os.readlink(
                f"/proc/self/fd/{before}") and libc.setns(before, CLONE_NEWNS) != 0:
            sys.__stderr__.write(f"the working-folder wall failed half-way ({exc}) and "
                                 "the mounts could not be restored\n")
            sys.__stderr__.flush()
            os._exit(71)
        notes.append(f"{WALL_REFUSED} ({exc})")
        return False
    finally:
        if before >= 0:
            os.close(before)


def _wait_exit(pid: int) -> None:
    """Wait for ``pid`` and leave with its status (a signal as 128 + its number)."""
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)


def _init(worker_pid: int) -> None:
    """PID 1 of the namespace: reap every orphan; leave with the worker's status."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:
            continue
        if pid == worker_pid:
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)


def _fork_chain(keep: tuple[int, ...]) -> None:
    """outer -> init (PID 1) -> worker (PID 2); returns in the worker only."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    first = os.fork()
    if first:
        _close(keep)
        _wait_exit(first)
    second = os.fork()
    if second:
        _close(keep)
        _init(second)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _close(fds: tuple[int, ...]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


_running: list[Worker] = []  # the worker of this process, once made


def _on_sigterm(signum: int, frame: Any) -> None:  # noqa: ARG001 - signal API
    """The host's first word after a step's time limit: end the step (ignored between
    steps, when the host never sends it).  A ``SIGTERM`` while the step is well within
    its limit (or has none) is not the host's, which sends it only past the limit: model
    code sent it, and it is a model error (``RuntimeError``), not a time-out."""
    if not (_running and _running[0].in_step):
        return
    start = _running[0].sigterm_from
    if start is None or time.monotonic() < start:
        raise RuntimeError("SIGTERM reached the REPL process from model code (the step "
                           "was within its time limit); ignored")
    raise StepTimeout("step exceeded its time limit and the REPL process was told "
                      "to stop")


def main(argv: list[str] | None = None) -> None:
    """Start the worker; see the module docstring.

    Args:
        argv: ``[CONFIG_JSON]`` (default ``sys.argv[1:]``); CONFIG holds ``fd`` (the
            socket), ``cwd``, ``memory`` (bytes or null), ``nproc``, ``cgroup`` (a
            directory or null), ``network`` (bool), ``pid_ns`` (bool), ``workdir`` (a
            folder: the only one writable, see :func:`enter_wall`; or null),
            ``tmp_bytes`` (the private ``/tmp``'s size with ``workdir``).
    """
    cfg = json.loads((argv if argv is not None else sys.argv[1:])[0])
    notes: list[str] = []
    _set_limits(cfg, notes)
    _wall(cfg, notes)
    if _enter_namespaces(cfg, notes):
        _fork_chain((cfg["fd"], 0, 1, 2))
    signal.signal(signal.SIGTERM, _on_sigterm)
    sock = socket.socket(fileno=cfg["fd"])
    out_fd, err_fd = os.dup(1), os.dup(2)
    os.set_inheritable(out_fd, False)
    os.set_inheritable(err_fd, False)
    if sys.path and sys.path[0] != "":
        sys.path[0] = ""  # model code imports from its folder, as in a REPL
    try:
        os.chdir(cfg.get("cwd") or os.getcwd())
    except OSError as exc:
        notes.append(f"working folder not entered: {exc}")
    worker = Worker(sock, out_fd, err_fd)
    _running.append(worker)
    sys.stdout, sys.stderr = worker.stdout, worker.stderr  # type: ignore[assignment]
    sys.stdin = io.StringIO()
    try:
        outer = int(os.readlink("/proc/self"))  # the pid the host can signal
    except (OSError, ValueError):
        outer = os.getpid()
    worker.send(("ready", 0, {"pid": outer, "ns_pid": os.getpid(), "notes": notes}))
    try:
        worker.serve()
    except BaseException:  # noqa: BLE001 - tell the host's log why the worker stopped
        traceback.print_exc(file=sys.__stderr__)
        os._exit(70)


if __name__ == "__main__":
    main()
