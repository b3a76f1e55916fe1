"""What a worker runs for one task of a batch: plain data in (the batch's settings and
the task's row as a dict), the run's result and the worker's name out.

Module-level, so Dask pickles it by reference: the workers import ``rlm_kernel``."""

from __future__ import annotations

import logging
import os
import socket
import sys
from dataclasses import dataclass
from typing import Any

from ..engine import RLMConfig, RLMResult
from .contexts import ContextRef
from .mapping import run_task

__all__ = ["TaskOutcome", "run_row", "worker_name"]

log = logging.getLogger(__name__)


@dataclass
class TaskOutcome:
    """One finished task, as sent back to the client.

    Attributes:
        id: the task's id.
        result: the run's :class:`RLMResult` (``stopped_by="error"`` and ``error`` when
            it failed).
        worker: the Dask worker's address (``tcp://127.0.0.1:40123``), or ``host:pid``
            outside Dask.
    """

    id: str
    result: RLMResult
    worker: str | None


def run_row(config: RLMConfig, row: dict[str, Any]) -> TaskOutcome:
    """Run one task on this worker.

    Args:
        config: the batch's settings (models resolved by the client).
        row: a :class:`~rlm_kernel.batch.tasks.TaskRow` as a dict (``model_dump()``).

    Returns:
        The :class:`TaskOutcome`; a task's failure (its context unreadable, a bad
        limit, the model unreachable) is in its result, never raised.  Its
        ``answer_value`` is plain data (:func:`~rlm_kernel.batch.sending.sendable`:
        a value of model code's own classes, whose unpickling would run its code on
        the client, or one too deep to pickle, is sent as its JSON form or text).
    """
    from .tasks import LIMITS

    limits = {name: row[name] for name in LIMITS if row.get(name) is not None}
    context = ContextRef(row["context"]) if row.get("context") else None
    try:
        task_config = config.replace(**limits)
    except (TypeError, ValueError) as exc:
        result = RLMResult(question=row["question"], stopped_by="error", error=str(exc))
    else:
        result = run_task(task_config, row["question"], context, row.get("returns"))
    log.info("task %s: %s", row["id"], result.stopped_by)
    return TaskOutcome(id=row["id"], result=result, worker=worker_name())


def worker_name() -> str:
    """Who runs this task: the Dask worker's address inside a Dask worker, else
    ``host:pid``."""
    if "distributed" in sys.modules:
        try:
            from distributed import get_worker

            return str(get_worker().address)
        except ValueError:  # not inside a Dask worker's task
            pass
    return f"{socket.gethostname()}:{os.getpid()}"

