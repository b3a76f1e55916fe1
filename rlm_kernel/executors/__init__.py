"""Where model code runs: the :class:`Executor` protocol the engine calls, the plain
``exec`` executor, and what every step needs whatever runs it: the time limit
(``timeouts``), the process state a step may not keep (``host_state``), capped and
coalesced streams (``streams``), secret redaction (``redaction``) and the muting of
threads a step leaves running (``thread_output``).  The IPython executor that runs
steps through a kernel's shell is Jupyter's (``rlm_kernel.jupyter.shell_executor``).
"""

from __future__ import annotations

from typing import Any

from .plain import Executor, OutputCallback, PlainExecutor, StreamTee, combined_output

__all__ = ["Executor", "PlainExecutor", "OutputCallback", "StreamTee", "combined_output",
           "new_executor", "close_executor", "executor_kind", "EXECUTOR_KINDS"]

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


def executor_kind(executor: Executor) -> str:
    """``"isolated"`` for an executor whose code runs behind the process wall (an
    :class:`~rlm_kernel.executors.isolated.IsolatedExecutor` or a subclass), else
    ``"in-process"``."""
    from .isolated import IsolatedExecutor

    return "isolated" if isinstance(executor, IsolatedExecutor) else "in-process"


def close_executor(executor: Executor) -> None:
    """Release what ``executor`` holds (an isolated one's worker process); executors
    without a ``close`` method hold nothing."""
    close = getattr(executor, "close", None)
    if callable(close):
        close()
