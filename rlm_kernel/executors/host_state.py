"""Process state a step of model code may use but not keep.

Model code runs in the host's process, so it can rebind ``builtins.len``, close
``sys.__stdout__``, call the ``exit()`` that closes ``sys.stdin``, ignore
``SIGINT`` or leave a trace function behind.  :func:`step_scope` wraps one step:

* during the step, ``exit``/``quit`` raise ``SystemExit`` without closing
  stdin; ``sys.stdin`` reads as empty (a step never waits for a terminal);
  ``sys.__stdout__``/``sys.__stderr__`` point at the step's own streams, so
  closing or replacing them touches nothing of the host's;
* after the step, builtins, ``sys.std*``/``sys.__std*__``, the trace and
  profile functions and every signal handler are put back as they were, and the
  names of builtins the step changed are reported; threads the step left running
  are muted (:mod:`rlm_kernel.executors.thread_output`);
* after the step, the process settings of :data:`SETTINGS` (recursion limit, switch
  interval, working folder, umask, warning filters, exception hooks ...), the
  attributes of the modules the host's own machinery calls (``threading`` and its
  ``Thread`` class: the time limit's watchdog; ``re``: redaction), the file
  descriptors 1 and 2 and the namespace's ``__builtins__`` entry are put back too,
  and what was changed is reported to the model
  (``Warning: the step changed process settings (...)``);
* where the step runs inside a running :mod:`asyncio` event loop (the Jupyter
  kernel's), a ``loop.stop()`` the step asked for, at once or scheduled, is
  called off, so the loop (and the kernel) keeps running.

A ``KeyboardInterrupt`` the user sends (``SIGINT``: Ctrl-C, the kernel's interrupt)
during the step is noted (:attr:`StepScope.user_interrupt`), so an executor can tell it
from one that model code raises itself, which is a model error.

What is not held in-process: ``os._exit``, ``os.fork``, ``sys.addaudithook`` (cannot be
removed), a signal sent to the process, ``gc.freeze``, and anything rewritten through
``gc``/``ctypes``.
"""

from __future__ import annotations

import asyncio
import atexit
import builtins
import gc
import io
import os
import re
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from types import ModuleType
from typing import Any, TextIO

from .thread_output import (
    live_threads,
    quarantine_step_threads,
    release_finished_threads,
    running_threads,
)

__all__ = ["step_scope", "StepScope", "SETTINGS", "exit_hooks_added", "user_interrupts_kept"]

_UNCATCHABLE = {getattr(signal, n) for n in ("SIGKILL", "SIGSTOP") if hasattr(signal, n)}
_SIGNALS = tuple(s for s in sorted(signal.valid_signals()) if s not in _UNCATCHABLE
                 and isinstance(s, signal.Signals))
_FDS = (1, 2)  # the host's stdout and stderr file descriptors


def _umask() -> int:
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # the folder was removed
        return None


def _set_gc(enabled: bool) -> None:
    if enabled:
        gc.enable()
    else:
        gc.disable()


def _set_filters(filters: list[Any]) -> None:
    # typeshed types warnings.filters as a Sequence: it is the module's list, shared with
    # the C accelerator, so it is changed in place; _filters_mutated (private, not in the
    # stubs) is the module's own refresh of its cache.
    warnings.filters[:] = filters  # type: ignore[index]
    warnings._filters_mutated()  # type: ignore[attr-defined]


def _set_cwd(path: str | None) -> None:
    if path is not None:
        os.chdir(path)


SETTINGS: tuple[tuple[str, Callable[[], Any], Callable[[Any], Any]], ...] = (
    ("recursion limit", sys.getrecursionlimit, sys.setrecursionlimit),
    ("switch interval", sys.getswitchinterval, sys.setswitchinterval),
    ("int max str digits", sys.get_int_max_str_digits, sys.set_int_max_str_digits),
    ("working folder", _cwd, _set_cwd),
    ("umask", _umask, os.umask),
    ("garbage collection", gc.isenabled, _set_gc),
    ("warning filters", lambda: list(warnings.filters), _set_filters),
    ("sys.excepthook", lambda: sys.excepthook, lambda v: setattr(sys, "excepthook", v)),
    ("sys.displayhook", lambda: sys.displayhook, lambda v: setattr(sys, "displayhook", v)),
    ("sys.unraisablehook", lambda: sys.unraisablehook,
     lambda v: setattr(sys, "unraisablehook", v)),
)
"""Process-wide settings put back after each step: ``(name told to the model, get,
set)``."""

