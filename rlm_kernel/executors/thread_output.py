"""Output of threads that a step started and left running.

During a step, ``sys.stdout``/``sys.stderr`` are the step's own streams, so a
thread the step starts writes into that step.  Once the step is over, a thread
still running would print into the next step, the user's next cell, or the
JSON that ``rlm run --json`` prints.  :func:`quarantine_step_threads` marks
those threads; a thin :class:`ThreadFilter` over ``sys.stdout`` and
``sys.stderr`` then drops what they write (and counts it).  The filter is put
on only while such a thread is alive, and taken off by
:func:`release_finished_threads` once they have all ended.

Only threads made with :mod:`threading` are seen (``threading.enumerate``).
"""

from __future__ import annotations

import sys
import threading
from typing import Any, TextIO

__all__ = ["ThreadFilter", "live_threads", "quarantine_step_threads",
           "release_finished_threads", "quarantined_running", "is_quarantined",
           "filter_streams"]

_blocked: set[int] = set()
_lock = threading.Lock()


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
        if threading.get_ident() in _blocked:
            self.dropped += len(text)
            return len(text)
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def is_quarantined() -> bool:
    """True when the calling thread was left running by an earlier step."""
    return threading.get_ident() in _blocked


def live_threads() -> set[int]:
    """Identifiers of the threads alive now (``threading.enumerate``)."""
    return {t.ident for t in threading.enumerate() if t.ident is not None}


def quarantine_step_threads(before: set[int]) -> int:
    """Mark the threads alive now that were not alive at ``before`` (started by the
    step); their later writes to ``sys.stdout``/``sys.stderr`` are dropped.

    Args:
        before: :func:`live_threads` taken when the step started.

    Returns:
        How many of the step's threads are still running.
    """
    left = {t.ident for t in threading.enumerate()
            if t.ident is not None and t.ident not in before and t.is_alive()
            and not t.name.startswith("rlm-")}
    if not left:
        return 0
    with _lock:
        _blocked.update(left)
    filter_streams()
    return len(left)


def filter_streams() -> None:
    """Put the filter over ``sys.stdout``/``sys.stderr`` (if threads are quarantined
    and it is not there yet): call it after swapping those streams back."""
    with _lock:
        if not _blocked:
            return
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if stream is not None and not isinstance(stream, ThreadFilter):
                setattr(sys, name, ThreadFilter(stream))


def release_finished_threads() -> None:
    """Forget quarantined threads that have ended; take the filters off when none is left."""
    with _lock:
        alive = live_threads()
        _blocked.intersection_update(alive)
        if _blocked:
            return
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if isinstance(stream, ThreadFilter):
                setattr(sys, name, stream._stream)


def quarantined_running() -> int:
    """How many threads left running by steps are still alive."""
    release_finished_threads()
    return len(_blocked)
