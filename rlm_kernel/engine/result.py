"""The outcome of one RLM run: answer, trajectory, usage, timings, stop reason.

A result is where a run's text leaves the engine, so no secret the process knows
(:mod:`rlm_kernel.redaction`: the environment's keys, a fleet's, a client's) stays in
it: a run redacts its result when it ends (:meth:`RLMResult.redact`: every text of
every field, the fields added later too), and :meth:`RLMResult.summary` and
:meth:`RLMResult.to_dict` redact what they return, whoever built the result (a failed
task's, the command line's own error).  The Python value model code handed to
``FINAL`` (``answer_value``) is the user's data and is left as it is; its text
(``answer``) and its JSON form in the summary are redacted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..models import LLMCall
from ..redaction import redact_data
from ..repl_types import REPLHistory, REPLVariable
from .answer.sources import ANSWER_SOURCES  # the kinds of ``answer_source``, in words

__all__ = ["ANSWER_SOURCES", "ChildRun", "RLMResult", "STOP_REASONS", "child_runs",
           "conversation"]

STOP_REASONS = ("final", "max_iterations", "budget", "interrupt", "stuck", "error")
"""Why a run ended. ``stuck``: the model repeated itself after being told so."""


@dataclass
class RLMResult:
    """What :meth:`rlm_kernel.RLM.run` returns.

    Attributes:
        question: the task as given.
        answer: the final answer as text (:func:`~rlm_kernel.engine.answer.text.answer_text`),
            or None when the run ended without one.
        answer_value: the raw Python value passed to ``FINAL``/``FINAL_VAR``.
        stopped_by: one of :data:`STOP_REASONS`.
        history: the trajectory, one :class:`REPLEntry` per step.
        calls: every model request of the run and its children, in order.
        variables: the metadata the model was shown at the start.
        seconds: wall-clock duration of the run.
        error: a readable reason when ``stopped_by`` is ``error`` or ``budget``.
        model / sub_model: the litellm model strings used.
        depth: 0 for a top-level run, >0 for ``rlm_query`` children.
        exchanges: every model exchange of the run tree in call order, the record
            a replay feeds back (see :mod:`rlm_kernel.engine.replay.recording`).
        diverged_at: in a replay, the first step whose output differs from the
            record's (None: none did, or not a replay).
        root_prompts: the chat messages of each top-level root-model call, in order
            (in memory only, not in :meth:`to_dict`; the rlm-format log needs them).
        traceback: when the engine itself failed (``error`` starts with "internal
            error"), the traceback, for a bug report (also logged); else None.
        candidates: in a candidates run (``RLMConfig.candidates`` > 1), one summary
            per candidate that ran, in order (:mod:`rlm_kernel.engine.strategies.candidates`):
            ``index`` (from 1), ``answer`` (text or None), ``votes`` (candidates whose
            answer agrees with its one; 0 without an answer), ``steps``,
            ``stopped_by``, ``failed_steps``, ``confidence`` (its last
            ``RLM_CONFIDENCE``, or None), ``llm_calls``, ``tokens`` (prompt plus
            completion), ``cost_usd``, ``seconds`` and ``chosen``.  The result's own
            trajectory, answer, stop reason and ``exchanges`` are the chosen
            candidate's; its ``calls`` and ``seconds`` cover all of them.  Empty for
            a single run.
        answer_type: the type the answer was asked to have (as written, e.g.
            ``list[str]``), or None; then ``answer_value`` is of that type.
        conversation: the earlier tasks the run was told about
            (:meth:`~rlm_kernel.engine.session.conversation.Conversation.to_list`), oldest first.
        new_variables: metadata of the data variables the run's steps created or
            rebound (the conversation's working state after this task).
        answer_source: how the answer was reached, a key of
            :data:`~rlm_kernel.engine.answer.sources.ANSWER_SOURCE_KINDS`;
            None when there is no answer.
        votes: after a vote, ``(k, n)``: k of the n candidates agreed with the
            answer; else None.
        diff: in a working-folder run ended by ``finish()``, the folder's change as a
            unified diff computed by the host (empty when nothing changed); else None.
        messages: the run's root-model conversation as OpenAI chat messages
            (``{"role": "system" | "user" | "assistant", "content": str}``): the
            messages of its last root-model call as sent (the prompt's window applied)
            and that call's reply, last; empty when no call was made.
        children: every ``rlm_query`` child run of the run tree, grandchildren
            included, in the order they ended (:class:`ChildRun`: id, parent, depth,
            the parent's step, conversation, trajectory, answer).
    """

    question: str
    answer: str | None = None
    answer_value: Any = None
    stopped_by: str = "error"
    history: REPLHistory = field(default_factory=REPLHistory)
    calls: list[LLMCall] = field(default_factory=list)
    variables: list[REPLVariable] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None
    model: str = ""
    sub_model: str = ""
    depth: int = 0
    exchanges: list[dict[str, Any]] = field(default_factory=list)
    diverged_at: int | None = None
    root_prompts: list[list[dict[str, str]]] = field(default_factory=list, repr=False)
    traceback: str | None = field(default=None, repr=False)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    answer_type: str | None = None
    conversation: list[dict[str, Any]] = field(default_factory=list)
    new_variables: list[REPLVariable] = field(default_factory=list)
    answer_source: str | None = None
    votes: tuple[int, int] | None = None
    diff: str | None = None
    messages: list[dict[str, str]] = field(default_factory=list)
    children: list[ChildRun] = field(default_factory=list)

    @property
    def steps(self) -> int:
        """Number of executed steps."""
        return len(self.history)

    @property
    def llm_calls(self) -> int:
        """Number of model requests (root, sub-calls and children)."""
        return len(self.calls)

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens over all calls."""
        return sum(c.prompt_tokens for c in self.calls)

    @property
    def completion_tokens(self) -> int:
        """Completion tokens over all calls."""
        return sum(c.completion_tokens for c in self.calls)

    @property
    def cost_usd(self) -> float:
        """Cost in US dollars over all calls (litellm's cost map)."""
        return sum(c.cost_usd for c in self.calls)

    def summary(self) -> dict[str, Any]:
        """The JSON summary printed by ``rlm run --json``, secrets redacted.

        Keys: ``answer``, ``steps``, ``llm_calls``, ``prompt_tokens``,
        ``completion_tokens``, ``cost_usd``, ``seconds``, ``stopped_by``, plus
        ``error``, ``model``, ``sub_model``, ``diverged_at``, ``answer_source`` and
        ``votes``; ``candidates`` (see
        the class) after a candidates run; ``answer_type`` and ``answer_value`` (the
        typed value as JSON data: a model or dataclass as an object) when a type was
        asked for.
        """
        data: dict[str, Any] = {
            "answer": self.answer,
            "steps": self.steps,
            "llm_calls": self.llm_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": round(self.cost_usd, 6),
            "seconds": round(self.seconds, 3),
            "stopped_by": self.stopped_by,
            "error": self.error,
            "model": self.model,
            "sub_model": self.sub_model,
            "diverged_at": self.diverged_at,
            "answer_source": self.answer_source,
            "votes": list(self.votes) if self.votes else None,
        }
        if self.candidates:
            data["candidates"] = [dict(c) for c in self.candidates]
        if self.answer_type is not None:
            data["answer_type"] = self.answer_type
            data["answer_value"] = _json_value(self.answer_value) \
                if self.answer is not None else None
        return redact_data(data)

    def to_dict(self) -> dict[str, Any]:
        """Everything, JSON-ready: the summary plus trajectory and per-call records,
        secrets redacted."""
        data = self.summary()
        data["question"] = self.question
        data["trajectory"] = self.history.to_list()
        data["calls"] = [c.to_dict() for c in self.calls]
        data["variables"] = [v.to_dict() for v in self.variables]
        data["exchanges"] = list(self.exchanges)
        if self.conversation:
            data["conversation"] = list(self.conversation)
        data["new_variables"] = [v.to_dict() for v in self.new_variables]
        if self.diff is not None:
            data["diff"] = self.diff
        data["messages"] = [dict(m) for m in self.messages]
        data["children"] = [c.to_dict() for c in self.children]
        return redact_data(data)

    def redact(self) -> RLMResult:
        """Replace every secret value the process knows with ``[redacted NAME]`` in
        every text this result holds (the error, the traceback, the question, the
        trajectory, the call records, the exchanges ...; not ``answer_value``, the
        user's data), in place (:func:`rlm_kernel.redaction.redact_data`).

        Returns:
            The result itself.
        """
        return redact_data(self)


@dataclass
class ChildRun:
    """One ``rlm_query`` child run, kept in its top-level run's result
    (:attr:`RLMResult.children`): the sub-agent histories spec 003 stores for training.

    Attributes:
        id: its place in the tree: ``"2"`` is the top-level run's second child,
            ``"2.1"`` that child's first child (numbered as they ended).
        parent: the id of the run whose code called ``rlm_query`` (``""``: the
            top-level run).
        depth: 1 for a child of the top-level run, n for n levels down.
        parent_step: the parent's step (from 1) whose code called ``rlm_query``; the
            host's count.
        question: the prompt the child was given.
        messages: its root-model conversation as OpenAI chat messages, its last reply
            last (:attr:`RLMResult.messages`).
        history: its trajectory.
        answer: its answer text, or None.
        stopped_by: why it ended (:data:`STOP_REASONS`).
        seconds: its wall-clock time.
        error: its error line, or None.
    """

    id: str
    parent: str
    depth: int
    parent_step: int
    question: str
    messages: list[dict[str, str]] = field(default_factory=list)
    history: REPLHistory = field(default_factory=REPLHistory)
    answer: str | None = None
    stopped_by: str = "error"
    seconds: float = 0.0
    error: str | None = None

    @property
    def steps(self) -> int:
        """Number of executed steps."""
        return len(self.history)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, secrets redacted: the attributes (``history`` as the trajectory's
        list) and ``steps``."""
        return redact_data({
            "id": self.id, "parent": self.parent, "depth": self.depth,
            "parent_step": self.parent_step, "question": self.question,
            "messages": [dict(m) for m in self.messages], "answer": self.answer,
            "stopped_by": self.stopped_by, "steps": self.steps,
            "seconds": round(self.seconds, 3), "error": self.error,
            "trajectory": self.history.to_list()})


def child_runs(number: str, parent_step: int, result: RLMResult) -> list[ChildRun]:
    """A finished child's record for its parent: the child itself (id ``number``,
    parent ``""``) then its own children with ids and parents put under ``number``
    (``"1"`` of child ``"3"`` becomes ``"3.1"``).

    Args:
        number: the child's number among its parent's children (``"1"``, ``"2"`` ...).
        parent_step: the parent's step whose code started it (from 1).
        result: the child's result.
    """
    own = ChildRun(id=number, parent="", depth=result.depth, parent_step=parent_step,
                   question=result.question, messages=list(result.messages),
                   history=result.history, answer=result.answer,
                   stopped_by=result.stopped_by, seconds=result.seconds, error=result.error)
    under = [ChildRun(id=f"{number}.{c.id}", parent=f"{number}.{c.parent}".rstrip("."),
                      depth=c.depth, parent_step=c.parent_step, question=c.question,
                      messages=c.messages, history=c.history, answer=c.answer,
                      stopped_by=c.stopped_by, seconds=c.seconds, error=c.error)
             for c in result.children]
    return [own, *under]


def conversation(messages: list[dict[str, str]] | None, reply: str | None) -> list[dict[str, str]]:
    """A run's conversation (:attr:`RLMResult.messages`): the messages of its last
    root-model call and that reply as the assistant's last message; empty when none."""
    if messages is None or reply is None:
        return []
    return [*(dict(m) for m in messages), {"role": "assistant", "content": reply}]


def _json_value(value: Any) -> Any:
    """A typed answer as JSON data (pydantic's encoder: models, dataclasses, sets,
    dates); for what it cannot encode (an object, a value nested too deep: the run
    refuses such typed answers, a result made by hand may hold one) its guarded text
    (:func:`~rlm_kernel.executors.guarded_repr`: bounded, never raises)."""
    from pydantic_core import to_jsonable_python

    from ..executors import guarded_repr

    try:
        return to_jsonable_python(value)
    except Exception:  # noqa: BLE001 - no JSON form (RecursionError included)
        return guarded_repr(value)