_MODULES: tuple[ModuleType | type, ...] = (threading, threading.Thread, re)
"""Modules (and a class) whose attributes the host's machinery calls after model code
may have rebound them: their rebound or deleted attributes are put back after each
step (``threading.settrace`` and ``threading.excepthook`` included)."""
_STREAMS = ("stdin", "stdout", "stderr", "__stdin__", "__stdout__", "__stderr__")
_MISSING = object()
_set, _sorted = set, sorted  # for _restore_builtins, whatever the step did to builtins


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
        changed_settings: process settings, module attributes, file descriptors the
            step changed (restored since), as told to the model.
        left_threads: threads the step started that still run (their output is
            dropped from now on: :mod:`rlm_kernel.executors.thread_output`).
        user_interrupt: a ``SIGINT`` arrived during the step (the user's interrupt).
        recursion_limit: the recursion limit when the step started (frames).
    """

    def __init__(self) -> None:
        self.changed_builtins: list[str] = []
        self.changed_settings: list[str] = []
        self.left_threads = 0
        self.user_interrupt = False
        self.recursion_limit = sys.getrecursionlimit()

    @contextmanager
    def host_frames(self) -> Iterator[None]:
        """Around host code that runs inside the step after model code (writing the
        last value's ``repr``, formatting an error's traceback): a recursion limit model
        code lowered (``sys.setrecursionlimit(60)``) is raised back to the step's first
        one for the block and lowered again after it, so the host's own frames (a
        stream's flush timer, the traceback's trimming) never fail on it however deep
        the caller's stack; the step's end puts the limit back for good and tells the
        model (:attr:`changed_settings`)."""
        limit = sys.getrecursionlimit()
        if limit >= self.recursion_limit:
            yield
            return
        sys.setrecursionlimit(self.recursion_limit)
        try:
            yield
        finally:
            sys.setrecursionlimit(limit)

    def notes(self) -> str:
        """Lines for the model about what the step changed and the host undid."""
        text = builtins_note(self.changed_builtins) if self.changed_builtins else ""
        if self.changed_settings:
            text += (f"Warning: the step changed process settings "
                     f"({', '.join(self.changed_settings)}); they were restored.\n")
        if self.left_threads:
            text += (f"Warning: the step left {self.left_threads} thread(s) running; what "
                     "they print from now on is not shown.\n")
        return text


@contextmanager
def step_scope(stdout: TextIO | io.TextIOBase | None = None,
               stderr: TextIO | io.TextIOBase | None = None,
               *, own_exit: bool = True,
               namespace: MutableMapping[str, Any] | None = None) -> Iterator[StepScope]:
    """Run one step with the host's process state protected (see the module docstring).

    Args:
        stdout / stderr: the step's streams; ``sys.__stdout__``/``sys.__stderr__``
            point at them during the step (default: left as they are).
        own_exit: bind ``exit``/``quit`` in builtins to versions that close nothing.
        namespace: the step's globals, whose ``__builtins__`` entry is put back.

    Yields:
        A :class:`StepScope`, filled in when the block ends.
    """
    scope = StepScope()
    release_finished_threads()
    threads_before = live_threads()
    idents_before = running_threads()
    saved_builtins = dict(builtins.__dict__)
    saved_streams = {name: getattr(sys, name, None) for name in _STREAMS}
    saved_trace, saved_profile = sys.gettrace(), sys.getprofile()
    saved_settings = [(name, get(), put) for name, get, put in SETTINGS]
    scope.recursion_limit = saved_settings[0][1]
    saved_modules = [(m, dict(vars(m))) for m in _MODULES]
    saved_fds = _save_fds()
    saved_loop = _loop_state()
    exit_hooks = atexit._ncallbacks()
    saved_ns_builtins = namespace.get("__builtins__", _MISSING) if namespace is not None \
        else _MISSING
    main = threading.current_thread() is threading.main_thread()
    saved_signals = {s: signal.getsignal(s) for s in _SIGNALS} if main else {}
    if main:
        _note_interrupts(scope, saved_signals.get(signal.SIGINT))
    if own_exit:
        for name in ("exit", "quit"):
            setattr(builtins, name, _Exit(name))
    sys.stdin = io.StringIO()
    for name, stream in (("__stdout__", stdout), ("__stderr__", stderr)):
        if stream is not None:
            setattr(sys, name, stream)
    try:
        yield scope
    finally:
        # builtins first: the restoring code below uses them (len, sorted ...)
        scope.changed_builtins = _restore_builtins(saved_builtins, ignore=("exit", "quit"))
        lowered = sys.getrecursionlimit() < saved_settings[0][1]
        if lowered:  # before any deeper call
            sys.setrecursionlimit(saved_settings[0][1])
        changed = ["recursion limit"] if lowered else []
        changed += _restore_settings(saved_settings)
        changed += _restore_modules(saved_modules)
        changed += _restore_fds(saved_fds)
        changed += _restore_loop(saved_loop)
        _exit_hooks[0] += max(0, atexit._ncallbacks() - exit_hooks)
        if namespace is not None and saved_ns_builtins is not _MISSING and \
                namespace.get("__builtins__", _MISSING) is not saved_ns_builtins:
            namespace["__builtins__"] = saved_ns_builtins
            changed.append("the namespace's __builtins__")
        scope.changed_settings = changed
        for name, value in saved_streams.items():
            setattr(sys, name, value)
        if sys.gettrace() is not saved_trace:
            sys.settrace(saved_trace)
        if sys.getprofile() is not saved_profile:
            sys.setprofile(saved_profile)
        for sig, handler in saved_signals.items():
            if handler is not None and signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)
        scope.left_threads = quarantine_step_threads(threads_before, idents_before)


def _note_interrupts(scope: StepScope, handler: Any) -> None:
    """During the step, ``SIGINT`` marks ``scope.user_interrupt`` and then does what
    ``handler`` (the host's) does; the handler is put back with the others."""
    def on_sigint(signum: int, frame: Any) -> None:
        scope.user_interrupt = True
        if callable(handler):
            handler(signum, frame)
        elif handler != signal.SIG_IGN:
            raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGINT, on_sigint)
    except (ValueError, OSError):  # not the main thread of the main interpreter
        pass


