"""The isolated sandbox's memory as the host counts it, and the watch that holds it to a limit.

Where the host may make a ``memory`` cgroup (root with a writable cgroup file system), the
kernel holds the sandbox to its limit: every page its processes use, the files of its
private ``tmpfs`` mounts, shared memory and kernel memory are charged to the cgroup.
Everywhere else (an ordinary user, a read-only cgroup file system), :class:`MemoryWatch`
holds it: a thread of the host's, one per executor, that looks at the sandbox on its own
clock (during a step and between steps, whatever passes on the channel) and kills the
sandbox when what it counts (:class:`SandboxMeter`) passes the limit.  It counts:

* the resident memory of every process of the sandbox that is its own: anonymous pages
  and shared memory pages (``RssAnon`` + ``RssShmem`` of ``/proc/PID/status``; not the
  pages of files the processes map, which are the host's page cache).  Pages a fork
  shares count once per process there, so the count is never below what the sandbox
  uses; before it kills, the watch counts again with each shared page split between
  the processes that share it (``Pss_Anon`` + ``Pss_Shmem`` of
  ``/proc/PID/smaps_rollup``, which costs about 10 ms a GB), so that a worker that
  forks (``multiprocessing``) is not killed for pages it only shares;
* the bytes held by the sandbox's own ``tmpfs`` mounts (``/tmp``, ``/var/tmp``,
  ``/dev/shm``, ``/run``, the ``/dev`` bubblewrap makes ...): each mount of the
  sandbox's mount namespace whose file system is a ``tmpfs`` the host does not have,
  measured with ``statvfs`` through ``/proc/PID/root`` (files deleted but held open
  included);
* the ``memfd`` files its processes hold open (their allocated blocks), the first
  :data:`MAX_DESCRIPTORS` descriptors of each look.

Not counted (a memory cgroup counts them; the seccomp filter is the place to deny them):
System V shared memory segments no process maps, files in flight in a UNIX socket's
queue, kernel memory (socket and pipe buffers, page tables).

The watch looks again before the rest of the limit could be filled at
:data:`FILL_BYTES_PER_SECOND` (within :data:`MIN_INTERVAL` and :data:`MAX_INTERVAL`
seconds): a sandbox far below its limit is looked at four times a second, one close to
it every few milliseconds.  What a look costs is in :attr:`MemoryWatch.cpu_seconds`
(``bench/bench_executors.py`` prints it).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .sandbox import process_tree

__all__ = ["MemoryUsage", "SandboxMeter", "MemoryWatch", "FILL_BYTES_PER_SECOND",
           "MIN_INTERVAL", "MAX_INTERVAL", "MAX_DESCRIPTORS", "PROCESS_INTERVAL"]

log = logging.getLogger(__name__)

FILL_BYTES_PER_SECOND = 8 << 30
"""How fast the watch assumes model code can fill memory (bytes a second; one core
writes pages at a few GB/s): it looks again before the memory left under the limit could
be filled at this rate."""
MIN_INTERVAL = 0.005
"""Fewest seconds between two looks (a sandbox at its limit)."""
MAX_INTERVAL = 0.25
"""Most seconds between two looks (a sandbox far below its limit)."""
PROCESS_INTERVAL = 0.02
"""Most seconds between two counts of the sandbox's processes where the watch holds
their number (a count costs about 0.06 ms: 0.3 % of a core)."""
MAX_DESCRIPTORS = 16384
"""Open file descriptors of the sandbox's processes looked at in one look (for memfds)."""
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class MemoryUsage:
    """What the host counts of one sandbox's memory at one moment (bytes)."""

    processes: int
    """Anonymous and shared memory resident in its processes."""
    files: int
    """Bytes its own ``tmpfs`` mounts hold."""
    memfd: int
    """Bytes of the ``memfd`` files its processes hold open."""

    @property
    def total(self) -> int:
        return self.processes + self.files + self.memfd

    def describe(self) -> str:
        """``"1,234 bytes (1,000 in its processes, 234 in its tmpfs files)"``."""
        parts = [f"{self.processes:,} in its processes", f"{self.files:,} in its files "
                 "in /tmp, /dev/shm and its other memory file systems"]
        if self.memfd:
            parts.append(f"{self.memfd:,} in memfd files")
        return f"{self.total:,} bytes ({', '.join(parts)})"


