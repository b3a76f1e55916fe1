"""The sandboxed child process of the isolated executor: :class:`Child` (one sandbox:
its bubblewrap process, the worker in it, the channel to it, its output pipes and the
threads reading them), the one thread that starts every sandbox, the worker's boot
program and environment, and the words for how a worker ended.  The executor that drives
it: :mod:`rlm_kernel.executors.isolated.executor`.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..commands import signal_name
from ..environment import model_code_environ
from ..memory_watch import SandboxMeter
from ..sandbox import PACKAGE_ROOT, Cgroups, WorkerError, process_tree
from ..wire import Channel, ChannelClosed, ProtocolError
from ..worker import ERRORS

__all__ = ["Child", "WORKER_BOOT", "NPROC_SLACK", "OWN_PROCESSES", "tmpfs_size", "child_env",
           "user_processes", "exit_reason", "channel_problem", "cleanup"]

log = logging.getLogger(__name__)

OWN_PROCESSES = 3
"""Processes of the sandbox that are not model code's: the outer bubblewrap, its init
and the worker."""
NPROC_SLACK = 64
"""Tasks above the uid's count and ``max_processes`` that ``RLIMIT_NPROC`` leaves where
the sandbox runs as the caller's uid (an ordinary user: it counts every thread of the
uid, the host's reader, watch and call threads among them; as root the sandbox's host
uid has only the sandbox's, and 16 are left for the worker's threads).  Where no
``pids`` cgroup holds the sandbox, this limit only stops a fork bomb; the host's watch
holds ``max_processes``."""
_PRIVATE_MOUNTS = ("/tmp", "/var/tmp", "/dev/shm", "/run")  # the sandbox's own tmpfs


class _Spawner:
    """One long-lived thread that starts every sandbox: bubblewrap's
    ``--die-with-parent`` follows the *thread* that forked it (``PR_SET_PDEATHSIG``), so a
    sandbox started from a short-lived thread (a Dask task, a pool's worker) would die
    with that thread."""

    def __init__(self) -> None:
        self.jobs: queue.Queue[tuple[Callable[[], Any], queue.Queue[Any]]] = queue.Queue()
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def run(self, job: Callable[[], Any]) -> Any:
        with self.lock:
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._loop, name="rlm-sandbox-spawner",
                                               daemon=True)
                self.thread.start()
        box: queue.Queue[Any] = queue.Queue()
        self.jobs.put((job, box))
        ok, value = box.get()
        if not ok:
            raise value
        return value

    def _loop(self) -> None:
        while True:
            job, box = self.jobs.get()
            try:
                box.put((True, job()))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                box.put((False, exc))


_spawner = _Spawner()


def exit_reason(code: int | None) -> str:
    """Readable words for a worker's exit status (``Popen.returncode``, or the
    128 + signal bubblewrap reports)."""
    if code is None:
        return "stopped answering"
    number = -code if code < 0 else code - 128 if code > 128 else 0
    if number:
        return f"was killed by {signal_name(number)}"
    return f"exited with status {code}"


def _ns_pid(pid: int) -> int | None:
    """The innermost PID-namespace pid of host process ``pid`` (``NSpid``)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    except (OSError, ValueError):
        pass
    return None


