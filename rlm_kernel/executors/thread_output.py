"""Output of threads that a step started and left running.

During a step, ``sys.stdout``/``sys.stderr`` are the step's own streams, so a
thread the step starts writes into that step.  Once the step is over, a thread
still running would print into the next step, the user's next cell, or the
JSON that ``rlm run --json`` prints.  :func:`quarantine_step_threads` marks
those threads; a thin :class:`ThreadFilter` over ``sys.stdout`` and
``sys.stderr`` then drops what they write (and counts it).  The filter is put
on only while such a thread is alive, and taken off by
:func:`release_finished_threads` once they have all ended.

Threads made with :mod:`threading` are told apart by their ``Thread`` object, not by
their identifier (the system reuses an ended thread's identifier for the next one) nor
by their name (model code can name a thread ``rlm-...``): the host's own threads are
registered with :func:`host_thread`.  Threads started below :mod:`threading`
(``_thread.start_new_thread``, a C extension) have no ``Thread`` object; they are seen
in ``sys._current_frames()`` (:func:`running_threads`) and quarantined as *foreign*
threads by identifier.  Python reuses an ended thread's identifier (its address) for the
next thread at once, so a thread running at the step's start is told from a new one with
its identifier by its bottom frame (the first frame it ran, which lives as long as the
thread and is held here while the step runs).  An identifier counts as foreign only
while no real ``threading.Thread`` owns it, so a later thread that reuses it is not
silenced.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Mapping
from types import FrameType
from typing import Any, TextIO

__all__ = ["ThreadFilter", "live_threads", "running_idents", "running_threads",
           "quarantine_step_threads",
           "release_finished_threads", "quarantined_running", "is_quarantined",
           "filter_streams", "host_thread", "host_thread_type"]

_blocked: set[threading.Thread] = set()
_foreign: set[int] = set()  # identifiers of threads started below `threading`
_host: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
_host_types: set[type] = set()  # exact classes of threads only the host makes
_lock = threading.Lock()


def host_thread(thread: threading.Thread | None = None) -> None:
    """Register ``thread`` (default: the calling one) as the host's own: it is never
    quarantined, whatever step it was started in, and one quarantined already is let go
    (a thread of the user's pool that started while another thread's run was in a step,
    and now starts a run of its own: ``RLM.run`` registers its caller).  Usable as a
    ``ThreadPoolExecutor`` initializer."""
    thread = thread if thread is not None else threading.current_thread()
    _host.add(thread)
    with _lock:
        _blocked.discard(thread)
        if thread.ident is not None:
            _foreign.discard(thread.ident)


def host_thread_type(cls: type) -> None:
    """Register a thread class whose instances only the host makes (ipykernel's
    ``SubshellThread``: JupyterLab asks for a subshell while a run's widgets appear,
    so one starts in the middle of a step).  Matched by exact type, not ``isinstance``:
    a subclass model code writes is still the step's thread."""
    _host_types.add(cls)


class ThreadFilter:
    """A stand-in for a text stream that drops writes from quarantined threads.

    Args:
        stream: the stream to pass every other write to; all other attributes
            are the stream's own.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.dropped = 0  # characters written by quarantined threads

    def write(self, text: str) -> int:
        if is_quarantined():
            self.dropped += len(text)
            return len(text)
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _owned_by_threading(ident: int) -> bool:
    """True when a real (not a stand-in ``_DummyThread``) ``threading.Thread`` that is
    alive has identifier ``ident``."""
    return any(t.ident == ident and not isinstance(t, threading._DummyThread)
               and t.is_alive() for t in threading.enumerate())


def is_quarantined() -> bool:
    """True when the calling thread was left running by an earlier step."""
    if not (_blocked or _foreign):
        return False
    if threading.current_thread() in _blocked:
        return True
    return threading.get_ident() in _foreign and not _owned_by_threading(threading.get_ident())


def live_threads() -> set[threading.Thread]:
    """The threads alive now (``threading.enumerate``)."""
    return set(threading.enumerate())


def running_idents() -> frozenset[int]:
    """Identifiers of every thread of the process running Python code now, those
    started below :mod:`threading` included (``sys._current_frames``)."""
    return frozenset(sys._current_frames())


def running_threads() -> dict[int, FrameType]:
    """``{identifier: bottom frame}`` of every thread of the process running Python code
    now (``sys._current_frames``): the bottom frame tells a thread from a later one that
    reuses its identifier."""
    found: dict[int, FrameType] = {}
    for ident, frame in sys._current_frames().items():
        while frame.f_back is not None:
            frame = frame.f_back
        found[ident] = frame
    return found


def quarantine_step_threads(before: set[threading.Thread],
                            idents_before: Mapping[int, FrameType] | None = None) -> int:
    """Mark the threads alive now that were not alive at the step's start (started by
    the step); their later writes to ``sys.stdout``/``sys.stderr`` are dropped.

    Args:
        before: :func:`live_threads` taken when the step started.
        idents_before: :func:`running_threads` taken when the step started; threads
            running now that were not running then (an identifier not in it, or one
            whose bottom frame differs) and that no ``threading.Thread`` owns are
            quarantined by identifier (None or empty: none are).

    Returns:
        How many of the step's threads are still running (the host's own, see
        :func:`host_thread`, are not counted).
    """
    left = {t for t in threading.enumerate()
            if t not in before and t.is_alive() and t not in _host
            and type(t) not in _host_types and not isinstance(t, threading._DummyThread)}
    foreign: set[int] = set()
    if idents_before:
        foreign = {i for i, bottom in running_threads().items()
                   if idents_before.get(i) is not bottom and not _owned_by_threading(i)}
    if not left and not foreign:
        return 0
    with _lock:
        _blocked.update(left)
        _foreign.update(foreign)
    filter_streams()
    return len(left) + len(foreign)


def filter_streams() -> None:
    """Put the filter over ``sys.stdout``/``sys.stderr`` (if threads are quarantined
    and it is not there yet): call it after swapping those streams back."""
    with _lock:
        if not (_blocked or _foreign):
            return
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if stream is not None and not isinstance(stream, ThreadFilter):
                setattr(sys, name, ThreadFilter(stream))


def release_finished_threads() -> None:
    """Forget quarantined threads that have ended; take the filters off when none is left."""
    with _lock:
        _blocked.difference_update([t for t in _blocked if not t.is_alive()])
        _foreign.intersection_update(running_idents())
        _foreign.difference_update([i for i in _foreign if _owned_by_threading(i)])
        if _blocked or _foreign:
            return
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if isinstance(stream, ThreadFilter):
                setattr(sys, name, stream._stream)


def quarantined_running() -> int:
    """How many threads left running by steps are still alive."""
    release_finished_threads()
    return len(_blocked) + len(_foreign)
