"""The isolated executor: :class:`IsolatedExecutor` (see :mod:`rlm_kernel.executors.isolated`
for what it holds and how) and its request channel to the worker, one reader at a time,
every wait bounded, the step's nonce checked; the host's memory and process watch where
no cgroup holds the sandbox.  The values that cross:
:mod:`~rlm_kernel.executors.isolated.remote`; the sandboxed process:
:mod:`~rlm_kernel.executors.isolated.child`.
"""

from __future__ import annotations

import contextvars
import itertools
import json
import logging
import os
import pickle
import queue
import signal
import socket
import sys
import threading
import time
import uuid
import weakref
from collections.abc import (
    Iterable,
    Mapping,
)
from pathlib import Path
from typing import Any

from ...repl_types import REPLResult, REPLVariable
from ...termination import FinalOutput
from ..environment import passed_names
from ..guarded import REPR_SECONDS
from ..import_guard import guard_folder, warm_channel_modules
from ..launcher import MARK as LAUNCHER_MARK
from ..memory_watch import MAX_INTERVAL, MemoryUsage, MemoryWatch, SandboxMeter
from ..plain import ReadWatch
from ..redaction import Redactor, redact_data
from ..sandbox import (
    PROC_HIDDEN,
    PROC_READ_ONLY,
    SANDBOX_UID,
    Cgroups,
    SandboxUnavailable,
    WorkerError,
    check_workdir,
    find_bwrap,
    host_uid,
    interpreter_path,
    limits_command,
    make_cgroups,
    wall_command,
)
from ..streams import MAX_KEPT_CHARS, OutputCallback, StreamTee
from ..syscall_filter import FilterUnavailable, denied_summary, filter_fd
from ..timeouts import timeout_message
from ..wire import MAX_VALUE_BYTES, ChannelClosed, ProtocolError
from ..worker import SNAPSHOT_BYTES, SNAPSHOT_SECONDS
from .child import (
    NPROC_SLACK,
    OWN_PROCESSES,
    WORKER_BOOT,
    Child,
    channel_problem,
    child_env,
    cleanup,
    exit_reason,
    tmpfs_size,
    user_processes,
)
from .remote import (
    IsolatedNamespace,
    LateRead,
    from_worker,
    reply_bindings,
    reply_snapshot,
    reply_variables,
)

__all__ = ["IsolatedExecutor", "DEFAULT_MEMORY", "DEFAULT_PROCESSES", "DEFAULT_TMP_BYTES",
           "REQUEST_SECONDS", "LATE_SECONDS"]

log = logging.getLogger(__name__)

DEFAULT_MEMORY = 4 << 30
"""Memory of the sandbox (cgroup, or the host's watch) and address space of each of its
processes (``RLIMIT_AS``), bytes."""
DEFAULT_PROCESSES = 64
"""Processes model code may have running at once (besides the worker's own)."""
DEFAULT_TMP_BYTES = 256 << 20
"""Size of each private ``tmpfs`` (``/tmp``, ``/var/tmp``, ``/dev/shm``, ``/run``) in the
sandbox, bytes."""
REQUEST_SECONDS = 30.0
"""Seconds the worker has to answer a request outside a step (a value's data form, a
snapshot's load) before it is killed and restarted."""
LATE_SECONDS = 3.0
"""Seconds past the run's deadline (:meth:`IsolatedExecutor.set_deadline`) by which every
wait on the worker outside a step ends, all requests together (those that follow get no
answer from the worker: :class:`LateRead`); the worker is told to answer within what is
left (:meth:`IsolatedExecutor.work_seconds`)."""


def _watch_message(watch: ReadWatch | None) -> list[list[str]] | None:
    """``read_watch`` as the exec request carries it."""
    return None if watch is None else [sorted(watch[0]), sorted(watch[1])]


def _names_read(reply: dict[str, Any] | None, watch: ReadWatch | None
                ) -> frozenset[str] | None:
    """The worker's executed-reads record (its reply's ``reads``), kept only for names
    watched (``x`` or a data helper's ``x()``); model code may forge it: it labels only
    its own run's answer (:mod:`~rlm_kernel.executors.reads`).  None: no watch.  No
    reply (the worker died, maybe after a ``FINAL``) or no record: nothing read is
    claimed (a false alarm at worst, never a false assurance)."""
    if watch is None:
        return None
    reads = None if reply is None else reply.get("reads")
    if not isinstance(reads, list):
        return frozenset()
    known = watch[0] | watch[1]
    return frozenset(r for r in reads[:10_000] if type(r) is str
                     and (r in known or (r.endswith("()") and r[:-2] in known)))

