"""What a worker runs for one task of a batch: plain data in (the batch's settings and
the task's row as a dict), the run's result and the worker's name out.

Module-level, so Dask pickles it by reference: the workers import ``rlm_kernel``."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from ..engine import ContextRef, RLMConfig, RLMResult, run_task, worker_name

__all__ = ["MAX_SENT_DEPTH", "TaskOutcome", "plain_data", "run_row"]

log = logging.getLogger(__name__)

MAX_SENT_DEPTH = 100
"""Levels of containers an answer value sent back may nest (as many as a typed answer
and a value crossing the isolated REPL's wall: ``engine.answer.nesting.MAX_DEPTH``)."""

_MAX_SENT_ITEMS = 1_000_000
_SCALARS = (str, bytes, int, float, bool, type(None))
_CONTAINERS = (list, tuple, set, frozenset, dict)


def plain_data(value: Any, limit: int = MAX_SENT_DEPTH) -> bool:
    """Whether ``value`` is built of exact built-in types only (``str``, ``bytes``,
    ``int``, ``float``, ``bool``, ``None``, and ``list``, ``tuple``, ``set``,
    ``frozenset``, ``dict`` of them), at most ``limit`` levels deep and at most a
    million items, walked without recursion: data that unpickles anywhere without
    running code of its own.

    Args:
        value: any object.
        limit: the most levels of containers.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    items = 0
    while stack:
        node, depth = stack.pop()
        items += 1
        kind = type(node)
        if kind in _SCALARS:
            continue
        if kind not in _CONTAINERS or depth > limit or items > _MAX_SENT_ITEMS:
            return False
        parts = [*node.keys(), *node.values()] if kind is dict else list(node)
        stack.extend((part, depth + 1) for part in parts)
    return True


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
        limit, the model unreachable) is in its result, never raised.
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
    return TaskOutcome(id=row["id"], result=_sendable(result), worker=worker_name())


def _sendable(result: RLMResult) -> RLMResult:
    """The result as the worker sends it to the client: ``answer_value`` kept when it
    is :func:`plain_data`, else replaced by the answer's text.  A value of model code's
    own classes would run its code where it is unpickled (the client running ``rlm
    batch``) or fail to unpickle there, and one nested too deep or too wide does not
    pickle at all; the results file holds the text either way."""
    if result.answer_value is None or plain_data(result.answer_value):
        return result
    log.info("the answer's value (a %s) is not plain data: its text is sent",
             type(result.answer_value).__name__)
    return dataclasses.replace(result, answer_value=result.answer)