@contextmanager
def user_interrupts_kept() -> Iterator[None]:
    """Around host code that runs model code's methods (a value's ``__str__``,
    ``__len__`` ...) under ``except BaseException``: a ``SIGINT`` the user sends during
    the block is raised again as ``KeyboardInterrupt`` when it ends, whatever the block
    caught, so a guarded rendering cannot swallow the user's interrupt.  A
    ``KeyboardInterrupt`` that model code raises itself is not re-raised.

    Outside the main thread, or when the ``SIGINT`` handler was not set from Python
    (it could not be put back), the block runs as it is.

    Raises:
        KeyboardInterrupt: the user interrupted during the block.
    """
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous is None:
        yield
        return
    noted = StepScope()
    _note_interrupts(noted, previous)
    try:
        yield
    finally:
        try:
            signal.signal(signal.SIGINT, previous)
        except (ValueError, OSError):
            pass
    if noted.user_interrupt:
        raise KeyboardInterrupt


_exit_hooks = [0]  # atexit hooks registered during steps, in this process


def exit_hooks_added() -> int:
    """How many ``atexit`` hooks were registered during steps in this process (by model
    code, or by a module it imported first).  They cannot be told apart from the host's
    or removed one by one; a process that is the host's own (``rlm run``) ends with
    ``os._exit`` when there are any, so they neither print into its output nor hold
    its exit."""
    return _exit_hooks[0]


def _stop_handles(loop: asyncio.AbstractEventLoop) -> set[asyncio.Handle]:
    """The callbacks queued on ``loop`` (ready or timed) that would stop it."""
    queued = [*getattr(loop, "_ready", ()), *getattr(loop, "_scheduled", ())]
    return {h for h in queued if getattr(h, "_callback", None) == loop.stop}


