"""A per-step time limit that stops runaway model code.

In the main thread the limit is a ``SIGALRM`` interval timer: its handler raises
:class:`StepTimeout`, which also interrupts blocking calls such as
``time.sleep`` or a socket read.  In any other thread, a watchdog thread
raises the exception asynchronously in the running thread with CPython's
``PyThreadState_SetAsyncExc`` (it takes effect at the next bytecode, so pure C
calls finish first).  Either way the exception is raised again every
``REARM_SECONDS`` until the step ends, so ``except BaseException: pass`` in a
loop cannot swallow it for ever.
"""

from __future__ import annotations

import ctypes
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["StepTimeout", "time_limit", "REARM_SECONDS"]

REARM_SECONDS = 0.5


class StepTimeout(BaseException):
    """Model code ran longer than its step's time limit.

    A ``BaseException`` so that ``except Exception`` in model code does not
    swallow it.
    """


class _State:
    def __init__(self) -> None:
        self.active = True
        self.fired = False


@contextmanager
def time_limit(seconds: float | None) -> Iterator[_State]:
    """Raise :class:`StepTimeout` in this thread if the block outlives ``seconds``.

    Args:
        seconds: limit in seconds; ``None`` or ``<= 0`` means no limit.

    Yields:
        A state object whose ``fired`` attribute tells, after the block, whether
        the limit was hit (even if model code caught the exception).
    """
    state = _State()
    if not seconds or seconds <= 0:
        yield state
        return
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        def handler(signum, frame):  # noqa: ARG001 - signal API
            if state.active:
                state.fired = True
                raise StepTimeout(f"step exceeded its time limit of {seconds:g} s")

        previous = signal.signal(signal.SIGALRM, handler)
        signal.setitimer(signal.ITIMER_REAL, seconds, REARM_SECONDS)
        try:
            yield state
        finally:
            state.active = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        return

    target = threading.get_ident()
    done = threading.Event()

    def watchdog() -> None:
        if done.wait(seconds):
            return
        while not done.is_set():
            state.fired = True
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(target), ctypes.py_object(StepTimeout)
            )
            if done.wait(REARM_SECONDS):
                return

    thread = threading.Thread(target=watchdog, name="rlm-step-timeout", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        done.set()
        state.active = False
        thread.join()
        # Drop an exception the watchdog set but the interpreter has not raised yet.
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), None)
