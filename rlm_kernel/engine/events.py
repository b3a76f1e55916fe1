"""Events a run reports while it goes: for the command line, the kernel, tests.

Kinds, in order: ``run_started``, then per step ``model_call``, ``step_started``,
``step_output`` (zero or more, streamed while the code runs), ``sub_call`` (after
each ``llm_query`` of the step: ``done`` calls so far, ``active`` in flight),
``step_notice`` (the host's note on the step: an input put back, an answer of the
wrong type refused, a repetition), ``step_finished``, and ``answer_check`` after a step whose
``FINAL`` is held for one look back (``answer``: the held answer as text; ``reason``: ``"grounding"``, no
output or variable holds it, or ``"verify"``); finally ``run_finished``.  Every
event's data carries ``depth`` (0 = top run) and ``elapsed`` (seconds since the run
started); all but
``step_output`` carry ``totals`` (``llm_calls``, ``prompt_tokens``,
``completion_tokens``, ``cost_usd`` so far).

In a candidates run (``RLMConfig.candidates`` > 1, :mod:`~rlm_kernel.engine.strategies.candidates`)
every event also carries ``candidate`` (1-based) and ``candidates`` (how many were asked
for); ``candidate_started`` comes before each candidate's steps and
``candidate_finished`` (its answer and the vote so far) after them; there is one
``run_started`` (the first candidate's) and one ``run_finished`` (the chosen
candidate's result, with ``result.candidates``), and ``elapsed`` counts from the start
of the first candidate.

Each kind's data has the keys of one ``TypedDict`` here (:data:`EVENT_DATA` maps kind
to type): :class:`RunStartedData`, :class:`ModelCallData`, :class:`StepStartedData`,
:class:`StepOutputData`, :class:`SubCallData`, :class:`StepFinishedData`,
:class:`AnswerCheckData`, :class:`StepNoticeData`, :class:`RunFinishedData`, :class:`CandidateStartedData`,
:class:`CandidateFinishedData`.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

from ..repl_types import REPLEntry, REPLVariable
from .result import RLMResult
from .step import StepOutcome

log = logging.getLogger(__name__)

__all__ = ["AnswerCheckData", "CANDIDATE_EVENTS", "CandidateFinishedData",
           "CandidateStartedData", "EVENT_DATA", "Event", "EventData", "ModelCallData",
           "Observer", "RunFinishedData", "RunStartedData", "StepFinishedData",
           "StepNoticeData", "StepOutputData", "StepStartedData", "SubCallData", "Totals",
           "emit"]


class Totals(TypedDict):
    """The run's usage so far (the ledger's sums, child runs included)."""

    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float  # US dollars


class _CandidateKeys(TypedDict, total=False):
    """Present in every event of a candidates run only."""

    candidate: int  # which candidate, from 1
    candidates: int  # how many candidates the run was asked for


class _Base(_CandidateKeys):
    depth: int  # 0 = the top run, >0 = rlm_query children
    elapsed: float  # seconds since the run started


class _Counted(_Base):
    totals: Totals


class RunStartedData(_Counted):
    """``run_started``: the task and the variables' metadata the model is shown, told
    before the first model call.  ``inputs``: the names of the user's inputs (the
    variables given, but those an earlier task's code left, and the user's tools),
    sorted; ``no_data``: the run has no variable, tool or working folder at all, and
    the model is told so (there is no data; it must invent none): its answer will be
    ``answer_source`` ``no_input``."""

    question: str
    variables: list[REPLVariable]
    max_iterations: int
    model: str  # the root model's litellm string
    inputs: list[str]
    no_data: bool


class ModelCallData(_Counted):
    """``model_call``: the root model is asked for ``step``'s reply."""

    step: int


class StepStartedData(_Counted):
    """``step_started``: ``step``'s code is about to run."""

    step: int
    code: str
    reasoning: str


class StepOutputData(_Base):
    """``step_output``: a chunk of the running code's ``stdout``/``stderr``."""

    step: int
    stream: str  # "stdout" or "stderr"
    text: str


class SubCallData(_Counted):
    """``sub_call``: an ``llm_query`` of the running step returned."""

    done: int  # sub-calls of this step returned so far
    active: int  # sub-calls in flight


class StepFinishedData(_Counted):
    """``step_finished``: the step's outcome and its history entry; ``diverged``: in a
    replay, this step's output differs from the record's; ``exchanges``: the model
    exchanges made during this step (top-level runs; see ``engine.recording``)."""

    step: int
    outcome: StepOutcome
    entry: REPLEntry
    diverged: bool
    exchanges: list[dict[str, Any]]


