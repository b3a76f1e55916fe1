"""The worker side of :class:`~rlm_kernel.executors.isolated.IsolatedExecutor`.

Started by the host inside the bubblewrap sandbox of
:mod:`~rlm_kernel.executors.sandbox` as ``python -m rlm_kernel.executors.worker
CONFIG_JSON``, with a socket to the host on the file descriptor ``CONFIG["fd"]`` and
its stdout and stderr on pipes the host reads.  The sandbox is already the wall (no
capabilities, its own PID and network namespaces, a read-only file system); here the
worker only lowers its own ``resource`` limits (``RLIMIT_CORE`` 0, ``RLIMIT_AS``,
``RLIMIT_NPROC``: an unprivileged process cannot raise them again), says ``ready`` and
serves the host's requests.

The wire is :mod:`~rlm_kernel.executors.wire`: msgpack messages in length-prefixed
frames.  What the host sends may hold pickles (inputs, snapshots, host functions'
results: the host is trusted here); what this side sends is data only, since model
code runs in this process and could forge any of it: values cross in their data form
(:func:`~rlm_kernel.executors.wire.encode_value`) or as a description (type, the one
guarded ``repr`` of :func:`~rlm_kernel.executors.guarded.guarded_repr`, why), never as a pickle the host would load.  Snapshots of the namespace are
pickles the host keeps as opaque bytes and only ever sends back to a new worker.

Host functions (``llm_query``, ``FINAL`` ...) are bound as :class:`HostFunction` stubs;
they work only in the worker process itself (not in a process model code forked), only
while a step runs and not from a thread an earlier step left running.  Model code that
writes ``call`` frames on the socket itself gets past that last check: the host
cannot tell the worker's threads apart, but still budgets and records every call, and
drops the worker at the first frame that is not the protocol's.  A ``SIGTERM`` is the
host's (the step is past its time limit: ``StepTimeout``) only near or past the limit;
earlier, model code sent it, and it is a model error.
"""

from __future__ import annotations

import builtins
import codecs
import hashlib
import io
import json
import linecache
import os
import pickle
import resource
import signal
import socket
import sys
import threading
import time
import traceback
import types
from typing import Any, TextIO, cast

from ..repl_types import REPLVariable
from ..termination import FinalOutput
from .guarded import guarded_repr, type_name
from .host_state import user_interrupts_kept
from .plain import PlainExecutor
from .reads import READ_HOOK
from .thread_output import is_quarantined
from .timeouts import StepTimeout, time_limit
from .tracebacks import format_model_traceback, model_traceback
from .wire import Channel, ChannelClosed, NotData, encode_value

__all__ = ["HostFunction", "Worker", "main", "current_namespace",
           "error_report", "RECHECK_BYTES", "ERRORS", "SNAPSHOT_BYTES", "DESCRIBE_SECONDS"]

RECHECK_BYTES = 1 << 20
"""A value the host bound and model code did not rebind is re-pickled after a step to
see whether it changed in place only when its pickle is smaller than this (bytes)."""
SNAPSHOT_BYTES = 48 << 20
"""Most bytes of pickles a snapshot of the namespace holds; names past it are lost at a
restart (and listed)."""
SNAPSHOT_SECONDS = 5.0
"""Seconds the worker spends pickling (or loading) a snapshot before the names left
are lost."""
_PLAIN = (str, bytes, int, float, bool, type(None))  # described without code of their own
DESCRIBE_SECONDS = 2.0
"""Seconds describing one variable may take (its ``__len__``, ``shape``, ``__str__`` are
model code's), as the engine's ``describe_variable`` allows on the host."""
PICKLE_PROTOCOL = 5
SIGTERM_MARGIN = 0.5
"""Seconds before a step's time limit from which a ``SIGTERM`` counts as the host's
(it sends one only ``kill_grace`` past the limit; this side's clock starts a little
later than the host's)."""
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
def _dump(value: Any) -> bytes:
    return pickle.dumps(value, protocol=PICKLE_PROTOCOL)