def _loop_state() -> tuple[asyncio.AbstractEventLoop, bool, set[asyncio.Handle]] | None:
    """The running event loop of this thread, whether it was asked to stop, and the
    stop callbacks queued on it (``None`` when no loop runs here)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return loop, bool(getattr(loop, "_stopping", False)), _stop_handles(loop)


def _restore_loop(saved: tuple[asyncio.AbstractEventLoop, bool, set[asyncio.Handle]] | None
                  ) -> list[str]:
    """Call off a stop of the running event loop that the step asked for (the
    ``_stopping`` flag ``BaseEventLoop.stop`` sets, read by ``run_forever``, and
    ``loop.stop`` callbacks it queued); return ``["the asyncio event loop's stop"]``
    when there was one."""
    if saved is None:
        return []
    loop, stopping, handles = saved
    called_off = False
    if not stopping and getattr(loop, "_stopping", False):
        loop._stopping = False  # type: ignore[attr-defined]
        called_off = True
    for handle in _stop_handles(loop) - handles:
        handle.cancel()
        called_off = True
    return ["the asyncio event loop's stop"] if called_off else []


def _restore_settings(saved: list[tuple[str, Any, Callable[[Any], Any]]]) -> list[str]:
    """Put each of :data:`SETTINGS` back; return the names of those that differed."""
    changed = []
    for name, before, put in saved:
        get = next(g for n, g, _ in SETTINGS if n == name)
        try:
            if get() != before:
                put(before)
                changed.append(name)
        except Exception:  # noqa: BLE001 - one setting that cannot be read or put back
            changed.append(f"{name} (not restored)")
    return changed


def _restore_modules(saved: list[tuple[Any, dict[str, Any]]]) -> list[str]:
    """Put back the attributes of :data:`_MODULES` that the step rebound or deleted
    (and, on the class, added); return their dotted names."""
    changed = []
    for owner, before in saved:
        now = dict(vars(owner))
        prefix = getattr(owner, "__module__", "") + "." if isinstance(owner, type) else ""
        names = set(before) | (set(now) if isinstance(owner, type) else set())
        for name in sorted(names):
            old, new = before.get(name, _MISSING), now.get(name, _MISSING)
            if old is new:
                continue
            if old is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, old)
            changed.append(f"{prefix}{owner.__name__}.{name}")
    return changed


def _save_fds() -> dict[int, int]:
    """Duplicates of the host's stdout and stderr file descriptors (those open)."""
    saved = {}
    for fd in _FDS:
        try:
            saved[fd] = os.dup(fd)
        except OSError:
            pass
    return saved


def _restore_fds(saved: dict[int, int]) -> list[str]:
    """Point file descriptors 1 and 2 back at what they were (the step closed or
    redirected them); close the duplicates; return what was put back."""
    changed = []
    for fd, copy in saved.items():
        try:
            before = os.fstat(copy)
            try:
                now = os.fstat(fd)
                same = (now.st_dev, now.st_ino) == (before.st_dev, before.st_ino)
            except OSError:
                same = False
            if not same:
                os.dup2(copy, fd)
                changed.append(f"file descriptor {fd}")
        finally:
            os.close(copy)
    return changed


def _restore_builtins(saved: dict[str, Any], ignore: tuple[str, ...]) -> list[str]:
    """Put ``builtins`` back to ``saved``; return the names that differed (except
    ``ignore``, which the scope itself set).  Uses no builtin by name: the step may
    have deleted any of them."""
    now = builtins.__dict__
    changed = []
    for name in _set(now) | _set(saved):
        before, after = saved.get(name, _MISSING), now.get(name, _MISSING)
        if before is after:
            continue
        if name not in ignore and name != "_":  # ``_`` is the plain displayhook's
            changed.append(name)
        if before is _MISSING:
            del now[name]
        else:
            now[name] = before
    return _sorted(changed)


def builtins_note(names: list[str]) -> str:
    """The line told to the model when a step changed builtins (since restored)."""
    return (f"Warning: the step changed builtins ({', '.join(names)}); they were restored. "
            "Define your own names instead.\n")
