"""Events a run reports while it goes: for the command line, the kernel, tests.

Kinds, in order: ``run_started``, then per step ``model_call``, ``step_started``,
``step_output`` (zero or more, streamed while the code runs), ``sub_call`` (after
each ``llm_query`` of the step: ``done`` calls so far, ``active`` in flight),
``step_finished``, and ``answer_check`` after a step whose ``FINAL`` is held for
the model to check (``answer``: the held answer as text); finally ``run_finished``.  Every event's data carries
``depth`` (0 = top run) and ``elapsed`` (seconds since the run started); all but
``step_output`` carry ``totals`` (``llm_calls``, ``prompt_tokens``,
``completion_tokens``, ``cost_usd`` so far).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Event", "Observer", "emit"]


@dataclass(slots=True)
class Event:
    """One thing that happened in a run.

    Attributes:
        kind: ``run_started``, ``model_call``, ``step_started``, ``step_output``,
            ``step_finished`` or ``run_finished``.
        data: kind-specific fields (``step``, ``code``, ``text``, ``result`` ...).
    """

    kind: str
    data: dict[str, Any] = field(default_factory=dict)


Observer = Callable[[Event], None]


def emit(observer: Observer | None, event: Event) -> None:
    """Deliver ``event``; an observer that raises is reported, not fatal to the run."""
    if observer is None:
        return
    try:
        observer(event)
    except Exception as exc:  # noqa: BLE001 - a display bug must not end the run
        print(f"rlm: observer failed on {event.kind}: {exc!r}", file=sys.__stderr__)
