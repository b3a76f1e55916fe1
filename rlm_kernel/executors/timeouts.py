"""A per-step time limit that model code can neither switch off nor swallow.

Three layers, each taking over when model code defeats the one before:

1. In the main thread a ``SIGALRM`` interval timer: its handler raises
   :class:`StepTimeout`, which also interrupts blocking calls such as
   ``time.sleep`` or a socket read, and is raised again every
   ``REARM_SECONDS``.
2. A watchdog thread (in every thread, main or not) that raises
   :class:`StepTimeout` asynchronously in the running thread with CPython's
   ``PyThreadState_SetAsyncExc`` (taken at the next bytecode boundary, so pure C
   calls finish first).  It keeps working when model code calls
   ``signal.alarm(0)``, ignores ``SIGALRM`` or installs its own handler.
3. Escalation, ``GRACE_SECONDS`` after the limit: the exception the watchdog
   raises is created in the running thread, and creating it turns on a line
   tracer there that re-raises the timeout before every line of model code (a step's or a cell's own lines).  ``try: ... except BaseException: pass`` in a loop then
   cannot keep going: the handler's own line raises again, and the loop's
   backward jump (outside the ``try``) takes it.  It also re-installs the
   ``SIGALRM`` handler.

What is not covered: a single C call that never returns to Python
(``sum(range(10**13))``) cannot be stopped in-process; the step ends when it
returns.  Bare ``except:`` clauses nested two deep around a loop also hold out:
the tracer's raise in the inner handler switches tracing off (CPython removes a
trace function that raises), and the outer bare handler then swallows it.  Sources: CPython's ``Python/ceval.c`` (async exceptions and the eval
breaker), ``sys.settrace`` semantics (a trace function that raises is removed,
so the tracer schedules the exception instead of raising it).
"""

from __future__ import annotations

import ctypes
import linecache
import math
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = ["StepTimeout", "time_limit", "timeout_message", "REARM_SECONDS", "GRACE_SECONDS"]

REARM_SECONDS = 0.5
"""Seconds between re-raises of the timeout while the step keeps running."""
GRACE_SECONDS = 1.0
"""Seconds after the limit before the line-tracer escalation starts."""
MIN_SECONDS = 0.001
"""The shortest limit armed: a shorter one (``1e-300``) is this long (``setitimer``
would round it to 0, which disarms the timer and leaves its interval behind)."""

def _exceeded(seconds: float | None) -> str:
    """What a :class:`StepTimeout` says: the one wording of a step's time-out."""
    return f"step exceeded its time limit of {seconds or 0:g} s"


def timeout_message(seconds: float | None) -> str:
    """The line a step's output ends with when its time limit stopped it.

    Args:
        seconds: the step's limit in seconds (None or 0 print as ``0``).
    """
    return f"StepTimeout: {_exceeded(seconds)} and was stopped\n"


class StepTimeout(BaseException):
    """Model code ran longer than its step's time limit.

    A ``BaseException`` so that ``except Exception`` in model code does not
    swallow it.
    """


class _State:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.active = True
        self.fired = False
        self.escalated = False
        self.thread = threading.get_ident()
        self.handler: Any = None
        self.outer_timer: tuple[float, float, float] = (0.0, 0.0, 0.0)  # value, interval, when
        self.shadowed: dict[int, tuple[dict[str, Any], Any]] = {}

    def cut_short(self, final_output: Any) -> bool:
        """True when the limit fired and the step did not end the run: a step that
        reached ``FINAL`` before the limit counts as finished (``final_output`` is
        the step's ``FINAL`` record, or None)."""
        return self.fired and final_output is None


_MISSING = object()
_current: dict[int, _State] = {}  # thread ident -> the limit running there


