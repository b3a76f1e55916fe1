"""An executor that runs model code in a worker process inside a bubblewrap sandbox.

:class:`IsolatedExecutor` is an :class:`~rlm_kernel.executors.Executor`: the engine binds
its variables and its functions (``llm_query``, ``FINAL`` ... closures over the host's
budget, depth and ``FINAL`` record) into :attr:`IsolatedExecutor.namespace` and calls
:meth:`IsolatedExecutor.execute`, exactly as with the in-process
:class:`~rlm_kernel.executors.plain.PlainExecutor`.  Here the namespace lives in a worker
process (:mod:`rlm_kernel.executors.worker`) behind the wall of
:mod:`rlm_kernel.executors.sandbox`, and :attr:`namespace` is a proxy:

* setting a data value pickles it to the worker once (the host trusts its own data);
  setting a host callable registers it in a table on the host and binds a stub in the
  worker that calls it back (the host serves those calls while the step runs).  The
  worker can call only what was registered.  Callables marked
  :data:`~rlm_kernel.executors.workfolder.PORTABLE` (the working folder's and the
  data helpers ``search`` & co.) are copied into the worker and run there, behind the
  wall and under the step's limits;
* getting a name fetches the value's *data form* (:mod:`~rlm_kernel.executors.wire`:
  msgpack with caps on bytes, depth and items; never a pickle from the worker).  A
  value with no data form arrives as a :class:`RemoteValue` (its description, made in
  the worker) or a :class:`RemoteFunction`, which put back into the namespace rebind
  the worker's own object.  A value the host bound and model code did not rebind is
  answered by the host's own object (``is`` holds); a copy of a worker value is kept
  while the worker's value is unchanged (a digest the worker compares), at most
  :data:`~rlm_kernel.executors.isolated.remote.COPIES_BYTES` of copies in all;
* the variables' metadata (:meth:`IsolatedExecutor.describe_variables`) and which object
  each name is bound to (:meth:`IsolatedExecutor.variable_ids`) are made in the worker:
  no value crosses for them.

The channel trusts nothing the worker sends: one reader at a time, a deadline on every
read (a step's reply, a request's, a snapshot's load), a per-step nonce on the step's
reply and calls, and a kill plus restart at the first frame outside the protocol.  The
host's record of a step's ``FINAL`` (taken when model code called it) is kept whatever
the worker does next.

Limits held by the operating system:

* **time**: the worker applies the in-process limit of
  :mod:`~rlm_kernel.executors.timeouts` (the namespace survives); ``kill_grace``
  seconds past the limit the host sends ``SIGTERM`` to the worker, and ``kill_grace``
  seconds later kills the sandbox.  The worker is then restarted with the last good
  snapshot of its namespace (pickled in the worker after every step that returned,
  names that share an object in one pickle, so that they still do after a restart;
  the host keeps the bytes, never loads them) and the step's output lists the names
  that were lost;
* a worker that dies on its own (``os._exit``, a segfault, ``SIGKILL``) or breaks the
  protocol is a failed step with the reason, restarted likewise (one that died between
  steps, before the next step runs);
* **memory**: ``memory_limit`` bytes for everything the sandbox holds, its processes and
  its private ``tmpfs`` files, during and between steps: a ``memory`` cgroup where the
  host may make one (root), else the host's watch (:mod:`~rlm_kernel.executors.memory_watch`: a
  thread that
  kills the sandbox past the limit, whatever passes on the channel); the next step
  says why.  Each private ``tmpfs`` holds at most a quarter of the limit; always
  ``RLIMIT_AS`` of ``memory_limit`` per process; core dumps off; **CPU** per step
  (``RLIMIT_CPU``, ``cpu_seconds``);
* **time outside steps**: a request between steps waits ``request_timeout`` seconds at
  most, and every wait ends by the run's deadline (:meth:`IsolatedExecutor.set_deadline`,
  given by the engine) plus :data:`LATE_SECONDS`, all requests together: a worker that
  goes silent or answers slowly (after ``FINAL`` too) is killed then, a name not read
  in time reads as a :class:`RemoteValue` that says so, and ``max_seconds`` holds;
* **processes**: a ``pids`` cgroup of ``max_processes`` where the host may make one,
  else the host's watch, which kills a step past ``max_processes``, with
  ``RLIMIT_NPROC`` (every thread of the uid) against a fork bomb;
* the resource limits are set by ``prlimit`` before bubblewrap starts
  (:func:`~rlm_kernel.executors.sandbox.limits_command`), and the worker starts from
  the package (:data:`~rlm_kernel.executors.isolated.child.WORKER_BOOT`), not from a module in its
  working folder;
* **network** off unless ``network=True``, **PID namespace**, **no capabilities**, an
  unprivileged host uid whatever the caller's, a seccomp filter, a read-only file
  system with the homes hidden, **files** writable only in ``workdir``: see
  :mod:`~rlm_kernel.executors.sandbox`;
* the worker's environment is an allow-list (:mod:`~rlm_kernel.executors.environment`),
  and its stdout and stderr are pipes: output
  (``print`` or ``os.write(1, ...)``) streams to ``on_output`` through the same capped,
  coalesced, redacted :class:`~rlm_kernel.executors.streams.StreamTee` as in-process.

* while an executor with a ``workdir`` lives, the host process imports no module from
  that folder (:mod:`~rlm_kernel.executors.import_guard`: the installed one is taken, one found
  only there
  refused), and the modules the channel decodes with are imported when it starts.

:meth:`IsolatedExecutor.close` (or leaving its ``with`` block, or garbage collection)
kills the sandbox and every process of its cgroups.

Not held: a value the host bound and model code changed in place (without rebinding
it) reads back on the host as the host's own object when its pickle is over
:data:`~rlm_kernel.executors.worker.RECHECK_BYTES` (smaller ones are compared).
"""

from __future__ import annotations

from ..sandbox import SandboxUnavailable, WorkerError
from .executor import (
    DEFAULT_MEMORY,
    DEFAULT_PROCESSES,
    DEFAULT_TMP_BYTES,
    LATE_SECONDS,
    REQUEST_SECONDS,
    IsolatedExecutor,
)
from .remote import IsolatedNamespace, LateRead, RemoteFunction, RemoteValue

__all__ = ["IsolatedExecutor", "IsolatedNamespace", "RemoteValue", "RemoteFunction",
           "WorkerError", "SandboxUnavailable", "DEFAULT_MEMORY", "DEFAULT_PROCESSES",
           "DEFAULT_TMP_BYTES", "REQUEST_SECONDS", "LATE_SECONDS", "LateRead"]