class AnswerCheckData(_Counted):
    """``answer_check``: ``step``'s ``FINAL`` is held for one look back: ``reason``
    ``"grounding"`` (the value is typed, and no output or variable holds it:
    ``finding`` says so, as the model is told) or ``"verify"`` (``verify_answer``: the
    model checks it against the question; ``finding`` None)."""

    step: int
    answer: str | None  # the held answer as text
    reason: str  # "grounding" or "verify"
    finding: str | None  # the grounding check's finding


class StepNoticeData(_Counted):
    """``step_notice``: the host's note about ``step``, shown in its cell and, for
    ``"restored"`` and ``"answer_type"``, appended to its output (the model reads it):
    ``reason`` ``"restored"`` (model code rebound or deleted a reserved name, a
    protected input or a tool, and it was put back), ``"answer_type"`` (its ``FINAL``
    value was not of the asked type), ``"repeated"`` (the step, or the model's first
    reply for it, repeats an earlier step: the model is told so in the next message
    and sampled differently; :mod:`~rlm_kernel.engine.repetition`) or ``"stuck"`` (a
    repetition after that: the run ends with ``stopped_by`` ``"stuck"``)."""

    step: int
    text: str
    reason: str


class RunFinishedData(_Counted):
    """``run_finished``: the run's result (also for errors and budget stops), and how
    its answer was reached: ``answer_source`` (a key of
    :data:`~rlm_kernel.engine.result.ANSWER_SOURCES`, None without an answer) and
    ``votes`` (``(k, n)`` after a vote, else None), as on the result."""

    result: RLMResult
    answer_source: str | None
    votes: tuple | None  # (k, n): k of the n candidates that ran agree with the answer


class CandidateStartedData(_Counted):
    """``candidate_started``: candidate ``candidate`` of ``candidates`` begins; its root
    model samples at ``temperature`` with ``seed`` (both None for candidate 1: the
    client's own, as in a single run)."""

    temperature: float | None
    seed: int | None


class CandidateFinishedData(_Counted):
    """``candidate_finished``: the candidate's end and the vote so far.

    ``answer`` is its answer as text (None: no answer, no vote), ``stopped_by`` and
    ``steps`` its own; ``votes``: the candidates so far whose answer agrees with this
    one's (0 without an answer); ``leading`` / ``leading_votes``: the answer ahead so
    far and its votes; ``decided``: no candidate left could change the winner (the run
    stops after this one, as it also does when the budget ran out).
    """

    answer: str | None
    stopped_by: str
    steps: int
    votes: int
    leading: str | None
    leading_votes: int
    decided: bool


EventData = (RunStartedData | ModelCallData | StepStartedData | StepOutputData
             | SubCallData | StepFinishedData | AnswerCheckData | RunFinishedData
             | CandidateStartedData | CandidateFinishedData)

#: Event kind -> the TypedDict of its data.
EVENT_DATA: dict[str, type] = {
    "run_started": RunStartedData, "model_call": ModelCallData,
    "step_started": StepStartedData, "step_output": StepOutputData,
    "sub_call": SubCallData, "step_finished": StepFinishedData,
    "step_notice": StepNoticeData,
    "answer_check": AnswerCheckData, "run_finished": RunFinishedData,
    "candidate_started": CandidateStartedData, "candidate_finished": CandidateFinishedData,
}

#: The kinds only a candidates run emits.
CANDIDATE_EVENTS: frozenset[str] = frozenset({"candidate_started", "candidate_finished"})


@dataclass(slots=True)
class Event:
    """One thing that happened in a run.

    Attributes:
        kind: a key of :data:`EVENT_DATA` (``run_started``, ``model_call``,
            ``step_started``, ``step_output``, ``sub_call``, ``step_finished``,
            ``answer_check``, ``run_finished``; ``candidate_started``,
            ``candidate_finished`` in a candidates run).
        data: the kind's fields, as typed by ``EVENT_DATA[kind]``.
    """

    kind: str
    data: EventData = field(default_factory=dict)  # type: ignore[assignment]


Observer = Callable[[Event], None]


def emit(observer: Observer | None, event: Event) -> None:
    """Deliver ``event``; an observer that raises is reported, not fatal to the run."""
    if observer is None:
        return
    try:
        observer(event)
    except Exception as exc:  # noqa: BLE001 - a display bug must not end the run
        log.warning("observer %r failed on %s", observer, event.kind, exc_info=True)
        print(f"rlm: observer failed on {event.kind}: {exc!r}", file=sys.__stderr__)