def _raise_in(thread: int, exc: type[BaseException]) -> None:
    """Schedule ``exc`` in ``thread`` (never NULL: see :func:`_drain`)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), ctypes.py_object(exc))


class _Uncatchable(Exception):
    """Bound to the name ``BaseException`` in model code's globals after escalation, so
    ``except BaseException:`` no longer matches a timeout.  Nothing raises it."""


def _tracer(frame: FrameType, event: str, arg: Any) -> Any:
    state = _current.get(threading.get_ident())
    if state is None or not state.active:
        return None
    if event == "line" and _is_cell_code(frame.f_code.co_filename):
        names = frame.f_globals
        if names.get("BaseException") is not _Uncatchable:
            state.shadowed.setdefault(id(names), (names, names.get("BaseException", _MISSING)))
            names["BaseException"] = _Uncatchable
        handling = sys.exc_info()[0]
        if handling is not None and issubclass(handling, StepTimeout):
            # a bare ``except:`` caught the timeout: raise again from its own line
            raise StepTimeout(_exceeded(state.seconds))
    return _tracer


def _is_cell_code(filename: str) -> bool:
    """True for code compiled from a string (a step, an IPython cell): its source is in
    ``linecache`` without a file on disk (mtime None), as IPython and the plain
    executor register it."""
    entry = linecache.cache.get(filename)
    return entry is not None and len(entry) == 4 and entry[1] is None


class _Escalation(StepTimeout):
    """The watchdog's exception after the grace period.  It is instantiated in the
    thread it is raised in, so its constructor can install the line tracer there."""

    def __init__(self, *args: Any) -> None:
        state = _current.get(threading.get_ident())
        if state is not None and state.active:
            super().__init__(_exceeded(state.seconds))
            _install_tracer(state)
        else:
            super().__init__(*args)


def _install_tracer(state: _State) -> None:
    state.escalated = True
    sys.settrace(_tracer)
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        frame.f_trace = _tracer
        frame = frame.f_back
    if state.handler is not None and threading.current_thread() is threading.main_thread():
        try:
            signal.signal(signal.SIGALRM, state.handler)
            signal.setitimer(signal.ITIMER_REAL, REARM_SECONDS, REARM_SECONDS)
        except (ValueError, OSError):
            pass


def _remove_tracer() -> None:
    sys.settrace(None)
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_trace is _tracer:
            frame.f_trace = None
        frame = frame.f_back


def _start_signal_timer(state: _State) -> tuple[bool, Any]:
    """In the main thread (where ``setitimer`` exists), arm ``SIGALRM`` to raise
    :class:`StepTimeout` after ``state.seconds`` and every ``REARM_SECONDS`` after.

    Returns:
        (whether the signal timer is in use, the ``SIGALRM`` handler it replaced).
    """
    if threading.current_thread() is not threading.main_thread() or \
            not hasattr(signal, "setitimer"):
        return False, None

    def handler(signum, frame):  # noqa: ARG001 - signal API
        if state.active:
            state.fired = True
            raise StepTimeout(_exceeded(state.seconds))

    state.handler = handler
    previous = signal.signal(signal.SIGALRM, handler)
    value, interval = signal.setitimer(signal.ITIMER_REAL, state.seconds, REARM_SECONDS)
    state.outer_timer = (value, interval, time.monotonic())  # an enclosing limit's timer
    return True, previous


def _watchdog(state: _State, done: threading.Event, use_signal: bool) -> None:
    """The watchdog thread: after the limit, raise :class:`StepTimeout` in the step's
    thread until ``done`` is set; ``GRACE_SECONDS`` on, raise the escalating kind.
    With the signal timer, give it the first word: the watchdog steps in when model
    code has switched the signal off."""
    if done.wait(state.seconds + (REARM_SECONDS if use_signal else 0)):
        return
    waited = 0.0
    while not done.is_set():
        state.fired = True
        escalate = waited >= GRACE_SECONDS
        _raise_in(state.thread, _Escalation if escalate else StepTimeout)
        step = 0.1 if escalate else REARM_SECONDS
        if done.wait(step):
            return
        waited += step


@contextmanager
def time_limit(seconds: float | None) -> Iterator[_State]:
    """Raise :class:`StepTimeout` in this thread if the block outlives ``seconds``.

    Args:
        seconds: limit in seconds; ``None``, ``<= 0``, not finite or longer than
            ``threading.TIMEOUT_MAX`` means no limit; under :data:`MIN_SECONDS` it is
            :data:`MIN_SECONDS`.

    Yields:
        A state object whose ``fired`` attribute tells, after the block, whether
        the limit was hit (even if model code caught the exception).
    """
    state = _State(seconds or 0)
    if not seconds or seconds <= 0 or not math.isfinite(seconds) or \
            seconds > threading.TIMEOUT_MAX:
        yield state
        return
    state.seconds = seconds = max(seconds, MIN_SECONDS)
    state.active = False  # quiet until the block runs: a raise mid-setup skips the cleanup
    outer = _current.get(state.thread)
    _current[state.thread] = state
    use_signal, previous = _start_signal_timer(state)
    done = threading.Event()
    thread = threading.Thread(target=_watchdog, args=(state, done, use_signal),
                              name="rlm-step-timeout", daemon=True)
    try:
        thread.start()
        state.active = True
        yield state
    finally:
        state.active = False  # from here on, handler and tracer stay quiet
        while True:  # a timeout already scheduled may land inside the cleanup: redo it
            try:
                _cleanup(state, done, thread, use_signal, previous, outer)
                break
            except StepTimeout:
                continue
        try:  # let a timeout scheduled but not yet raised land here, harmlessly
            _drain()
        except StepTimeout:
            pass


def _drain() -> None:
    """An empty Python call: entering it checks CPython's eval breaker, which raises
    a pending asynchronous exception.  (Clearing one with
    ``PyThreadState_SetAsyncExc(id, NULL)`` would leave the breaker flag set for
    good, and with a trace or profile function active the interpreter then spins.)"""


def _cleanup(state: _State, done: threading.Event, thread: threading.Thread,
             use_signal: bool, previous: Any, outer: _State | None) -> None:
    """Stop the watchdog, the timer and the tracer; idempotent."""
    done.set()
    if thread.ident is not None:  # started
        thread.join()
    if use_signal:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        value, interval, when = state.outer_timer
        if value > 0:  # an enclosing limit (a step around an rlm_query child) goes on
            left = value - (time.monotonic() - when)
            signal.setitimer(signal.ITIMER_REAL, max(left, 0.001), interval)
    if state.escalated:
        _remove_tracer()
    for names, value in state.shadowed.values():
        if value is _MISSING:
            names.pop("BaseException", None)
        else:
            names["BaseException"] = value
    state.shadowed.clear()
    if outer is not None:
        _current[state.thread] = outer
    else:
        _current.pop(state.thread, None)