def _proportional_bytes(pid: int) -> int:
    """``Pss_Anon`` + ``Pss_Shmem`` of a process (bytes; its ``RssAnon`` + ``RssShmem``
    where the kernel has no ``smaps_rollup``; 0 when it is gone)."""
    total, found = 0, False
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith((b"Pss_Anon:", b"Pss_Shmem:")):
                    total += int(line.split()[1]) * 1024
                    found = True
    except (OSError, ValueError, IndexError):
        pass
    return total if found else _status_bytes(pid)


def _status_bytes(pid: int) -> int:
    """``RssAnon`` + ``RssShmem`` of a process (bytes; 0 when it is gone or a zombie)."""
    total = 0
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith((b"RssAnon:", b"RssShmem:")):
                    total += int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return total


def _unescape(path: str) -> str:
    """A mountinfo path with its octal escapes (``\\040`` ...) decoded."""
    if "\\" not in path:
        return path
    return path.encode().decode("unicode_escape").encode("latin-1").decode(
        "utf-8", "surrogateescape")


def _tmpfs_mounts(mountinfo: str) -> dict[str, str]:
    """``{device: mount point}`` of the ``tmpfs`` mounts in a mountinfo text (the first
    mount point of each file system)."""
    found: dict[str, str] = {}
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and tail and tail[0] == "tmpfs":
            found.setdefault(fields[2], _unescape(fields[4]))
    return found


class SandboxMeter:
    """Counts one sandbox's memory (see the module docstring).

    Args:
        root: the host pid of the sandbox's outermost process (its processes are it
            and every process below it).
        worker: the host pid of a process inside the sandbox's namespaces (the
            worker): its mount namespace is the sandbox's.
    """

    def __init__(self, root: int, worker: int) -> None:
        self.root, self.worker = root, worker
        self.namespace: str | None = None  # the sandbox's mount namespace ("mnt:[N]")
        self.mounts: list[str] = []  # its own tmpfs mount points
        try:
            self.namespace = os.readlink(f"/proc/{worker}/ns/mnt")
            with open(f"/proc/{worker}/mountinfo") as f:
                inside = _tmpfs_mounts(f.read())
            with open("/proc/self/mountinfo") as f:
                host = {line.split()[2] for line in f if len(line.split()) > 2}
        except OSError as exc:
            log.warning("the sandbox's mounts cannot be read (%s): its tmpfs files are "
                        "not counted", exc)
            return
        self.mounts = sorted({p for dev, p in inside.items() if dev not in host})
        self._memfd_device = _memfd_device()

    def count(self) -> int:
        """How many processes the sandbox has now (its outermost process included)."""
        return len(process_tree(self.root))

    def measure(self, proportional: bool = False) -> MemoryUsage:
        """What the sandbox holds now (:class:`MemoryUsage`); 0s once it is gone.

        Args:
            proportional: split each page its processes share between them (slower:
                see the module docstring), rather than count it once per process.
        """
        pids = process_tree(self.root)
        count = _proportional_bytes if proportional else _status_bytes
        processes = sum(count(pid) for pid in pids)
        return MemoryUsage(processes, self._files(pids), self._memfds(pids))

    def _files(self, pids: list[int]) -> int:
        inside = self._inside(pids)
        if inside is None:
            return 0
        total = 0
        for mount in self.mounts:
            try:
                st = os.statvfs(f"/proc/{inside}/root{mount}")
            except OSError:
                continue
            total += (st.f_blocks - st.f_bfree) * st.f_frsize
        return total

    def _inside(self, pids: list[int]) -> int | None:
        """A live process of the sandbox's mount namespace (the worker when it lives)."""
        if self.namespace is None:
            return None
        for pid in [self.worker, *reversed(pids)]:
            try:
                if os.readlink(f"/proc/{pid}/ns/mnt") == self.namespace:
                    return pid
            except OSError:
                continue
        return None

    def _memfds(self, pids: list[int]) -> int:
        if self._memfd_device is None:
            return 0
        seen: dict[int, int] = {}
        budget = MAX_DESCRIPTORS
        for pid in pids:
            try:
                entries = os.scandir(f"/proc/{pid}/fd")
            except OSError:
                continue
            with entries:
                for entry in entries:
                    budget -= 1
                    if budget < 0:
                        break
                    try:
                        st = os.stat(entry.path)
                    except OSError:
                        continue
                    if st.st_dev == self._memfd_device:
                        seen[st.st_ino] = st.st_blocks * 512
            if budget < 0:
                break
        return sum(seen.values())


