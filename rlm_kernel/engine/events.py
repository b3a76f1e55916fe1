"""Events a run reports while it goes: for the command line, the kernel, tests.

One frozen dataclass per kind; :attr:`Event.kind` names it (the same strings in logs and
in tests).  In order: :class:`RunStarted`, then per step :class:`ModelCall`,
:class:`ModelWriting` (zero or more, while the root model writes its reply),
:class:`StepStarted`, :class:`StepOutput` (zero or more, streamed while the code runs),
:class:`SubCall` (after each ``llm_query`` of the step), :class:`StepNotice` (the host's
note on the step: an input put back, an answer of the wrong type refused, a repetition),
:class:`StepFinished`, and :class:`AnswerCheck` after a step whose ``FINAL`` is held
for one look back; finally :class:`RunFinished`.

Every event carries the fields of :class:`Event`: ``depth`` (0 = top run), ``elapsed``
(seconds since the run started), ``totals`` (the usage so far; None on the frequent
``step_output``) and, in a candidates run only, ``candidate``/``candidates``.  The code
that reports an event builds its dataclass with the kind's own fields (a wrong or
missing field is a type error) and the run fills in the common ones
(:meth:`rlm_kernel.engine.run.Run.notify`).

In a candidates run (``RLMConfig.candidates`` > 1, :mod:`~rlm_kernel.engine.strategies.candidates`)
every event also carries ``candidate`` (1-based) and ``candidates`` (how many were asked
for); :class:`CandidateStarted` comes before each candidate's steps and
:class:`CandidateFinished` (its answer and the vote so far) after them; there is one
``run_started`` (the first candidate's) and one ``run_finished`` (the chosen
candidate's result, with ``result.candidates``), and ``elapsed`` counts from the start
of the first candidate.

Who watches a run is an :data:`Observer`: any ``callable(event)`` (it gets every event),
or a :class:`RunObserver` subclass, which gets each kind in its own method
(``on_step_finished(event)``, ...; the others are no-ops).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypedDict

from ..models import UsageLedger
from ..redaction import redact_data
from ..repl_types import REPLVariable
from .result import RLMResult
from .step import StepOutcome

log = logging.getLogger(__name__)

__all__ = ["AnswerCheck", "CANDIDATE_EVENTS", "CandidateFinished", "CandidateStarted",
           "EVENT_TYPES", "Event", "ModelCall", "ModelWriting", "Observer", "RunFinished", "RunObserver",
           "RunStarted", "StepFinished", "StepNotice", "StepOutput", "StepStarted", "SubCall",
           "Totals", "emit", "usage_totals"]


class Totals(TypedDict):
    """The run's usage so far (the ledger's sums, child runs included)."""

    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float  # US dollars


def usage_totals(ledger: UsageLedger) -> Totals:
    """``ledger``'s sums so far (:meth:`~rlm_kernel.models.UsageLedger.totals`) as
    :class:`Totals`."""
    sums = ledger.totals()
    return Totals(llm_calls=int(sums["llm_calls"]), prompt_tokens=int(sums["prompt_tokens"]),
                  completion_tokens=int(sums["completion_tokens"]),
                  cost_usd=float(sums["cost_usd"]))


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """What every event carries; a kind's own fields are on its subclass.

    Attributes:
        kind: the kind's name (class attribute: ``"run_started"``, ``"step_finished"``, ...).
        depth: 0 for the top run, n for an ``rlm_query`` child n levels down.
        elapsed: seconds since the run started (a candidates run: since the first
            candidate started).
        totals: the usage of the run tree so far; None on ``step_output`` and
            ``model_writing`` (frequent; totals cost O(calls)).
        candidate / candidates: in a candidates run, which candidate (from 1) and how
            many were asked for; None otherwise.
    """

    kind: ClassVar[str] = ""
    depth: int = 0
    elapsed: float = 0.0
    totals: Totals | None = None
    candidate: int | None = None
    candidates: int | None = None

    def deliver(self, observer: RunObserver) -> None:
        """Call ``observer``'s method for this kind (``on_<kind>(self)``)."""
        raise NotImplementedError(f"{type(self).__name__} has no observer method")

    @property
    def data(self) -> dict[str, Any]:
        """The event's fields as one dict (``event.data["depth"]``), as observers written
        for the earlier untyped events read them: the kind's own fields and the common
        ones; ``totals`` only when set, ``candidate``/``candidates`` only in a
        candidates run.  A new copy each time; prefer the attributes."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in ("totals", "candidate", "candidates"):
            if data[name] is None:
                del data[name]
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted(Event):
    """``run_started``: the task and the variables' metadata the model is shown, told
    before the first model call.

    Attributes:
        question: the task.
        variables: the metadata of the variables the model is told about.
        max_iterations: the step budget.
        model: the root model's litellm string.
        inputs: the names of the user's inputs (the variables given, but those an
            earlier task's code left, and the user's tools), sorted.
        no_data: the run has no variable, tool or working folder at all, and the model
            is told so (there is no data; it must invent none): its answer will be
            ``answer_source`` ``no_input``.
        mcp_tools: the MCP servers' tools the model may call, one line each as its task
            message lists them (``- git.git_log(repo_path: string, ...): ...``).
        mcp_problems: the configured MCP servers that are not available, one line each
            (``git: did not start: ...``).
    """

    kind: ClassVar[str] = "run_started"
    question: str
    variables: list[REPLVariable]
    max_iterations: int
    model: str
    inputs: list[str]
    no_data: bool
    mcp_tools: list[str] = field(default_factory=list)
    mcp_problems: list[str] = field(default_factory=list)

    def deliver(self, observer: RunObserver) -> None:
        """Call ``observer.on_run_started(self)``."""
        observer.on_run_started(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCall(Event):
    """``model_call``: the root model is asked for ``step``'s reply (from 1)."""

    kind: ClassVar[str] = "model_call"
    step: int

    def deliver(self, observer: RunObserver) -> None:
        """Call ``observer.on_model_call(self)``."""
        observer.on_model_call(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelWriting(Event):
    """``model_writing``: the root model is writing ``step``'s reply (a streamed reply;
    :mod:`~rlm_kernel.engine.writing` batches its pieces: the first at once, then at most
    one event each :data:`~rlm_kernel.engine.writing.WRITING_INTERVAL` seconds, and one
    with ``done`` when the reply is complete).

    Attributes:
        step: the step whose reply it is (from 1; the "answer now" call's number for it).
        text: what was written since the previous ``model_writing`` of this reply.
        reply: the reply so far (``done``: the whole reply, as recorded).
        pieces: the stream's pieces so far (one token each for llama.cpp's server and
            OpenAI's).
        tokens_per_second: ``pieces`` over the seconds since the first piece (0 before
            a second piece).
        done: the reply is complete (the last event of this reply).
    """

    kind: ClassVar[str] = "model_writing"
    step: int
    text: str
    reply: str
    pieces: int
    tokens_per_second: float
    done: bool = False

    def deliver(self, observer: RunObserver) -> None:
        """Call ``observer.on_model_writing(self)``."""
        observer.on_model_writing(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepStarted(Event):
    """``step_started``: ``step``'s ``code`` is about to run; ``reasoning``: the
    model's prose before it; ``answer_now``: this is the "answer now" call after the
    run stopped early (the step limit, a stuck run), not a further step."""

    kind: ClassVar[str] = "step_started"
    step: int
    code: str
    reasoning: str
    answer_now: bool = False

    def deliver(self, observer: RunObserver) -> None:
        """Call ``observer.on_step_started(self)``."""
        observer.on_step_started(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepOutput(Event):
    """``step_output``: a chunk ``text`` of the running code's ``stream``
    (``"stdout"`` or ``"stderr"``)."""

    kind: ClassVar[str] = "step_output"
    step: int
    stream: str
    text: str

    def deliver(self, observer: RunObserver) -> None:
        """Call ``observer.on_step_output(self)``."""
        observer.on_step_output(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class SubCall(Event):
    """``sub_call``: an ``llm_query`` of the running step returned; ``done``: the
    step's sub-calls returned so far, ``active``: those in flight."""

    kind: ClassVar[str] = "sub_call"
    done: int
    active: int

    def deliver(self, observer: RunObserver) -> None:
        """Call ``observer.on_sub_call(self)``."""
        observer.on_sub_call(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepNotice(Event):
    """``step_notice``: the host's note ``text`` about ``step``, shown in its cell and,
    for ``"restored"`` and ``"answer_type"``, appended to its output (the model reads it).

    ``reason``: ``"restored"`` (model code rebound or deleted a reserved name, a
    protected input or a tool, and it was put back), ``"answer_type"`` (its ``FINAL``
    value was not of the asked type), ``"repeated"`` (the step, or the model's first
    reply for it, repeats an earlier step: the model is told so in the next message
    and sampled differently; :mod:`~rlm_kernel.engine.repetition`) or ``"stuck"`` (a
    repetition after that: the run ends with ``stopped_by`` ``"stuck"``).
    """

    kind: ClassVar[str] = "step_notice"
    step: int
    text: str
    reason: str

    def deliver(self, observer: RunObserver) -> None:
        """Call ``observer.on_step_notice(self)``."""
        observer.on_step_notice(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepFinished(Event):
    """``step_finished``: the step's record.

    Attributes:
        step: the step's number (from 1).
        outcome: what the step did (:class:`~rlm_kernel.engine.step.StepOutcome`: its
            code, output, success, seconds, sub-calls, answer); the trajectory's
            entry for the step is made from it.
        diverged: in a replay, this step's output differs from the record's.
        exchanges: the model exchanges made during this step (top-level runs; see
            :mod:`~rlm_kernel.engine.replay.recording`).
    """

    kind: ClassVar[str] = "step_finished"
    step: int
    outcome: StepOutcome
    diverged: bool
    exchanges: list[dict[str, Any]]

    def deliver(self, observer: RunObserver) -> None:
        """Call ``observer.on_step_finished(self)``."""
        observer.on_step_finished(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerCheck(Event):
    """``answer_check``: ``step``'s ``FINAL`` (``answer``, as text) is held for one look
    back: ``reason`` ``"grounding"`` (the value is typed, and no output or variable
    holds it: ``finding`` says so, as the model is told) or ``"verify"``
    (``verify_answer``: the model checks it against the question; ``finding`` None)."""

    kind: ClassVar[str] = "answer_check"
    step: int
    answer: str | None
    reason: str
    finding: str | None

    def deliver(self, observer: RunObserver) -> None:
        """Call ``observer.on_answer_check(self)``."""
        observer.on_answer_check(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished(Event):
    """``run_finished``: the run's ``result`` (also for errors and budget stops), and
    how its answer was reached: ``answer_source`` (a key of
    :data:`~rlm_kernel.engine.result.ANSWER_SOURCES`, None without an answer) and
    ``votes`` (``(k, n)``: k of the n candidates that ran agree with the answer, after
    a vote; else None), as on the result."""

    kind: ClassVar[str] = "run_finished"
    result: RLMResult
    answer_source: str | None
    votes: tuple[int, int] | None

    def deliver(self, observer: RunObserver) -> None:
        """Call ``observer.on_run_finished(self)``."""
        observer.on_run_finished(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class CandidateStarted(Event):
    """``candidate_started``: candidate ``candidate`` of ``candidates`` begins; its root
    model samples at ``temperature`` with ``seed`` (both None for candidate 1: the
    client's own, as in a single run)."""

    kind: ClassVar[str] = "candidate_started"
    temperature: float | None
    seed: int | None

    def deliver(self, observer: RunObserver) -> None:
        """Call ``observer.on_candidate_started(self)``."""
        observer.on_candidate_started(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class CandidateFinished(Event):
    """``candidate_finished``: the candidate's end and the vote so far.

    ``answer`` is its answer as text (None: no answer, no vote), ``stopped_by`` and
    ``steps`` its own; ``votes``: the candidates so far whose answer agrees with this
    one's (0 without an answer); ``leading`` / ``leading_votes``: the answer ahead so
    far and its votes; ``decided``: no candidate left could change the winner (the run
    stops after this one, as it also does when the budget ran out).
    """

    kind: ClassVar[str] = "candidate_finished"
    answer: str | None
    stopped_by: str
    steps: int
    votes: int
    leading: str | None
    leading_votes: int
    decided: bool

    def deliver(self, observer: RunObserver) -> None:
        """Call ``observer.on_candidate_finished(self)``."""
        observer.on_candidate_finished(self)


#: Event kind -> its dataclass.
EVENT_TYPES: dict[str, type[Event]] = {cls.kind: cls for cls in (
    RunStarted, ModelCall, ModelWriting, StepStarted, StepOutput, SubCall, StepNotice, StepFinished,
    AnswerCheck, RunFinished, CandidateStarted, CandidateFinished)}

#: The kinds only a candidates run emits.
CANDIDATE_EVENTS: frozenset[str] = frozenset({CandidateStarted.kind, CandidateFinished.kind})


class RunObserver:
    """Watches a run: one method per event kind, each a no-op here; override those you
    need.  An instance is a callable observer (``RLM(observer=MyObserver())``):
    :meth:`notify` hands each event to its kind's method.  Override :meth:`notify` to
    filter or forward events as a whole (e.g. only the top run's: ``event.depth == 0``).
    """

    def __call__(self, event: Event) -> None:
        """Observe ``event`` (:meth:`notify`): what ``RLM(observer=...)`` calls."""
        self.notify(event)

    def notify(self, event: Event) -> None:
        """Call the method for ``event``'s kind (``on_step_finished`` for a
        :class:`StepFinished`, ...)."""
        event.deliver(self)

    def on_run_started(self, event: RunStarted) -> None:
        """The run started (its question and variables)."""

    def on_model_call(self, event: ModelCall) -> None:
        """The root model is asked for a step's reply."""

    def on_model_writing(self, event: ModelWriting) -> None:
        """The root model wrote more of a step's reply."""

    def on_step_started(self, event: StepStarted) -> None:
        """A step's code is about to run."""

    def on_step_output(self, event: StepOutput) -> None:
        """A chunk of the running step's stdout or stderr."""

    def on_sub_call(self, event: SubCall) -> None:
        """An ``llm_query`` of the running step returned."""

    def on_step_notice(self, event: StepNotice) -> None:
        """The host's note about a step."""

    def on_step_finished(self, event: StepFinished) -> None:
        """A step ended (its :class:`~rlm_kernel.engine.step.StepOutcome`)."""

    def on_answer_check(self, event: AnswerCheck) -> None:
        """A step's ``FINAL`` is held for one look back."""

    def on_run_finished(self, event: RunFinished) -> None:
        """The run ended (its :class:`~rlm_kernel.engine.result.RLMResult`)."""

    def on_candidate_started(self, event: CandidateStarted) -> None:
        """A candidate of a candidates run begins."""

    def on_candidate_finished(self, event: CandidateFinished) -> None:
        """A candidate of a candidates run ended; the vote so far."""


#: What ``RLM(observer=...)`` takes: any callable of one event (a :class:`RunObserver`
#: is one).
Observer = Callable[[Event], None]


def emit(observer: Observer | None, event: Event) -> None:
    """Deliver ``event``, every secret the process knows redacted in every text it
    holds (:func:`rlm_kernel.redaction.redact_data`: a field added later too): events
    are how a run's text reaches the command line's printout and the notebook's cells.
    An observer that raises is reported, not fatal to the run."""
    if observer is None:
        return
    event = redact_data(event)
    try:
        observer(event)
    except Exception as exc:  # noqa: BLE001 - a display bug must not end the run
        log.warning("observer %r failed on %s", observer, event.kind, exc_info=True)
        print(f"rlm: observer failed on {event.kind}: {exc!r}", file=sys.__stderr__)