class Child:
    """One sandbox: its bubblewrap process, the worker in it, its channel, its output
    pipes and the threads reading them.

    Raises:
        WorkerError: the worker did not say ``ready`` within ``start_timeout`` seconds.
    """

    def __init__(self, command: list[str], fds: tuple[int, ...], sock: socket.socket,
                 env: dict[str, str], start_timeout: float, max_frame: int) -> None:
        self.proc: subprocess.Popen[bytes] = _spawner.run(lambda: subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, pass_fds=fds, start_new_session=True, env=env,
            close_fds=True))
        self.channel = Channel(sock, max_frame)
        self.sink: Callable[[str, str], object] | None = None
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
            ready = self.channel.receive(time.monotonic() + start_timeout)
        except (TimeoutError, ChannelClosed, ProtocolError):
            ready = {}
        if ready.get("op") != "ready":
            self.kill()
            for reader in self.readers:
                reader.join(1.0)
            raise WorkerError("the isolated REPL process did not start "
                              f"({exit_reason(self.proc.poll())}): "
                              + "".join(self.early)[-2000:].strip())
        self.notes: list[str] = [str(n) for n in ready.get("notes", [])][:20]
        self.pid = self._find_worker(ready.get("pid"))

    def _find_worker(self, ns_pid: Any) -> int:
        """The host pid of the worker (the sandbox's process whose namespace pid is the
        one it reported), else bubblewrap's own."""
        for pid in process_tree(self.proc.pid)[1:]:
            if _ns_pid(pid) == ns_pid:
                return pid
        return self.proc.pid

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

    def signal_worker(self, sig: int) -> None:
        try:
            os.kill(self.pid, sig)
        except OSError:
            pass

    killed_for: str | None = None
    """Why the host's memory watch killed this sandbox (words for the model), or None."""
    _meter: SandboxMeter | None = None

    @property
    def meter(self) -> SandboxMeter:
        """What counts this sandbox's memory (:mod:`~rlm_kernel.executors.memory_watch`), made at
        first use."""
        if self._meter is None:
            self._meter = SandboxMeter(self.proc.pid, self.pid)
        return self._meter

    def memory(self) -> int:
        """The sandbox's memory now as the host counts it (bytes): its processes'
        anonymous and shared resident memory, its tmpfs files and memfds
        (:meth:`.memory_watch.SandboxMeter.measure`)."""
        return self.meter.measure().total

    def stop_processes(self) -> None:
        """``SIGKILL`` every process of the sandbox now (from any thread: no wait, the
        channel left open for its reader, which then finds it closed)."""
        for pid in process_tree(self.proc.pid)[::-1]:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for target in (lambda: os.killpg(self.proc.pid, signal.SIGKILL), self.proc.kill):
            try:
                target()
            except OSError:
                pass

    def kill(self) -> None:
        """Kill the sandbox (its PID namespace goes with bubblewrap) and reap it."""
        for target in (lambda: os.killpg(self.proc.pid, signal.SIGKILL), self.proc.kill):
            try:
                target()
            except OSError:
                pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            log.warning("isolated REPL process %d did not end after SIGKILL", self.proc.pid)
        self.channel.close()


def _partial_suffix(data: bytes, marker: bytes) -> int:
    """Length of the longest end of ``data`` that begins ``marker``."""
    for k in range(min(len(marker) - 1, len(data)), 0, -1):
        if data.endswith(marker[:k]):
            return k
    return 0


def child_env(passed: str | Iterable[str] | None = None) -> dict[str, str]:
    """The worker's environment: the allow-list of
    :func:`~rlm_kernel.executors.environment.model_code_environ` (``PATH``, the locale,
    the interpreter's ``PYTHON*``, ``HOME=/tmp``, and the variables named by ``passed``
    or the host's ``RLM_PASS_ENV``), with this package first in ``PYTHONPATH``."""
    env = model_code_environ(passed)
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = PACKAGE_ROOT + (os.pathsep + path if path else "")
    return env


def user_processes(uid: int | None = None) -> int:
    """Tasks (threads) of the real user ``uid`` (default: this process's) now: what
    ``RLIMIT_NPROC`` counts."""
    uid, count = os.getuid() if uid is None else uid, 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += max(len(os.listdir(f"/proc/{entry.name}/task")), 1)
            except OSError:
                pass
    return count



WORKER_BOOT = ("import sys, runpy; del sys.path[0]; "
               "runpy.run_module('rlm_kernel.executors.worker', run_name='__main__', "
               "alter_sys=True)")
"""The worker's ``python -c`` program.  Not ``-m``: ``python -m`` looks for the module in
its working folder first, which may be the working folder model code writes, so a
``rlm_kernel/executors/worker.py`` written there would start as the next worker; here the
working folder leaves ``sys.path`` before anything is imported (the worker puts it back
for model code's own imports), and the worker then runs as ``__main__``, as ``-m`` would
run it (:func:`runpy.run_module`)."""


def channel_problem(exc: BaseException, child: Child) -> str:
    """What went wrong with the channel, in words for the model and the user."""
    if child.killed_for is not None:
        return child.killed_for
    if isinstance(exc, ChannelClosed):
        try:
            child.proc.wait(1.0)
        except subprocess.TimeoutExpired:
            pass
        return exit_reason(child.proc.poll())
    if isinstance(exc, TimeoutError):
        return "did not answer in time (it was killed)"
    return f"sent a message outside the protocol ({exc}) and was killed"


def tmpfs_size(size: int | None, memory_limit: int | None) -> int | None:
    """The size of each private ``tmpfs`` of the sandbox (bytes): ``size``, at most a
    quarter of ``memory_limit`` (four such mounts never hold more than the limit by
    themselves); None: bubblewrap's default (no ``memory_limit`` either)."""
    if not memory_limit:
        return size
    share = max(memory_limit // len(_PRIVATE_MOUNTS), 1 << 20)
    return share if not size else min(size, share)



def cleanup(child: Child | None, cgroups: Cgroups) -> None:
    """Kill a worker and its cgroups (the finalizer of
    :class:`~rlm_kernel.executors.isolated.IsolatedExecutor`)."""
    if child is not None:
        child.kill()
    cgroups.remove()