class IsolatedExecutor:
    """Run model code in a worker process in a bubblewrap sandbox (see the module
    docstring).

    Args:
        namespace: initial variables (copied into the worker; callables registered
            as host functions).
        memory_limit: the sandbox's memory in bytes (see the module docstring); None:
            none.
        max_processes: processes model code may run at once; None: no limit.
        cpu_seconds: CPU seconds per step (``RLIMIT_CPU`` soft limit); None: none.
        network: let model code use the host's network (default: a namespace without);
            then it makes no ``AF_UNIX`` socket (the host's abstract sockets share that
            namespace), see :data:`~rlm_kernel.executors.syscall_filter.NETWORK_RULES`.
        cwd: the folder the worker starts in (default: the host's): it is never bound,
            so the worker starts there only when the sandbox's uid can read it through
            the read-only ``/`` (outside the homes and ``/tmp``), else in the sandbox's
            own ``/tmp``; with ``workdir``, that.
        workdir: the only folder model code may write (read-write in the sandbox);
            None: none.
        tmp_bytes: the size in bytes of each private ``tmpfs`` (``/tmp`` ...); None:
            bubblewrap's default (half the machine's memory).  With a
            ``memory_limit``, at most a quarter of it (the four together never hold more
            than the limit); what they hold counts against the limit either way.
        kill_grace: seconds after a step's limit before ``SIGTERM``, and again before
            the sandbox is killed.
        max_output_chars: characters of each stream of a step kept and shown live.
        snapshot: pickle the namespace after each step, to restart from after a kill.
        start_timeout: seconds to wait for the worker to start.
        request_timeout: seconds the worker has to answer a request outside a step.
        python: the interpreter for the worker (default: this one).
        pass_env: the host's environment variables model code gets beyond the
            allow-list of :mod:`~rlm_kernel.executors.environment` (names, as a list or one text
            separated
            by commas or spaces; the host's ``RLM_PASS_ENV`` names more).

    Raises:
        SandboxUnavailable: bubblewrap is not installed (the message names the package).
        WorkerError: the worker did not start (the message says why).
        FileNotFoundError / NotADirectoryError: ``workdir`` is missing / not a folder.
        ValueError: ``cwd`` and ``workdir`` differ, or ``workdir`` is ``/`` or inside the
            Python installation or this package (:func:`.sandbox.check_workdir`); a name of
            ``pass_env`` is not a variable's name.
    """

    in_process = False
    """Model code runs in the sandboxed worker, not in this process
    (:attr:`~rlm_kernel.executors.Executor.in_process`)."""

    def __init__(self, namespace: Mapping[str, Any] | None = None, *,
                 memory_limit: int | None = DEFAULT_MEMORY,
                 max_processes: int | None = DEFAULT_PROCESSES,
                 cpu_seconds: float | None = None, network: bool = False,
                 cwd: str | os.PathLike[str] | None = None, kill_grace: float = 1.0,
                 max_output_chars: int = MAX_KEPT_CHARS, snapshot: bool = True,
                 start_timeout: float = 30.0, python: str | None = None,
                 workdir: str | os.PathLike[str] | None = None,
                 tmp_bytes: int | None = DEFAULT_TMP_BYTES,
                 request_timeout: float = REQUEST_SECONDS,
                 pass_env: str | Iterable[str] | None = None) -> None:
        self.memory_limit, self.max_processes = memory_limit, max_processes
        self.pass_env = tuple(passed_names(pass_env, environ={}))
        self.cpu_seconds, self.network, self.kill_grace = cpu_seconds, network, kill_grace
        self.max_output_chars, self.take_snapshots = max_output_chars, snapshot
        self.request_timeout = request_timeout
        self.workdir: str | None = None
        self.tmp_bytes = tmpfs_size(tmp_bytes, memory_limit)
        if workdir is not None:
            self.workdir = os.path.realpath(os.fspath(workdir))
            if not os.path.exists(self.workdir):
                raise FileNotFoundError(f"working folder {os.fspath(workdir)!r} does not exist")
            if not os.path.isdir(self.workdir):
                raise NotADirectoryError(f"working folder {os.fspath(workdir)!r} is not a "
                                         "folder")
            if self.workdir == os.path.realpath("/"):
                raise ValueError("the working folder cannot be / (nothing would be walled)")
            check_workdir(self.workdir, interpreter_path(python or sys.executable))
            if cwd is not None and os.path.realpath(os.fspath(cwd)) != self.workdir:
                raise ValueError(f"cwd {os.fspath(cwd)!r} is not the working folder "
                                 f"{self.workdir!r}")
            cwd = self.workdir
        self.cwd = str(cwd) if cwd is not None else os.getcwd()
        self.start_timeout = start_timeout
        self.python = interpreter_path(python or sys.executable)
        self._bwrap = find_bwrap()
        self.in_step = False
        self.generation = 0
        self.restarts = 0
        self.limits: dict[str, str] = {}
        self._snapshot: list[list[Any]] = []  # [[names], pickle]: opaque to the host
        self._lost: list[str] = []
        self._notes: list[str] = []  # what happened between steps, for the next step
        self._rids = itertools.count(1)
        self._waiting: dict[int, queue.Queue[dict[str, Any] | None]] = {}
        self._lock = threading.RLock()  # one reader of the channel outside steps
        self._send_lock = threading.Lock()
        self._step_final: dict[str, Any] | None = None
        self._nonce = ""
        self._recovering = False
        self._cgroups = Cgroups()
        self._child: Child | None = None
        self._closed = False
        self._deadline: float | None = None  # the run's (set_deadline)
        self._watch: MemoryWatch | None = None
        self._oom_kills = 0  # the memory cgroup's count of processes it killed, as seen
        self.namespace: IsolatedNamespace = IsolatedNamespace(self)
        # the host imports nothing model code may write in the working folder
        # (.import_guard), from now until close
        self._unguard = weakref.finalize(self, guard_folder(self.workdir)) \
            if self.workdir is not None else None
        if self._unguard is not None:
            warm_channel_modules()
        try:
            self._start()
        except BaseException:
            if self._unguard is not None:
                self._unguard()
            raise
        self._finalizer = weakref.finalize(self, cleanup, self._child, self._cgroups)
        unheld_memory = memory_limit if self._cgroups.memory is None else None
        unheld_processes = max_processes if self._cgroups.pids is None else None
        if unheld_memory or unheld_processes is not None:
            self._watch = _memory_watch(self, unheld_memory, unheld_processes)
            self._watch.start()
        if namespace:
            self.namespace.update(namespace)

    # -- life -------------------------------------------------------------------------------
    def _start(self) -> None:
        """Start a worker (a new generation) in a new sandbox: as an unprivileged host
        uid (through :mod:`~rlm_kernel.executors.launcher` when the caller is root), under the
        seccomp filter
        of :mod:`~rlm_kernel.executors.syscall_filter`.

        Raises:
            SandboxUnavailable: the wall cannot be built here (no libseccomp, no host uid,
                a working folder that refuses idmapped mounts ...; the message says what
                to do).
            WorkerError: it did not start.
        """
        if not self._cgroups.folders:
            self._cgroups = make_cgroups(
                None if self.max_processes is None else self.max_processes + OWN_PROCESSES,
                self.memory_limit)
        nproc = None
        if self._cgroups.pids is None and self.max_processes is not None:
            # RLIMIT_NPROC counts the tasks of the worker's real uid on the host: the
            # caller's own, or (root) the sandbox's host uid, which root itself is not
            owner = host_uid() if os.getuid() == 0 else os.getuid()
            slack = OWN_PROCESSES + 16 if os.getuid() == 0 else NPROC_SLACK
            nproc = user_processes(owner) + self.max_processes + slack
        try:
            seccomp = filter_fd(self.network)
        except FilterUnavailable as exc:
            raise SandboxUnavailable(str(exc)) from exc
        host, inner = socket.socketpair()
        try:
            config = {"fd": inner.fileno(), "memory": self.memory_limit, "nproc": nproc}
            argv = [self.python, "-c", WORKER_BOOT, json.dumps(config)]
            command = limits_command(self.memory_limit, nproc) + wall_command(
                argv, bwrap=self._bwrap, python=self.python, network=self.network,
                workdir=self.workdir, cwd=self.cwd, tmp_bytes=self.tmp_bytes,
                keep_fds=(inner.fileno(),), seccomp_fd=seccomp, cgroups=self._cgroups)
            # a step's reply: its snapshot, the FINAL's data form, the bindings
            max_frame = SNAPSHOT_BYTES + MAX_VALUE_BYTES + (8 << 20)
            start_by = self._by(self.start_timeout) - time.monotonic()
            self._child = Child(command, (inner.fileno(), seccomp), host,
                                 child_env(self.pass_env), start_by, max_frame)
        except WorkerError as exc:
            host.close()
            if LAUNCHER_MARK in str(exc):  # the root launcher's own words: what to do
                raise SandboxUnavailable(str(exc).split(LAUNCHER_MARK, 1)[1].strip()) from None
            raise
        except BaseException:
            host.close()
            raise
        finally:
            inner.close()
            os.close(seccomp)
        self.generation += 1
        self.limits = self._describe(nproc)
        for note in self._child.notes:
            log.warning("isolated REPL: %s", note)
        if hasattr(self, "_finalizer"):
            self._finalizer.detach()
            self._finalizer = weakref.finalize(self, cleanup, self._child, self._cgroups)

    def _describe(self, nproc: int | None) -> dict[str, str]:
        """What :attr:`limits` says: each limit and what holds it."""
        memory = self._memory_described()
        processes = (f"cgroup pids.max {self.max_processes}" if self._cgroups.pids
                     else f"{self.max_processes} (the host's watch counts the sandbox's "
                          f"processes and kills it past them; RLIMIT_NPROC {nproc}, which "
                          "counts every thread of the uid, stops a fork bomb)" if nproc
                     else "not limited")
        if os.getuid() == 0:
            files = (f"read-only except {self.workdir} (idmapped: written as its owner)"
                     if self.workdir else "read-only")
            user = (f"host uid {host_uid()} (unprivileged, no account; uid {SANDBOX_UID} "
                    f"inside), never root")
        else:
            files = f"read-only except {self.workdir}" if self.workdir else "read-only"
            user = f"host uid {os.getuid()} (yours; the same inside)"
        tmp = (f"private /tmp, /var/tmp, /dev/shm, /run ({self.tmp_bytes} bytes each)"
               if self.tmp_bytes else "private /tmp, /var/tmp, /dev/shm, /run")
        proc = (f"own /proc; {', '.join(PROC_READ_ONLY)} read-only; "
                f"{', '.join(PROC_HIDDEN)} unreadable")
        return {"sandbox": "bubblewrap: user, PID, IPC, UTS, cgroup namespaces; no "
                           "capabilities",
                "user": user, "syscalls": denied_summary(self.network), "proc": proc,
                "memory": memory, "processes": processes,
                "network": "on" if self.network else "off",
                "pid_namespace": "yes",
                "cpu_per_step": f"{self.cpu_seconds} s" if self.cpu_seconds else "not limited",
                "files": f"{files}; {tmp}; homes hidden"}

    def _memory_described(self) -> str:
        """The ``memory`` line of :attr:`limits`: the limit, what it counts, what holds it."""
        if not self.memory_limit:
            return "not limited"
        limit = f"{self.memory_limit:,} bytes for the whole sandbox, during and between steps"
        if self._cgroups.memory is not None:
            return (f"{limit}: every page of its processes, its tmpfs files and its shared "
                    f"and kernel memory (a memory cgroup: the kernel holds it); "
                    f"RLIMIT_AS per process")
        return (f"{limit}: its processes' anonymous and shared resident memory, its tmpfs "
                f"files (/tmp, /var/tmp, /dev/shm, /run, /dev) and memfds, counted by the "
                f"host's watch every {MAX_INTERVAL:g} s or less (more often near the "
                f"limit), which kills the sandbox past it (no memory cgroup here); "
                f"RLIMIT_AS per process; not counted (not held): kernel memory (UNIX "
                f"socket buffers, page tables) and files in a working folder on a memory "
                f"file system of the host")

    def check_size(self, name: str, size: int) -> None:
        """Refuse an input too large for the sandbox's memory.

        Args:
            name: the variable's name; size: its pickle's length in bytes.

        Raises:
            WorkerError: the worker would need more than :attr:`memory_limit` to load it
                (about twice its size); the message says what to set.
        """
        if self.memory_limit and 2 * size + (256 << 20) > self.memory_limit:
            raise WorkerError(
                f"the variable {name!r} is {size:,} bytes: too large for the isolated "
                f"REPL's memory limit of {self.memory_limit:,} bytes (loading it there takes "
                f"about twice its size).  Raise the limit (rlm run --memory-limit BYTES, "
                f"RLM(memory_limit=...), c.RLM.memory_limit) or run in-process "
                f"(--executor in-process), which has no wall")

    def describe_variables(self, *, skip: Iterable[str] = (),
                           preview_length: int = REPLVariable.PREVIEW_LENGTH
                           ) -> list[REPLVariable]:
        """The metadata (name, type, length, preview) of the namespace's data variables,
        made in the worker where the values live (:mod:`~rlm_kernel.executors.worker`'s
        ``describe``): no
        value crosses to the host for it.  A data variable is a name that is not
        private (``_x``), not in ``skip``, not a module and not callable.

        Args:
            skip: names that are not data (the engine's reserved names).
            preview_length: characters of each preview.

        Returns:
            One :class:`~rlm_kernel.repl_types.REPLVariable` per data variable, in the
            namespace's order, previews redacted; past the run's deadline plus
            :data:`LATE_SECONDS`, one per name model code bound whose preview says it
            was not read.

        Raises:
            WorkerError: the worker failed and could not be restarted.
        """
        skip = set(skip)
        try:
            reply = self.request("describe", skip=sorted(skip), preview=int(preview_length),
                                 seconds=self.work_seconds())
        except LateRead as exc:
            return [REPLVariable(name, "object", preview=f"<{name}: not read, {exc}>")
                    for name, token in self.namespace.bindings().items()
                    if token[0] != "stub" and not name.startswith("_") and name not in skip]
        return reply_variables(reply.get("variables"), preview_length, skip)

    def variable_ids(self) -> dict[str, Any]:
        """Which object each name is bound to, for telling later which names were
        rebound: ``{name: (worker generation, the object's id there)}``, read without
        any value crossing; ``{}`` past the run's deadline plus :data:`LATE_SECONDS`.

        Raises:
            WorkerError: the worker failed and could not be restarted.
        """
        try:
            reply = self.request("ids")
        except LateRead:
            return {}
        ids = reply.get("ids")
        if not isinstance(ids, dict):
            return {}
        return {n: (self.generation, i) for n, i in ids.items()
                if isinstance(n, str) and isinstance(i, int)}

    def close(self) -> None:
        """Kill the sandbox and everything it started; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._watch is not None:
            self._watch.stop()
        self._finalizer()
        if self._unguard is not None:
            self._unguard()

    def __enter__(self) -> IsolatedExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def _cgroup(self) -> Path | None:
        """The ``pids`` cgroup folder of the worker, or None (read by the shared fault
        cases' harness, ``../shared/fault-cases-t4/t4.py``, to clean up after a case)."""
        return self._cgroups.pids

    @property
    def pid(self) -> int | None:
        """The host-visible pid of the worker running model code (None when closed)."""
        return None if self._closed or self._child is None else self._child.pid

    # -- requests -----------------------------------------------------------------------------
    def request(self, op: str, *, check: bool = False, **fields: Any) -> dict[str, Any]:
        """Send a request to the worker and return its reply (checked: a dict).

        Args:
            op: ``get``, ``has``, ``set``, ``del``, ``keys`` or ``load`` (the worker's
                ``do_*``); ``fields``: the request's fields.
            check: raise if the worker reports an error.

        Outside a step, a worker that does not answer by :attr:`request_timeout`, dies
        or breaks the protocol is killed and restarted from the last snapshot, and the
        request is made once more there (the next step's output says so).

        Raises:
            WorkerError: the executor is closed, the restarted worker failed too, or
                (``check``) the worker refused.
        """
        if self._closed or self._child is None:
            raise WorkerError("the isolated REPL is closed")
        tail = fields.pop("payload", None) if op == "set" and fields.get("kind") == "value" \
            else None
        if self.in_step:  # the step loop reads; it hands our reply over
            reply = self._request_in_step(op, fields, tail)
        else:
            with self._lock:
                reply = self._request_between_steps(op, fields, tail)
        if check and "error" in reply:
            raise WorkerError(f"the isolated REPL refused {op}: {str(reply['error'])[:500]}")
        return reply

    def _request_in_step(self, op: str, fields: dict[str, Any], tail: bytes | None
                         ) -> dict[str, Any]:
        child, rid = self._child, next(self._rids)
        assert child is not None
        box: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._waiting[rid] = box
        try:
            self._send(child, {"op": op, "id": rid, **fields}, tail)
            try:
                reply = box.get(timeout=max(self._by(self.request_timeout) - time.monotonic(),
                                            0.0))
            except queue.Empty:
                reply = None
        finally:
            self._waiting.pop(rid, None)
        if reply is None:
            raise WorkerError("the isolated REPL process did not answer during the step")
        return reply

    def _request_between_steps(self, op: str, fields: dict[str, Any], tail: bytes | None
                               ) -> dict[str, Any]:
        for attempt in (0, 1):
            child, rid = self._child, next(self._rids)
            assert child is not None
            if self._time_up():
                raise LateRead(self._late_words())
            try:
                deadline = self._by(self.request_timeout)
                self._send(child, {"op": op, "id": rid, **fields}, tail, deadline)
                return self._await(child, rid, deadline)
            except (TimeoutError, ChannelClosed, ProtocolError) as exc:
                problem = channel_problem(exc, child)
            if self._time_up():  # killed; the next step starts a new worker
                child.kill()
                if child.killed_for is None:
                    child.killed_for = f"{problem} after the run's deadline"
                raise LateRead(self._late_words())
            if attempt or self._recovering:
                raise WorkerError(f"the isolated REPL {problem}")
            where = "" if child.killed_for is not None else " between steps"  # it says
            try:
                self._notes.append(self._recover(f"The REPL process {problem}{where}"))
            except WorkerError:
                if self._time_up():
                    raise LateRead(self._late_words()) from None
                raise
        raise AssertionError("unreachable")

    def _time_up(self) -> bool:
        """Past the run's deadline plus :data:`LATE_SECONDS` (:meth:`set_deadline`)."""
        return self._deadline is not None and \
            time.monotonic() >= self._deadline + LATE_SECONDS

    def _late_words(self) -> str:
        return (f"the run's time was up ({LATE_SECONDS:g} s past its deadline, every wait "
                f"on the isolated REPL after it together)")

    def _send(self, child: Child, message: dict[str, Any], tail: bytes | None = None,
              deadline: float | None = None) -> None:
        with self._send_lock:
            child.channel.send(message, tail=tail, deadline=deadline or
                               self._by(self.request_timeout))

    def set_deadline(self, deadline: float | None) -> float | None:
        """Bound every wait on the worker outside a step by a run's deadline.

        Args:
            deadline: ``time.monotonic()`` by which the run must end, or None (no
                bound but :attr:`request_timeout`).  A request waits at most
                :attr:`request_timeout`, and never past ``deadline`` plus
                :data:`LATE_SECONDS`, whatever the number of requests: by then one still
                unanswered has its worker killed (restarted at the next step), and
                every later request is a :class:`LateRead` without asking the worker
                (a name read then is a :class:`RemoteValue` saying it was not read).

        Returns:
            The deadline it replaces (see :func:`rlm_kernel.executors.run_deadline`).
        """
        previous, self._deadline = self._deadline, deadline
        return previous

    def _by(self, seconds: float) -> float:
        """``time.monotonic()`` at which a wait of ``seconds`` on the worker ends: cut to
        the run's deadline (:meth:`set_deadline`) plus :data:`LATE_SECONDS`, one bound
        for every wait after the deadline together."""
        now = time.monotonic()
        if self._deadline is None:
            return now + seconds
        return min(now + seconds, self._deadline + LATE_SECONDS)

    def work_seconds(self) -> float:
        """Seconds the worker may spend on a request's work (a value's data form, a
        snapshot's load) before it answers with what it has: its own limit
        (:data:`~rlm_kernel.executors.worker.SNAPSHOT_SECONDS`), less when the run's
        deadline is near, so that it answers before the host gives up on it."""
        left = self._by(self.request_timeout) - time.monotonic()
        return max(min(SNAPSHOT_SECONDS, left - REPR_SECONDS - 0.5), 0.2)

    def _out_of_memory(self) -> str | None:
        """Words for the model when the memory cgroup's limit killed a process of the
        sandbox since the last call (``oom_kill`` of ``memory.events``, cgroup v2, or
        of ``memory.oom_control``, v1), else None."""
        folder = self._cgroups.memory
        if folder is None:
            return None
        count = 0
        for name in ("memory.events", "memory.oom_control"):
            try:
                for line in (folder / name).read_text().splitlines():
                    if line.startswith("oom_kill "):
                        count = int(line.split()[1])
            except (OSError, ValueError, IndexError):
                continue
        seen, self._oom_kills = self._oom_kills, count
        if count <= seen:
            return None
        return f"the sandbox reached its memory limit of {self.memory_limit:,} bytes"

    def _gone(self, child: Child | None) -> str | None:
        """Why ``child`` can run no more step (words for the model, after "The REPL
        process"), or None: the memory watch killed it, or it died since the last step."""
        if child is None:
            return None
        if child.killed_for is not None:
            return child.killed_for
        code = child.proc.poll()
        return None if code is None else f"{exit_reason(code)} between steps"

    def _await(self, child: Child, rid: int, deadline: float) -> dict[str, Any]:
        """Read until the reply to ``rid`` (outside steps: host calls are refused).

        Raises:
            TimeoutError / ChannelClosed / ProtocolError: see :meth:`Channel.receive`.
        """
        while True:
            message = child.channel.receive(deadline)
            op = message.get("op")
            if op == "reply" and message.get("id") == rid:
                return message
            if op == "call" and isinstance(message.get("id"), int):
                self._send(child, {"op": "result", "id": message["id"], "error": {
                    "type": "RuntimeError",
                    "message": "host functions can only be called while a step runs"}})
                continue
            raise ProtocolError(f"an unexpected {str(op)[:40]!r} message")

    # -- a step ----------------------------------------------------------------------------
    read_watch: ReadWatch | None = None
    """The names (and attribute names) whose reads each step records in
    ``REPLResult.names_read`` (:mod:`~rlm_kernel.executors.reads`); None: no record."""

    def execute(self, code: str, *, timeout: float | None = None,
                on_output: OutputCallback | None = None) -> REPLResult:
        """Run ``code`` in the worker; see :meth:`rlm_kernel.executors.Executor.execute`.

        Raises:
            KeyboardInterrupt: the user interrupted (the worker's step is interrupted,
                or the sandbox killed and restarted).
            WorkerError: the executor is closed, or a restarted worker did not start.
        """
        if self._closed or self._child is None:
            raise WorkerError("the isolated REPL is closed")
        redact = Redactor()
        out = StreamTee("stdout", on_output, max_chars=self.max_output_chars, redact=redact)
        err = StreamTee("stderr", on_output, max_chars=self.max_output_chars, redact=redact)
        for note in self._notes:
            err.write(note)
        self._notes = []
        start = time.perf_counter()
        if (oom := self._out_of_memory()) is not None:  # since the last step
            err.write(f"A process in the REPL was killed between steps: {oom}.\n")
        gone = self._gone(self._child)
        if gone is not None:  # killed or dead since the last step: a new one runs this step
            with self._lock:
                err.write(self._recover(f"The REPL process {gone}"))
        child = self._child
        marker = b"\x00\x1erlm-step-end-" + uuid.uuid4().hex.encode() + b"\x1e\x00"
        for event in child.seen.values():
            event.clear()
        child.marker = marker
        child.sink = lambda name, text: (out if name == "stdout" else err).write(text)
        refused = self._cgroups.pids_refused()
        self._step_final = None
        try:
            reply, problem, interrupted = self._run_step(child, code, timeout)
        finally:
            self.in_step = False
            for box in list(self._waiting.values()):  # no reply comes after the step
                box.put(None)
        if reply is not None:
            for event in child.seen.values():  # the output's end markers (past the
                # run's deadline, what has not come is not waited for)
                wait = 2.0 if self._deadline is None else \
                    min(2.0, max(self._deadline - time.monotonic(), 0.05))
                event.wait(wait)
        child.sink = None
        final_output, success = None, False
        if reply is not None:
            success = reply.get("success") is True
            final_output = self._final(reply)
            self.namespace.update_bindings(reply_bindings(reply))
            if self._cgroups.pids_refused() > refused:
                problem = (f"the step reached the limit of {self.max_processes} processes; "
                           "its processes were killed")
                success = False
            # a step that ends in a restart leaves the last good snapshot: the one taken
            # with no process left to spare (a fork bomb) has lost everything
            if problem is None and isinstance(reply.get("snapshot"), list):
                self._snapshot = reply_snapshot(reply["snapshot"])
                lost = reply.get("lost")
                self._lost = [str(n) for n in lost] if isinstance(lost, list) else []
        elif self._step_final is not None:  # FINAL was called before the worker failed
            final_output = self._step_final
        if problem is None and (oom := self._out_of_memory()) is not None:
            err.write(f"A process in the REPL was killed: {oom}.\n")
        if problem is not None:
            err.write(self._recover(problem))
        out.flush()
        err.flush()
        if interrupted:
            raise KeyboardInterrupt
        return REPLResult(stdout=out.getvalue(), stderr=err.getvalue(), locals=self.namespace,
                          execution_time=time.perf_counter() - start, llm_calls=[],
                          success=success, final_output=final_output,
                          names_read=_names_read(reply, self.read_watch))

    def _run_step(self, child: Child, code: str, timeout: float | None
                  ) -> tuple[dict[str, Any] | None, str | None, bool]:
        """Send the step and serve the worker until its reply, a kill, its death or a
        message outside the protocol.

        Returns:
            (the worker's reply or None, the problem to recover from or None,
            whether the user interrupted).
        """
        rid, nonce = next(self._rids), uuid.uuid4().hex
        step_context = contextvars.copy_context()  # host calls run in it, as in-process
        with self._lock:
            self._nonce = nonce
            try:
                self._send(child, {"op": "exec", "id": rid, "code": code, "timeout": timeout,
                                   "cpu": self.cpu_seconds, "marker": child.marker,
                                   "snapshot": self.take_snapshots, "nonce": nonce,
                                   "watch": _watch_message(self.read_watch)})
            except (TimeoutError, ChannelClosed) as exc:
                return None, f"the REPL process {channel_problem(exc, child)}", False
            self.in_step = True
            limit = timeout if timeout and 0 < timeout <= threading.TIMEOUT_MAX else None
            # the worker's own limit acts at ``limit``; the host's signals after that
            deadline = time.monotonic() + limit + self.kill_grace if limit else None
            stage, interrupted = 0, False  # 0 running, 1 SIGTERM sent
            while True:
                try:
                    if not child.channel.wait(deadline):
                        if deadline is None or time.monotonic() < deadline:
                            continue
                        if stage == 1:
                            child.kill()
                            return None, self._killed_reason(timeout, interrupted), interrupted
                        child.signal_worker(signal.SIGTERM)
                        stage, deadline = 1, time.monotonic() + self.kill_grace
                        continue
                    # a frame has begun: it must be whole soon, however the step stands
                    frame_by = max(deadline or 0.0, self._by(self.request_timeout)
                                   if deadline is None else self._by(10.0))
                    message = child.channel.receive(frame_by)
                except KeyboardInterrupt:
                    interrupted = True
                    child.signal_worker(signal.SIGINT)
                    deadline, stage = time.monotonic() + self.kill_grace, 1
                    continue
                except (TimeoutError, ChannelClosed, ProtocolError) as exc:
                    problem = channel_problem(exc, child)
                    child.kill()
                    if child.killed_for is not None:  # the memory watch's kill
                        return None, f"the REPL process {child.killed_for}", interrupted
                    if stage and isinstance(exc, ChannelClosed):
                        return None, self._killed_reason(timeout, interrupted), interrupted
                    return None, f"the REPL process {problem} during the step", interrupted
                op = message.get("op")
                if op == "call" and message.get("nonce") == nonce \
                        and isinstance(message.get("id"), int):
                    threading.Thread(target=step_context.copy().run,
                                     args=(self._serve_call, child, message),
                                     name="rlm-isolated-call", daemon=True).start()
                elif op == "reply" and message.get("id") == rid:
                    if message.get("nonce") != nonce:
                        child.kill()
                        return None, ("the REPL process sent a reply that is not this "
                                      "step's and was restarted"), interrupted
                    if "error" in message:
                        child.kill()
                        return None, (f"the REPL process failed: "
                                      f"{str(message['error'])[:500]}"), interrupted
                    return message, None, interrupted or message.get("interrupted") is True
                elif op == "reply" and message.get("id") in self._waiting:
                    self._waiting[message["id"]].put(message)
                else:
                    child.kill()
                    return None, (f"the REPL process sent a message outside the protocol "
                                  f"({str(op)[:40]!r}) and was restarted"), interrupted

    def _killed_reason(self, timeout: float | None, interrupted: bool) -> str:
        if interrupted:
            return "the REPL process did not stop after the interrupt and was killed"
        return (timeout_message(timeout).rstrip("\n") + f"; the REPL process did not stop "
                f"within {self.kill_grace:g} s and was killed")

    def _serve_call(self, child: Child, message: dict[str, Any]) -> None:
        """Run a host function the worker called and send back its result or error."""
        cid, key = message["id"], message.get("key")
        fn = self.namespace.function(key)
        try:
            if fn is None:
                raise RuntimeError(f"no host function number {str(key)[:20]}")
            args, kwargs = message.get("args"), message.get("kwargs")
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                raise RuntimeError("malformed call")
            value = fn(*[from_worker(a, self.generation) for a in args],
                       **{str(k): from_worker(v, self.generation) for k, v in kwargs.items()})
            reply: dict[str, Any] = {"value": _result_pickle(fn, value, Redactor())}
        except FinalOutput as exc:
            if self._step_final is None:
                self._step_final = exc.output
            reply = {"error": {"type": "FinalOutput",
                               "output": pickle.dumps(exc.output, protocol=5)}}
        except BaseException as exc:  # noqa: BLE001 - the worker's model code gets it
            reply = {"error": {"type": type(exc).__name__, "module": type(exc).__module__,
                               "message": _error_text(exc, Redactor()),
                               "base_only": not isinstance(exc, Exception)}}
        try:
            self._send(child, {"op": "result", "id": cid, **reply})
        except (TimeoutError, ChannelClosed):
            pass

    def _final(self, reply: dict[str, Any]) -> dict[str, Any] | None:
        """The step's ``FINAL`` output when the step ended with one (model code may
        catch it): the host's record of it, else the worker's (as data)."""
        final = reply.get("final")
        if not isinstance(final, dict):
            return None
        if self._step_final is not None:
            return self._step_final
        output = from_worker(final.get("output"), self.generation)
        output = dict(output) if isinstance(output, dict) else {"type": "direct"}
        output["answer"] = from_worker(final.get("answer"), self.generation)
        return output

    def _recover(self, problem: str) -> str:
        """Kill what is left, start a new worker from the last snapshot; the text that
        tells the model (ends with a newline).

        Raises:
            WorkerError: no new worker could be started.
        """
        if self._child is not None:
            self._child.kill()
        if (note := self._out_of_memory()) is not None:
            problem = f"{problem.rstrip('.')} ({note})"
        self._cgroups.kill()
        self.restarts += 1
        self._recovering = True
        try:
            self._start()
            self.namespace.resend()
            try:
                reply = self.request("load", snapshot=self._snapshot,
                                     seconds=self.work_seconds(), check=True)
                said = reply.get("lost")
                failed = said if isinstance(said, list) else []
            except WorkerError:  # its loading killed it, or never ended: start empty
                self._child.kill()  # type: ignore[union-attr]
                self._start()
                self.namespace.resend()
                failed = [n for names, _ in self._snapshot for n in names]
            self.namespace.update_bindings(reply_bindings(self.request("keys")))
        finally:
            self._recovering = False
        lost = sorted(set(self._lost) | {str(n) for n in failed})
        text = (f"{problem.rstrip('.')}.\nThe REPL was restarted with the variables as they "
                "were after the last step that finished; what this step changed is gone")
        if lost:
            text += f"; these could not be saved and are lost: {', '.join(lost)}"
        log.warning("isolated REPL restarted: %s", problem)
        return text + ".\n"


def _error_text(exc: BaseException, redact: Redactor) -> str:
    """The message of a host function's exception as model code gets it: redacted
    (a tool's error quoting a key it sent must not hand model code the key, which it
    could then print encoded past every redaction of its output)."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - an exception whose __str__ fails
        text = f"<{type(exc).__name__}>"
    return redact(text)


def _result_pickle(fn: Any, value: Any, redact: Redactor) -> bytes:
    """The pickle of a host function's result for the worker, with no secret the host
    knows in it: its texts (in lists, tuples and dicts) redacted; a value that still
    holds one somewhere (an object's attribute, bytes) is sent as its redacted ``repr``
    instead, as is a value that cannot be pickled."""
    value = redact_data(value, redact)
    try:
        data = pickle.dumps(value, protocol=5)
    except Exception as exc:  # noqa: BLE001 - the worker gets the text instead
        log.warning("the result of %s cannot go to the isolated REPL: %s", fn, exc)
        return pickle.dumps(redact(repr(value)), protocol=5)
    if redact.holds(data):
        log.warning("the result of %s holds a secret: the isolated REPL gets its redacted "
                    "text", fn)
        return pickle.dumps(redact(repr(value)), protocol=5)
    return data



def _memory_watch(executor: IsolatedExecutor, limit: int | None,
                  max_processes: int | None) -> MemoryWatch:
    """The watch that holds ``executor``'s sandbox to ``limit`` bytes where no memory
    cgroup does, and to ``max_processes`` processes of model code where no ``pids``
    cgroup does (:mod:`~rlm_kernel.executors.memory_watch`; None: held elsewhere); it holds the
    executor
    weakly and ends with it."""
    ref = weakref.ref(executor)

    def current() -> SandboxMeter | None:
        ex = ref()
        if ex is None or ex._closed:
            watch.stop()
            return None
        child = ex._child
        if child is None or child.killed_for is not None or child.proc.poll() is not None:
            return None
        return child.meter

    def over(meter: SandboxMeter, usage: MemoryUsage) -> None:
        ex = ref()
        child = None if ex is None else ex._child
        if ex is None or child is None or child.proc.pid != meter.root \
                or child.killed_for is not None:
            return  # a sandbox since replaced, or already killed
        when = "during the step" if ex.in_step else "between steps"
        child.killed_for = (f"used {usage.describe()}, more than the memory limit of "
                            f"{limit:,} bytes, {when}, and was killed")
        log.warning("isolated REPL %s", child.killed_for)
        child.stop_processes()

    def too_many(meter: SandboxMeter, count: int) -> None:
        ex = ref()
        child = None if ex is None else ex._child
        if ex is None or child is None or child.proc.pid != meter.root \
                or child.killed_for is not None:
            return
        when = "during the step" if ex.in_step else "between steps"
        child.killed_for = (f"had {count - OWN_PROCESSES} processes, more than the limit "
                            f"of {max_processes} processes, {when}, and was killed")
        log.warning("isolated REPL %s", child.killed_for)
        child.stop_processes()

    watch = MemoryWatch(limit, current, over, max_processes=None if max_processes is None
                        else max_processes + OWN_PROCESSES, too_many=too_many)
    return watch
