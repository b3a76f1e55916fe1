"""Where model code runs: the :class:`Executor` protocol the engine calls, the plain
``exec`` executor, the one choice of a run's executor (:func:`executor_for`), and what
every step needs whatever runs it: the time limit
(``timeouts``), the process state a step may not keep (``host_state``), capped and
coalesced streams (``streams``), secret redaction (``redaction``), the environment of
model code's processes (``environment``: an allow-list) and the muting of
threads a step leaves running (``thread_output``), and the guarded rendering of model
code's values (``guarded``: the one guarded ``repr``; the cut of long text is
:mod:`rlm_kernel.text`'s), and the record of which inputs a step's code read while it
ran (``reads``).  The IPython executor that runs
steps through a kernel's shell is Jupyter's (``rlm_kernel.jupyter.shell_executor``).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..repl_types import REPLVariable
from .environment import PASS_ENV_VARIABLE, passed_names
from .guarded import REPR_SECONDS, guarded_render, guarded_repr, type_name
from .host_state import exit_hooks_added, step_scope, user_interrupts_kept
from .plain import (
    Executor,
    OutputCallback,
    PlainExecutor,
    ReadWatch,
    StreamTee,
    combined_output,
)
from .reads import DATA_HELPERS, ReadInstrumenter, reads_main_variable, recording
from .streams import MAX_KEPT_CHARS
from .thread_output import (
    filter_streams,
    host_thread,
    host_thread_type,
    is_quarantined,
    quarantined_running,
)
from .timeouts import MIN_SECONDS, StepTimeout, time_limit, timeout_message
from .tracebacks import trim_exception, trim_traceback

if TYPE_CHECKING:  # pragma: no cover
    from .folder_diff import FolderBaseline, FolderDiffError
    from .isolated import DEFAULT_MEMORY, IsolatedExecutor, RemoteValue, WorkerError
    from .redaction import Redactor, redact_messages, redact_output
    from .test_runs import TestRun, run_tests
    from .walled import SandboxUnavailable, walled_command
    from .workfolder import WorkFolder, sub_agent_refusal

__all__ = ["Executor", "PlainExecutor", "OutputCallback", "StreamTee", "combined_output",
           "new_executor", "executor_for", "close_executor", "EXECUTOR_KINDS",
           "IsolatedExecutor", "WorkerError", "WorkFolder", "MIN_SECONDS", "StepTimeout",
           "time_limit", "timeout_message", "Redactor", "redact_messages", "redact_output",
           "guarded_render", "guarded_repr", "type_name", "REPR_SECONDS", "exit_hooks_added", "step_scope", "filter_streams", "host_thread",
           "host_thread_type", "is_quarantined", "quarantined_running", "trim_exception",
           "trim_traceback", "user_interrupts_kept", "RemoteValue", "MAX_KEPT_CHARS",
           "DEFAULT_MEMORY", "SupportsDeadline", "run_deadline", "PASS_ENV_VARIABLE",
           "passed_names", "SupportsDescribe", "variable_ids", "ReadWatch", "DATA_HELPERS",
           "reads_main_variable", "ReadInstrumenter", "recording", "FolderBaseline",
           "FolderDiffError", "sub_agent_refusal", "TestRun", "run_tests", "walled_command",
           "SandboxUnavailable"]

# Names whose modules load on first use.  The worker process runs as ``python -m
# rlm_kernel.executors.worker`` and imports this package first: it must not import the
# worker module a second time under its own name (``isolated`` imports it), nor pay
# for the host-only modules at every start.
_LAZY = {"DEFAULT_MEMORY": "isolated", "IsolatedExecutor": "isolated",
         "RemoteValue": "isolated", "WorkerError": "isolated", "WorkFolder": "workfolder",
         "sub_agent_refusal": "workfolder", "FolderBaseline": "folder_diff",
         "FolderDiffError": "folder_diff", "Redactor": "redaction", "redact_messages": "redaction", "redact_output": "redaction",
         "TestRun": "test_runs", "run_tests": "test_runs", "walled_command": "walled",
         "SandboxUnavailable": "walled"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


EXECUTOR_KINDS = ("isolated", "in-process")
"""The executors a run can be given by name (``RLMConfig.executor``, ``--executor``)."""


def new_executor(kind: str, **options: Any) -> Executor:
    """A new executor by name: ``"isolated"`` (a worker process behind operating-system
    limits, :class:`~rlm_kernel.executors.isolated.IsolatedExecutor`) or
    ``"in-process"`` (:class:`PlainExecutor`); ``options`` go to its constructor.

    Raises:
        ValueError: an unknown kind.
        WorkerError: the isolated worker did not start (the message says why).
    """
    if kind == "in-process":
        return PlainExecutor(**options)
    if kind == "isolated":
        from .isolated import IsolatedExecutor

        return IsolatedExecutor(**options)
    raise ValueError(f"unknown executor {kind!r}: one of {', '.join(EXECUTOR_KINDS)}")


def executor_for(kind: str | None, *, parent: Executor | None = None,
                 workdir: str | os.PathLike[str] | None = None,
                 isolated_options: Mapping[str, Any] | None = None,
                 isolated: Callable[..., Executor] | None = None,
                 in_process: Callable[..., Executor] | None = None) -> Executor:
    """The executor a run's settings ask for: every run's executor is chosen here (a
    top-level run's, an ``rlm_query`` child's, a notebook task's).

    Which kind: ``kind`` when the settings name one (``RLMConfig.executor``); else the
    kind of ``parent`` (a child run's executor is of its parent's kind, read from
    :attr:`Executor.in_process`); else ``"isolated"``, the default of ``RLM.run`` and
    ``rlm run``.  (The notebook's default, the kernel's live namespace, is the
    notebook's to say: it passes its kind.)

    Args:
        kind: ``"isolated"``, ``"in-process"`` or None (see above).
        parent: the executor of the run that starts this one (a child run's), or None.
        workdir: the folder model code works in (given to the constructor when set):
            the isolated executor's one writable folder, the in-process executor's
            current folder during a step.
        isolated_options: further keywords of the isolated kind only
            (``RLMConfig.isolated_options()``: ``memory_limit`` in bytes, ``pass_env``).
        isolated: the constructor of the isolated kind (default
            :class:`~rlm_kernel.executors.isolated.IsolatedExecutor`; the notebook's is
            its subclass ``IsolatedSteps``).
        in_process: the constructor of the in-process kind (default
            :class:`PlainExecutor`; the notebook's runs steps in its shell).

    Raises:
        ValueError: an unknown kind, or a ``workdir`` the isolated executor refuses.
        WorkerError: the isolated worker did not start (the message says why).
    """
    if kind is None:
        kind = "in-process" if parent is not None and parent.in_process else "isolated"
    options: dict[str, Any] = {"workdir": workdir} if workdir else {}
    if kind == "isolated":
        options.update(isolated_options or {})
    make = isolated if kind == "isolated" else in_process if kind == "in-process" else None
    return make(**options) if make is not None else new_executor(kind, **options)


def close_executor(executor: Any) -> None:
    """Release what ``executor`` holds (:meth:`Executor.close`); an object without a
    ``close`` method (an executor written before the protocol declared it) holds
    nothing."""
    close = getattr(executor, "close", None)
    if callable(close):
        close()


@runtime_checkable
class SupportsDeadline(Protocol):
    """What an :class:`Executor` whose waits can outlast a step also offers (the isolated
    executor: its worker process may go silent between steps, after ``FINAL`` too): a
    bound on every wait by the run's deadline.  Optional: the engine calls it through
    :func:`run_deadline` where an executor has it."""

    def set_deadline(self, deadline: float | None) -> float | None:
        """Bound every wait on the executor's worker by ``deadline`` (a
        ``time.monotonic()`` value; None: no bound); return the deadline it replaces."""
        ...


@runtime_checkable
class SupportsDescribe(Protocol):
    """What an :class:`Executor` whose namespace lives in another process also offers
    (the isolated executor): the variables' metadata made where the values live, and
    which object each name is bound to, so that the engine neither copies every value
    to describe it nor compares object identity across a process.  Optional: the
    engine calls it through :func:`variable_ids` and where an executor has it."""

    def describe_variables(self, *, skip: Collection[str] = (),
                           preview_length: int = REPLVariable.PREVIEW_LENGTH
                           ) -> list[REPLVariable]:
        """The metadata of the data variables (names not private, not in ``skip``, not
        modules, not callable), previews of ``preview_length`` characters, redacted."""
        ...

    def variable_ids(self) -> dict[str, Hashable]:
        """``{name: a token of the object it is bound to}``: equal tokens, same object."""
        ...


def variable_ids(executor: Executor) -> dict[str, Hashable]:
    """Which object each name of ``executor``'s namespace is bound to (tokens that are
    equal for the same object): the executor's own (:class:`SupportsDescribe`), else
    ``id`` of each value of its namespace."""
    if isinstance(executor, SupportsDescribe):
        return executor.variable_ids()
    return {n: id(v) for n, v in executor.namespace.items()}


@contextlib.contextmanager
def run_deadline(executor: Executor, seconds: float | None) -> Iterator[None]:
    """While a run lasts (its end and its clean-up included), bound ``executor``'s waits
    on its worker by the run's time budget, so that ``max_seconds`` holds whatever the
    worker does (:class:`SupportsDeadline`); the deadline it had before is put back
    after (a child run shares its parent's executor).  An executor without
    ``set_deadline`` is left alone.

    Args:
        executor: the run's executor.
        seconds: seconds the run has left (``BudgetGuard.seconds_left()``); None: no
            time budget.
    """
    if not isinstance(executor, SupportsDeadline):
        yield
        return
    previous = executor.set_deadline(None if seconds is None else time.monotonic() + seconds)
    try:
        yield
    finally:
        executor.set_deadline(previous)