_ATOMS = (str, bytes, int, float, complex, bool, tuple, frozenset, type, range,
          types.FunctionType, types.BuiltinFunctionType, types.ModuleType)
"""Objects whose identity two names may share without it mattering (immutable, or
pickled by reference): not counted as a reference between names."""


def _dump_tracked(value: Any) -> tuple[bytes, dict[int, Any]]:
    """A value's pickle, and the objects in it whose identity matters (what the pickler
    kept in its memo, but :data:`_ATOMS`), by id (held, so that no id is reused by
    another name's objects while the snapshot is taken)."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=PICKLE_PROTOCOL)
    pickler.dump(value)
    shared = {key: obj for key, (_, obj) in pickler.memo.copy().items()
              if not isinstance(obj, _ATOMS)}
    return buffer.getvalue(), shared


def _groups(entries: list[tuple[str, bytes, dict[int, Any]]]
            ) -> list[list[tuple[str, bytes, dict[int, Any]]]]:
    """``entries`` (name, pickle, object ids) in groups of the names that share an
    object, in the order of their first names (a union-find over the ids)."""
    parent = list(range(len(entries)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[int, int] = {}
    for i, (_, _, ids) in enumerate(entries):
        for key in ids:
            j = owner.setdefault(key, i)
            if j != i:
                parent[root(i)] = root(j)
    groups: dict[int, list[tuple[str, bytes, dict[int, Any]]]] = {}
    for i, entry in enumerate(entries):
        groups.setdefault(root(i), []).append(entry)
    return list(groups.values())


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def describe(value: Any, reason: str) -> dict[str, Any]:
    """What the host gets of a value that has no data form: its type's name, a guarded
    ``repr``, whether it is callable, its length when it has one, and why."""
    info: dict[str, Any] = {"type": type(value).__name__, "repr": guarded_repr(value),
                            "callable": callable(value), "reason": reason}
    if isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)):
        info["length"] = len(value)
    return info


def data_or_description(value: Any, seconds: Any = SNAPSHOT_SECONDS) -> dict[str, Any]:
    """``{"data": bytes}`` (the data form) or ``{"description": ...}`` (see
    :func:`describe`) of a value for the host; the data form is given up for the
    description after ``seconds`` (at most :data:`SNAPSHOT_SECONDS`; the host asks for
    less when its run's deadline is near)."""
    if not isinstance(seconds, (int, float)) or not 0 < seconds < SNAPSHOT_SECONDS:
        seconds = SNAPSHOT_SECONDS
    try:
        with time_limit(seconds):
            return {"data": encode_value(value)}
    except NotData as exc:
        return {"description": describe(value, str(exc))}
    except StepTimeout:
        return {"description": describe(value, "its data form took too long to make")}


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
    name, message = str(info.get("type", "Exception")), str(info.get("message", ""))
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
    made = type(name, (base,), {"__module__": str(info.get("module", "host"))})
    return made(message)


# -- a step's error, for the notebook's view ----------------------------------------------
ERROR_FRAMES = 60
"""Frames of a step's error sent to the host (the first and last halves of a longer one)."""
ERROR_SOURCE_CHARS = 100_000
"""Characters of a step's code sent with its error (the host shows lines of it)."""


class _StepRunner(PlainExecutor):
    """The worker's :class:`PlainExecutor`: also keeps the last error of model code
    (until the next step) for :func:`error_report`."""

    last_error: tuple[BaseException, str, str] | None = None  # exc, step file, text

    def _report_error(self, exc: BaseException, filename: str, err: Any) -> None:
        text = format_model_traceback(exc, filename)
        self.last_error = (exc, filename, text)
        err.write(text)


def _cached_lines(filename: str) -> list[str] | None:
    """The lines :mod:`linecache` holds for ``filename``, or None (not cached, or only a
    lazy entry)."""
    entry = linecache.cache.get(filename)
    return entry[2] if entry is not None and len(entry) == 4 else None


def error_report(exc: BaseException, filename: str, text: str) -> dict[str, Any]:
    """The data the host shows an error of model code from, in the notebook as IPython
    shows one: ``ename``, ``evalue``, ``frames`` (``[file, line, function]`` from the
    step's first frame to the model's own line), ``sources`` (``{file: code}`` of the
    steps' code in those frames), ``syntax`` (``[file, line, offset, text, end line,
    end offset, message]`` of a :class:`SyntaxError`) and ``plain`` (the text the step
    wrote, as the model reads it).  Strings only; model code may have forged any of it,
    so the host reads it as display text."""
    report: dict[str, Any] = {"ename": str(type(exc).__name__)[:200], "plain": text,
                              "module": str(type(exc).__module__)[:200]}
    try:
        report["evalue"] = str(exc)[:20_000]
    except Exception:  # noqa: BLE001 - model exceptions may raise anything
        report["evalue"] = guarded_repr(exc)
    if isinstance(exc, SyntaxError):
        report["syntax"] = [str(exc.filename or filename), exc.lineno or 1, exc.offset or 0,
                            str(exc.text or ""), exc.end_lineno or 0, exc.end_offset or 0,
                            str(exc.msg or "")[:2000]]
        files = [str(exc.filename or filename)]
        report["frames"] = []
    else:
        frames: list[list[Any]] = [[f.filename, f.lineno or 0, f.name]
                  for f in traceback.extract_tb(model_traceback(exc, filename))]
        if len(frames) > ERROR_FRAMES:
            frames = frames[: ERROR_FRAMES // 2] + frames[-ERROR_FRAMES // 2:]
        report["frames"] = frames
        files = [f[0] for f in frames]
    report["sources"] = {f: "".join(lines)[:ERROR_SOURCE_CHARS]
                         for f in dict.fromkeys(files)
                         if f.startswith("<rlm-step-") and (lines := _cached_lines(f)) is not None}
    return report


_running: list[Worker] = []  # the worker of this process, once made


def current_namespace() -> dict[str, Any] | None:
    """The REPL namespace of this process when it is a worker, else None (the REPL's
    helpers read the run's data from it: :mod:`rlm_kernel.engine.repl_functions`)."""
    return _running[0].ns if _running else None


class Worker:
    """The REPL's namespace and the loop that serves the host.

    Args:
        sock: the socket to the host.
        out_fd / err_fd: private copies of the stdout/stderr pipes (fds 1 and 2 are
            put back to them after every step).
    """

    def __init__(self, sock: socket.socket, out_fd: int, err_fd: int) -> None:
        self.sock, self.out_fd, self.err_fd = sock, out_fd, err_fd
        self.channel = Channel(sock, 1 << 62, accept_tails=True)
        self.pid = os.getpid()
        self.ns: dict[str, Any] = {"__name__": "__rlm__", "__builtins__": builtins}
        self.plain = _StepRunner(self.ns)
        self.host_set: dict[str, tuple[Any, int, str | None]] = {}  # obj, version, digest
        self.refs: dict[int, Any] = {}  # objects described to the host, by id
        self.lock = threading.RLock()
        self.send_lock = threading.Lock()
        self.in_step = False
        self.nonce = ""
        self.calls = 0
        self.sigterm_from: float | None = None  # monotonic time after which SIGTERM is the host's
        # Text streams (io.TextIOBase), which typeshed's nominal TextIO does not include.
        self.stdout = cast(TextIO, _FdWriter(1, "<stdout>"))
        self.stderr = cast(TextIO, _FdWriter(2, "<stderr>"))

    # -- the channel ------------------------------------------------------------------
    def send(self, message: dict[str, Any]) -> None:
        with self.send_lock:
            try:
                self.channel.send(message)
            except ChannelClosed:
                os._exit(0)  # the host is gone: so is the REPL

    def receive(self) -> dict[str, Any]:
        try:
            return self.channel.receive(None)
        except ChannelClosed:
            os._exit(0)  # the host is gone: so is the REPL

    def serve(self) -> None:
        """Handle the host's requests until it closes the socket."""
        while True:
            self.handle(self.receive())

    def handle(self, message: dict[str, Any]) -> None:
        op, rid = message.get("op"), message.get("id")
        handler = getattr(self, f"do_{op}", None)
        try:
            payload = handler(message) if handler else {"error": f"unknown {op!r}"}
        except Exception as exc:  # noqa: BLE001 - the host gets the reason
            payload = {"error": f"{type(exc).__name__}: {exc}"}
        self.send({"op": "reply", "id": rid, "nonce": message.get("nonce", ""), **payload})

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
        packed_args = [data_or_description(a) for a in args]
        packed_kwargs = {str(k): data_or_description(v) for k, v in kwargs.items()}
        with self.lock:
            self.calls += 1
            cid = self.calls
            self.send({"op": "call", "id": cid, "key": key, "nonce": self.nonce,
                       "args": packed_args, "kwargs": packed_kwargs})
            while True:
                message = self.receive()
                if message.get("op") == "result" and message.get("id") == cid:
                    break
                self.handle(message)
        if "error" in message:
            raise _host_error(message["error"])
        return pickle.loads(message["value"])

    # -- requests -----------------------------------------------------------------------
    def do_set(self, m: dict[str, Any]) -> dict[str, Any]:
        """Bind ``name``: ``value`` (a pickle), ``stub`` ([key, name, doc]), ``module``
        (its name), ``ref`` (an object described to the host earlier), ``keep`` (leave
        the name as it is, or bind ``payload`` as a placeholder when unbound) or
        ``placeholder`` (a text: the host could not copy the value)."""
        name, kind, version = m["name"], m["kind"], m["version"]
        payload: Any = m.get("payload")  # its shape depends on the kind
        if kind == "value":
            payload = m["payload"]  # the pickle, sent raw after the message
            value = pickle.loads(payload)
            digest = _digest(payload) if len(payload) < RECHECK_BYTES else None
            self.host_set[name] = (value, version, digest)
        elif kind == "stub":
            value = HostFunction(self, int(payload[0]), str(payload[1]), payload[2])
            self.host_set[name] = (value, version, None)
        elif kind == "module":
            value = __import__(payload, fromlist=["_"])
            self.host_set[name] = (value, version, None)
        elif kind == "ref":
            if payload not in self.refs:
                raise KeyError(f"no object {payload} here")
            value = self.refs[payload]
            self.host_set.pop(name, None)
        elif kind == "keep" and name in self.ns:
            return {}
        else:
            value = _Placeholder(str(payload))
            self.host_set[name] = (value, version, None)
        self.ns[name] = value
        return {}

    def do_del(self, m: dict[str, Any]) -> dict[str, Any]:
        name = m["name"]
        self.host_set.pop(name, None)
        if name not in self.ns:
            return {"missing": True}
        del self.ns[name]
        return {}

    def do_has(self, m: dict[str, Any]) -> dict[str, Any]:
        """Whether ``name`` is bound (``missing`` when not), without copying its value."""
        return {"missing": m["name"] not in self.ns}

    def do_keys(self, m: dict[str, Any]) -> dict[str, Any]:  # noqa: ARG002 - one signature
        return {"bindings": self.bindings()}

    def do_get(self, m: dict[str, Any]) -> dict[str, Any]:
        """The value of ``name`` for the host: ``token`` (the host's own binding or a
        stub), ``module``, ``same`` (the host's copy is current), ``value`` (its data
        form and digest) or ``ref`` (no data form: a description)."""
        name, known = m["name"], m.get("known")
        if name not in self.ns:
            return {"missing": True}
        value = self.ns[name]
        token = self.token(name, value)
        if token[0] in ("host", "stub"):
            return {"token": list(token)}
        if isinstance(value, types.ModuleType):
            return {"kind": "module", "module": value.__name__}
        self.refs[id(value)] = value
        packed = data_or_description(value, m.get("seconds"))
        if "description" in packed:
            return {"kind": "ref", "ref": id(value), **packed["description"]}
        digest = _digest(packed["data"])
        if digest == known:
            return {"same": True}
        return {"kind": "value", "data": packed["data"], "digest": digest, "ref": id(value),
                "type": type(value).__name__, "callable": callable(value)}

    def do_describe(self, m: dict[str, Any]) -> dict[str, Any]:
        """The metadata (:class:`~rlm_kernel.repl_types.REPLVariable`'s fields) of the
        namespace's data variables, made here where the values live: every name that
        is a ``str``, not private (``_x``), not in ``skip``, not a module and not
        callable; ``preview`` characters of preview each.  Each value's own code runs
        under :data:`DESCRIBE_SECONDS`, all of them within ``seconds`` (at most
        :data:`SNAPSHOT_SECONDS`); a value not described in time, or whose code
        failed, is ``<TYPE object>``.  Returns ``{"variables": [[name, type, length,
        preview, unit, identity], ...]}`` (``identity``: ``id`` of the value here)."""
        skip = set(m.get("skip") or ())
        preview = m.get("preview")
        preview = preview if isinstance(preview, int) and preview >= 0 else 500
        seconds = m.get("seconds")
        seconds = SNAPSHOT_SECONDS if not isinstance(seconds, (int, float)) \
            else min(max(float(seconds), 0.0), SNAPSHOT_SECONDS)
        deadline = time.monotonic() + seconds
        found: list[list[Any]] = []
        for name, value in list(self.ns.items()):
            if not isinstance(name, str) or name.startswith("_") or name in skip:
                continue
            var, data, left = None, True, deadline - time.monotonic()
            if type(value) in _PLAIN:  # no code of the value's own runs
                var = REPLVariable.from_value(name, value, preview_length=preview)
            else:
                var, data = self._describe_one(name, value, preview, left)
            if not data:
                continue
            if var is None:
                kind = type_name(value)
                var = REPLVariable(name, kind, preview=f"<{kind} object>")
            found.append([name, var.type_name, var.total_length, var.preview,
                          var.length_unit, id(value)])
        return {"variables": found}

    @staticmethod
    def _describe_one(name: str, value: Any, preview: int, left: float
                      ) -> tuple[REPLVariable | None, bool]:
        """(its description or None, whether it is data) for :meth:`do_describe`."""
        var, data = None, True
        with user_interrupts_kept():
            try:  # isinstance may run model code (a __class__ property)
                with time_limit(max(min(left, DESCRIBE_SECONDS), 0.05)):
                    data = not isinstance(value, types.ModuleType) and not callable(value)
                    if data and left > 0:
                        var = REPLVariable.from_value(name, value, preview_length=preview)
            except BaseException:  # noqa: BLE001 - the value's code is model code
                var = None
        return var, data

    def do_ids(self, m: dict[str, Any]) -> dict[str, Any]:  # noqa: ARG002 - one signature
        """``{"ids": {name: id of its value}}`` for every name: which names were rebound
        since, without reading any value."""
        return {"ids": {n: id(v) for n, v in list(self.ns.items()) if isinstance(n, str)}}

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

    def bindings(self) -> dict[str, list[Any]]:
        return {n: list(self.token(n, v)) for n, v in list(self.ns.items())
                if n not in ("__builtins__",) and isinstance(n, str)}

    def do_load(self, m: dict[str, Any]) -> dict[str, Any]:
        """Bind the names of a snapshot (:meth:`snapshot`'s ``[[names], pickle]``
        entries); the names of an entry that fails to load, or is not loaded within its
        share of ``seconds`` (at most ``SNAPSHOT_SECONDS`` in all), are lost."""
        lost: list[str] = []
        seconds = m.get("seconds")
        seconds = SNAPSHOT_SECONDS if not isinstance(seconds, (int, float)) \
            else min(float(seconds), SNAPSHOT_SECONDS)
        deadline = time.monotonic() + seconds
        entries = list(m["snapshot"])
        for k, (names, data) in enumerate(entries):
            names = [str(n) for n in names]
            left = deadline - time.monotonic()
            if left <= 0:
                lost += names
                continue
            # a share of what is left, so that one pickle that hangs when loaded loses
            # its own names only (at least a second: a large one takes that long)
            share = max(left / (len(entries) - k), min(left, 1.0))
            try:
                with time_limit(share):
                    values = pickle.loads(data)
                if len(names) > 1 and (type(values) is not tuple or len(values) != len(names)):
                    raise ValueError("a snapshot group of the wrong shape")
            except BaseException:  # noqa: BLE001 - model objects' __reduce__ may raise anything
                lost += names
                continue
            for name, value in zip(names, values if len(names) > 1 else (values,),
                                   strict=True):
                self.ns[name] = value
        return {"lost": lost}

    def snapshot(self) -> tuple[list[list[Any]], list[str]]:
        """Pickles of the names the host cannot rebuild itself (not its own values or
        functions), and the names that cannot be pickled (or not in time, or past
        :data:`SNAPSHOT_BYTES`).

        Names bound to objects reachable from one another (``b = a``, ``c = [a]``) are
        pickled together, in one pickle, so that a restart keeps them one object; every
        other name has a pickle of its own, so that one that cannot be pickled (or
        loaded) loses only its own group.  Returns ``([[names, pickle], ...], lost)``.
        """
        entries: list[tuple[str, bytes, dict[int, Any]]] = []
        lost: list[str] = []
        deadline = time.monotonic() + SNAPSHOT_SECONDS
        values: dict[str, Any] = {}
        for name, value in list(self.ns.items()):
            if name in ("__builtins__", "__name__", READ_HOOK) or not isinstance(name, str) \
                    or self.token(name, value)[0] != "child":
                continue
            value = _ModuleRef(value.__name__) if isinstance(value, types.ModuleType) else value
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise TimeoutError
                with time_limit(left):
                    data, shared = _dump_tracked(value)
            except BaseException:  # noqa: BLE001 - model objects may raise anything
                lost.append(name)
                continue
            values[name] = value
            entries.append((name, data, shared))
        saved: list[list[Any]] = []
        total = 0
        for group in _groups(entries):
            data = group[0][1]
            if len(group) > 1:  # one pickle for objects the names share
                left = deadline - time.monotonic()
                try:
                    if left <= 0:
                        raise TimeoutError
                    with time_limit(left):
                        data = _dump(tuple(values[n] for n, _, _ in group))
                except BaseException:  # noqa: BLE001 - each on its own, then
                    saved_alone = [(n, d) for n, d, _ in group]
                    for name, alone in saved_alone:
                        if total + len(alone) > SNAPSHOT_BYTES:
                            lost.append(name)
                            continue
                        total += len(alone)
                        saved.append([[name], alone])
                    continue
            names = [n for n, _, _ in group]
            if total + len(data) > SNAPSHOT_BYTES:
                lost += names
                continue
            total += len(data)
            saved.append([names, data])
        return saved, lost

    def do_last_error(self, m: dict[str, Any]) -> dict[str, Any]:  # noqa: ARG002
        """The error of model code that ended the last step (:func:`error_report`), or
        ``missing`` when it ended without one."""
        held = self.plain.last_error
        if held is None:
            return {"missing": True}
        try:
            with time_limit(5.0):
                return {"report": error_report(*held)}
        except BaseException:  # noqa: BLE001 - model exceptions may raise anything
            return {"missing": True}

    def do_exec(self, m: dict[str, Any]) -> dict[str, Any]:
        """Run one step; output goes to fds 1 and 2, then ``marker`` on each."""
        code, timeout, cpu_seconds = str(m["code"]), m.get("timeout"), m.get("cpu")
        self.plain.last_error = None
        self.nonce = str(m.get("nonce", ""))
        self.sigterm_from = time.monotonic() + max(timeout - SIGTERM_MARGIN, 0) \
            if timeout and timeout > 0 else None
        if cpu_seconds:
            used = resource.getrusage(resource.RUSAGE_SELF)
            spent = used.ru_utime + used.ru_stime
            _, hard = resource.getrlimit(resource.RLIMIT_CPU)
            soft = int(spent + cpu_seconds) + 1
            resource.setrlimit(resource.RLIMIT_CPU, (soft if hard < 0 else min(soft, hard), hard))
        final = None
        interrupted = False
        watch = m.get("watch")
        self.plain.read_watch = (frozenset(map(str, watch[0])), frozenset(map(str, watch[1]))) \
            if isinstance(watch, list) and len(watch) == 2 else None
        self.in_step = True
        try:
            with self.plain.step_context(code, self.stdout, self.stderr) as (filename, scope):
                final, success = self.plain._run_limited(
                    code, filename, timeout, self.stderr, scope)
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
                _write_all(fd, bytes(m["marker"]))
            except OSError:
                pass
        reply: dict[str, Any] = {"success": success, "interrupted": interrupted,
                                 "bindings": self.bindings()}
        if self.plain.last_reads is not None:  # which watched names executed code read
            reply["reads"] = sorted(self.plain.last_reads)
        if final is not None:
            output = {k: v for k, v in final.items() if k != "answer"} \
                if isinstance(final, dict) else {}
            reply["final"] = {"output": data_or_description(output),
                              "answer": data_or_description(
                                  final.get("answer") if isinstance(final, dict) else final)}
        if m.get("snapshot"):
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
def _set_limits(cfg: dict[str, Any], notes: list[str]) -> None:
    """Lower this process's ``resource`` limits to those of ``cfg`` (hard limits too:
    without ``CAP_SYS_RESOURCE`` they cannot be raised again)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for name, value in (("RLIMIT_AS", cfg.get("memory")), ("RLIMIT_NPROC", cfg.get("nproc"))):
        if value:
            try:
                resource.setrlimit(getattr(resource, name), (value, value))
            except (ValueError, OSError) as exc:
                notes.append(f"{name} not set: {exc}")


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


def _forked() -> None:
    """In a process model code forked: ``SIGTERM`` ends it, as it ends any process.  The
    worker's own handler (:func:`_on_sigterm`, copied by ``fork``) would turn the
    signal into an exception, or ignore it, so that a ``multiprocessing`` pool's
    worker told to stop by ``Pool.terminate`` could live on and hang the step."""
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    except (ValueError, OSError):  # not the main thread of the new process
        pass


def main(argv: list[str] | None = None) -> None:
    """Start the worker; see the module docstring.

    Args:
        argv: ``[CONFIG_JSON]`` (default ``sys.argv[1:]``); CONFIG holds ``fd`` (the
            socket), ``memory`` (bytes or null: ``RLIMIT_AS``), ``nproc`` (or null:
            ``RLIMIT_NPROC``).
    """
    cfg = json.loads((argv if argv is not None else sys.argv[1:])[0])
    # run as ``-m``, this module is ``__main__``: one module under both names, so the
    # helpers that import it (current_namespace) find this worker
    sys.modules.setdefault("rlm_kernel.executors.worker", sys.modules[__name__])
    notes: list[str] = []
    _set_limits(cfg, notes)
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.register_at_fork(after_in_child=_forked)
    sock = socket.socket(fileno=cfg["fd"])
    out_fd, err_fd = os.dup(1), os.dup(2)
    os.set_inheritable(out_fd, False)
    os.set_inheritable(err_fd, False)
    if not sys.path or sys.path[0] != "":
        # model code imports from its folder, as in a REPL; the host's boot line
        # (isolated.WORKER_BOOT) took it out while the worker itself was imported
        sys.path.insert(0, "")
    worker = Worker(sock, out_fd, err_fd)
    _running.append(worker)
    sys.stdout, sys.stderr = worker.stdout, worker.stderr
    sys.stdin = io.StringIO()
    worker.send({"op": "ready", "id": 0, "pid": os.getpid(), "notes": notes})
    try:
        worker.serve()
    except BaseException:  # noqa: BLE001 - tell the host's log why the worker stopped
        traceback.print_exc(file=sys.__stderr__)
        os._exit(70)


if __name__ == "__main__":
    main()
