"""Process state a step of model code may use but not keep.

Model code runs in the host's process, so it can rebind ``builtins.len``, close
``sys.__stdout__``, call the ``exit()`` that closes ``sys.stdin``, ignore
``SIGINT`` or leave a trace function behind.  :func:`step_scope` wraps one step:

* during the step, ``exit``/``quit`` raise ``SystemExit`` without closing
  stdin; ``sys.stdin`` reads as empty (a step never waits for a terminal);
  ``sys.__stdout__``/``sys.__stderr__`` point at the step's own streams, so
  closing or replacing them touches nothing of the host's;
* after the step, builtins, ``sys.std*``/``sys.__std*__``, the trace and
  profile functions and the handlers of ``SIGINT``/``SIGTERM``/``SIGALRM`` are
  put back as they were, and the names of builtins the step changed are reported;
  threads the step left running are muted (:mod:`rlm_kernel.executors.thread_output`).
"""

from __future__ import annotations

import builtins
import io
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from .thread_output import live_threads, quarantine_step_threads, release_finished_threads

__all__ = ["step_scope", "StepScope"]

_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGALRM")
                 if hasattr(signal, n))
_STREAMS = ("stdin", "stdout", "stderr", "__stdin__", "__stdout__", "__stderr__")
_MISSING = object()


class _Exit:
    """``exit``/``quit`` for model code: raise ``SystemExit``, close nothing."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Use {self.name}() to stop; a step of model code cannot stop the REPL"

    def __call__(self, code: Any = None) -> None:
        raise SystemExit(code)


class StepScope:
    """What :func:`step_scope` found after the step.

    Attributes:
        changed_builtins: names of builtins the step rebound, added or deleted
            (restored since).
        left_threads: threads the step started that still run (their output is
            dropped from now on: :mod:`rlm_kernel.executors.thread_output`).
    """

    def __init__(self) -> None:
        self.changed_builtins: list[str] = []
        self.left_threads = 0

    def notes(self) -> str:
        """Lines for the model about what the step changed and the host undid."""
        text = builtins_note(self.changed_builtins) if self.changed_builtins else ""
        if self.left_threads:
            text += (f"Warning: the step left {self.left_threads} thread(s) running; what "
                     "they print from now on is not shown.\n")
        return text


@contextmanager
def step_scope(stdout: TextIO | None = None, stderr: TextIO | None = None,
               *, own_exit: bool = True) -> Iterator[StepScope]:
    """Run one step with the host's process state protected (see the module docstring).

    Args:
        stdout / stderr: the step's streams; ``sys.__stdout__``/``sys.__stderr__``
            point at them during the step (default: left as they are).
        own_exit: bind ``exit``/``quit`` in builtins to versions that close nothing.

    Yields:
        A :class:`StepScope`, filled in when the block ends.
    """
    scope = StepScope()
    release_finished_threads()
    threads_before = live_threads()
    saved_builtins = dict(builtins.__dict__)
    saved_streams = {name: getattr(sys, name, None) for name in _STREAMS}
    saved_trace, saved_profile = sys.gettrace(), sys.getprofile()
    main = threading.current_thread() is threading.main_thread()
    saved_signals = {s: signal.getsignal(s) for s in _SIGNALS} if main else {}
    if own_exit:
        builtins.exit = _Exit("exit")  # type: ignore[attr-defined]
        builtins.quit = _Exit("quit")  # type: ignore[attr-defined]
    sys.stdin = io.StringIO()
    if stdout is not None:
        sys.__stdout__ = stdout  # type: ignore[misc]
    if stderr is not None:
        sys.__stderr__ = stderr  # type: ignore[misc]
    try:
        yield scope
    finally:
        scope.changed_builtins = _restore_builtins(saved_builtins, ignore=("exit", "quit"))
        for name, value in saved_streams.items():
            setattr(sys, name, value)
        if sys.gettrace() is not saved_trace:
            sys.settrace(saved_trace)
        if sys.getprofile() is not saved_profile:
            sys.setprofile(saved_profile)
        for sig, handler in saved_signals.items():
            if handler is not None and signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)
        scope.left_threads = quarantine_step_threads(threads_before)


def _restore_builtins(saved: dict[str, Any], ignore: tuple[str, ...]) -> list[str]:
    """Put ``builtins`` back to ``saved``; return the names that differed (except
    ``ignore``, which the scope itself set)."""
    now = builtins.__dict__
    changed = []
    for name in set(now) | set(saved):
        before, after = saved.get(name, _MISSING), now.get(name, _MISSING)
        if before is after:
            continue
        if name not in ignore and name != "_":  # ``_`` is the plain displayhook's
            changed.append(name)
        if before is _MISSING:
            del now[name]
        else:
            now[name] = before
    return sorted(changed)


def builtins_note(names: list[str]) -> str:
    """The line told to the model when a step changed builtins (since restored)."""
    return (f"Warning: the step changed builtins ({', '.join(names)}); they were restored. "
            "Define your own names instead.\n")