def _memfd_device() -> int | None:
    """The device of the kernel's internal ``tmpfs`` that holds every memfd."""
    try:
        fd = os.memfd_create("rlm-memory-watch", os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        return None
    try:
        return os.fstat(fd).st_dev
    finally:
        os.close(fd)


class MemoryWatch:
    """A thread that holds a sandbox to ``limit`` bytes (see the module docstring).

    Args:
        limit: bytes; None: memory is held elsewhere (a cgroup), only processes are
            counted.
        current: ``callable() -> SandboxMeter | None``: the sandbox to look at now
            (None: none running).
        over: ``callable(meter, usage)``, called in the watch's thread when ``usage``
            of ``meter``'s sandbox passed the limit: it kills the sandbox.
        name: the thread's name.
        max_processes: the most processes the sandbox may have at once (its own
            included), where no ``pids`` cgroup holds them: ``RLIMIT_NPROC``, the
            operating system's limit then, counts every process of the uid, so model
            code gets the room of any other process of that uid that ends while it runs;
            the watch counts the sandbox's own.  None: not counted.
        too_many: ``callable(meter, count)``, called in the watch's thread when the
            sandbox has more than ``max_processes``: it kills the sandbox.
    """

    def __init__(self, limit: int | None, current: Callable[[], SandboxMeter | None],
                 over: Callable[[SandboxMeter, MemoryUsage], None],
                 name: str = "rlm-memory-watch", *, max_processes: int | None = None,
                 too_many: Callable[[SandboxMeter, int], None] | None = None) -> None:
        self.limit, self.current, self.over = limit, current, over
        self.max_processes, self.too_many = max_processes, too_many
        self.looks = 0
        self.cpu_seconds = 0.0  # thread CPU time of every look so far
        # the last proportional measure: (meter, when, the quick usage then, it)
        self._split: tuple[SandboxMeter, float, MemoryUsage, MemoryUsage] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """End the thread (it ends at its next wake-up; no wait here)."""
        self._stop.set()

    def look(self) -> float:
        """Measure the current sandbox once, kill it when over; the seconds until the
        next look."""
        started = time.thread_time()
        try:
            meter = self.current()
            if meter is None:
                return MAX_INTERVAL
            max_processes, too_many, limit = self.max_processes, self.too_many, self.limit
            counted = False
            if max_processes is not None and too_many is not None:
                counted = True
                count = meter.count()
                if count > max_processes:
                    too_many(meter, count)
                    return MIN_INTERVAL
            if limit is None:
                return PROCESS_INTERVAL
            usage = meter.measure()
            if usage.total > limit:  # pages forks share: split between them
                usage = self._proportional(meter, usage, limit)
            else:
                self._split = None
            if usage.total > limit:
                self.over(meter, usage)
                return MIN_INTERVAL
            left = (limit - usage.total) / FILL_BYTES_PER_SECOND
            wait = min(MAX_INTERVAL, max(MIN_INTERVAL, left))
            return min(wait, PROCESS_INTERVAL) if counted else wait
        finally:
            self.looks += 1
            self.cpu_seconds += time.thread_time() - started

    def _proportional(self, meter: SandboxMeter, usage: MemoryUsage, limit: int) -> MemoryUsage:
        """The sandbox's usage with shared pages split between their processes, for a
        sandbox whose quick count is over the limit: measured again at most every
        :data:`MAX_INTERVAL` seconds (it costs ~10 ms a GB), and in between estimated
        as that measure plus what the quick count grew since (copy-on-write copies a
        fork makes are seen at the next measure)."""
        now = time.monotonic()
        held = self._split
        if held is not None and held[0] is meter and now - held[1] < MAX_INTERVAL:
            _, _, quick, split = held
            grown = max(usage.processes - quick.processes, 0)
            guess = MemoryUsage(split.processes + grown, usage.files, usage.memfd)
            if guess.total <= limit:
                return guess
        split = meter.measure(proportional=True)
        self._split = (meter, now, usage, split)
        return split

    def _loop(self) -> None:
        wait = MIN_INTERVAL
        while not self._stop.wait(wait):
            try:
                wait = self.look()
            except Exception:  # noqa: BLE001 - the watch must outlive a bad look
                log.exception("the memory watch failed to look at the sandbox")
                wait = MAX_INTERVAL
