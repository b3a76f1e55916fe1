"""How the loop judges a step: whether the run stops, with what answer (a ``FINAL``'s
rules are :class:`~rlm_kernel.engine.answer.checks.FinalChecks`'), whether the step
repeats an earlier one, and what the termination policy is shown of a step.

:class:`Judge` holds the run's rules.  The repetition rule (:meth:`Judge.repeats`,
:meth:`Judge.repetition`): a step that
repeats an earlier step of the run (:class:`~rlm_kernel.engine.repetition.RepetitionDetector`)
is told to the model once and its next reply sampled differently; a repetition after
that makes the run stuck.  At temperature 0 a small model that repeats itself once
usually loops until the step limit.  Both take and return the loop's
:class:`~rlm_kernel.engine.step.LoopState` as a value.

The policy (:meth:`Judge.stops`) decides *whether* to stop, never what a FINAL's answer
is; what it sees (:func:`action_result`, :func:`policy_context`): the
:mod:`rlm_kernel.policies` protocol's ``ActionResult`` and ``PolicyContext``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ..policies import ActionResult, PolicyContext, TerminationPolicy
from ..repl_types import REPLHistory
from .answer.checks import FinalChecks
from .events import AnswerCheck, Event, StepNotice
from .prompts import repeated_step
from .repetition import Repetition, RepetitionDetector, signature
from .result import RLMResult
from .step import LoopState, StepOutcome, model_words, split_reply, writes_final

__all__ = ["Judge", "action_result", "policy_context"]


class Judge:
    """Whether a run stops after a step, and with what answer: the termination policy,
    the look back at a ``FINAL``, the repetition rule; the answer it accepts is written
    into the run's result (``answer``, ``answer_value``, ``stopped_by`` ``"final"``,
    ``answer_source``).

    Args:
        policy: the run's termination policy.
        repeat_limit: repetitions of a step that count (``RLMConfig.repeat_limit``; 0
            or None: the rule is off).
        checks: the host's checks of the run's ``FINAL`` values.
        result: the run's result.
        redact: takes secrets out of a text (the run's redactor: a policy's own answer).
        notify: tells the run's observer an event.
    """

    def __init__(self, policy: TerminationPolicy, repeat_limit: int | None, checks: FinalChecks,
                 result: RLMResult, *, redact: Callable[[str], str],
                 notify: Callable[[Event], None]) -> None:
        self.policy, self.checks, self.result = policy, checks, result
        self.redact, self.notify = redact, notify
        self.repetitions = RepetitionDetector(repeat_limit) \
            if repeat_limit else None  # this run's steps only: copying is not looping

    # -- the repetition rule --------------------------------------------------------------
    def repeats(self, reply: str, state: LoopState, *,
                cut_after_first_block: bool) -> Repetition | None:
        """The repetition ``reply``'s code would make if it ran (the same normalised code
        as an earlier step's of this run), or None; never for a check step
        (``state.pending``), which may repeat its FINAL."""
        if self.repetitions is None or state.pending is not None:
            return None
        _, blocks, _ = split_reply(reply, cut_after_first_block)
        return self.repetitions.repeats_code("\n\n".join(blocks))

    def repetition(self, step: int, outcome: StepOutcome, state: LoopState) -> LoopState:
        """``state`` after ``step``: whether it repeats an earlier step of this run (the
        same normalised code, output or error, or the same code and result but for their
        numbers, ``repeat_limit`` times).  The run's first repetition is kept for the next
        message (``repeated``, ``warned``) and the next reply is sampled differently
        (``resample``); a repetition after that makes the run stuck (``stuck``: the loop
        stops it).  A step with a ``FINAL`` and the check step of a held one are not
        judged.  Tells the observer ``step_notice`` (``reason`` ``"repeated"`` or
        ``"stuck"``) for the step's cell, also when the step's first reply was sampled
        again (``asked_again``)."""
        asked_again, notify = state.asked_again, self.notify
        state = replace(state, repeated=None, asked_again=None)
        if self.repetitions is None or outcome.final or state.pending is not None:
            return state
        if asked_again is not None:
            notify(StepNotice(
                step=step, reason="repeated",
                text=f"The model's first reply to this step repeated "
                     f"{repeated_step(asked_again)}; it was told so and asked again."))
        rep = self.repetitions.observe(step, signature(
            outcome.code, outcome.output, outcome.success, reply=outcome.reply_for_history,
            error=outcome.error_for_model))
        if rep is None:
            return state
        if state.warned is None:
            notify(StepNotice(
                step=step, reason="repeated",
                text=f"This step repeats {repeated_step(rep)}: the model is told so, and its "
                     "next step is sampled differently."))
            return replace(state, warned=rep, repeated=rep, resample=True)
        notify(StepNotice(step=step, reason="stuck",
                          text=f"This step repeats {repeated_step(rep)} again."))
        return replace(state, stuck=rep)

    def seen(self, step: int, code: str, output: str, success: bool, reply: str) -> None:
        """A step taken as it was (a continued run's): it counts as seen."""
        if self.repetitions is not None:
            self.repetitions.observe(step, signature(code, output, success, reply=reply))

    # -- the policy and the answer ----------------------------------------------------------
    def stops(self, step: int, outcome: StepOutcome, state: LoopState,
              context: PolicyContext) -> tuple[bool, str | None]:
        """Ask the termination policy whether to stop after ``step``: ``(True, None)``:
        the run ends, its answer written; ``(False, message)``: the step's ``FINAL`` is
        held for one look back (:meth:`look_back`), ``message`` asks for it;
        ``(False, None)``: the run goes on.

        The answer is the step's ``FINAL`` (the host's record, or the text fallback of a
        reply without code), never text the step's code printed.  A policy that stops a
        step without one (a reward threshold, a confidence) ends the run with its own
        answer text, which it made from the model's words (:func:`action_result`), or no
        answer when that is empty; a stop on a ``FINAL(`` written in the model's prose is
        no stop (:func:`~rlm_kernel.engine.step.writes_final`): that FINAL was judged
        already."""
        action = action_result(outcome, step)
        done, policy_answer = self.policy.should_terminate(action, context)
        if done and not outcome.final and writes_final(action.output):
            done = False  # a FINAL in prose that the text fallback did not take
        check = self.look_back(step, outcome, state) if done and outcome.final else None
        if not done or check is not None:
            return False, check
        if outcome.final:
            self.accept(outcome)
        else:  # a policy that stops without FINAL (a reward threshold): its text
            answer = self.redact(policy_answer) \
                if isinstance(policy_answer, str) and policy_answer.strip() else None
            self.result.answer = self.result.answer_value = answer
            self.result.stopped_by = "final"
            self.result.answer_source = self.source(from_text=True)
        return True, None

    def look_back(self, step: int, outcome: StepOutcome, state: LoopState) -> str | None:
        """The message that holds ``step``'s ``FINAL`` for one more step, or None to
        accept it: at most one look back per run (none while one is held), never after
        the last step; the rules: :meth:`FinalChecks.look_back` (the grounding check of a
        top-level run, else ``verify_answer``).  Tells the observer ``answer_check``
        (``reason`` ``"grounding"`` or ``"verify"``)."""
        held = self.checks.look_back(step, outcome, self.result.history) \
            if state.pending is None else None
        if held is None:
            return None
        self.notify(AnswerCheck(step=step, answer=outcome.answer, reason=held.reason,
                                finding=held.finding))
        return held.message

    def accept(self, outcome: StepOutcome) -> None:
        """End the run with ``outcome``'s FINAL as the answer, and say how it was reached
        (:meth:`source`; a FINAL written in prose is taken from text; a ``finish()``:
        ``"finish"``, its diff in ``RLMResult.diff``)."""
        self.result.answer, self.result.answer_value = outcome.answer, outcome.answer_value
        self.result.stopped_by = "final"
        if outcome.finished:  # the answer is the host's diff of the folder
            self.result.answer_source, self.result.diff = "finish", outcome.diff
            return
        self.result.answer_source = self.source(outcome, from_text=not outcome.code)

    def source(self, outcome: StepOutcome | None = None, *, forced: bool = False,
               from_text: bool = False) -> str:
        """How the answer is reached (:meth:`FinalChecks.source`: whether the
        trajectory's code read one of the user's inputs, and whether the grounding check
        finds ``outcome``'s FINAL value; None: no FINAL to check)."""
        return self.checks.source(self.result.history, outcome, forced=forced,
                                  from_text=from_text)


def action_result(outcome: StepOutcome, step: int) -> ActionResult:
    """The :class:`ActionResult` a termination policy sees for one step.

    ``action_type`` is ``"final"`` (output = the answer's text) when the step called
    ``FINAL``/``FINAL_VAR`` (or, without code, wrote one the text fallback took), else
    ``"code"`` with output = the model's own words of the step: its reply outside the
    code blocks (:func:`~rlm_kernel.engine.step.model_words`).  Never the step's output:
    what executed code prints is data (a document may hold ``FINAL(result)``), and a
    pattern found there must neither end the run nor become its answer.  ``error`` is
    the message the model is shown about a failed ``FINAL``, if any.
    ``metadata``: ``step`` (from 1), ``seconds`` (execution time), ``sub_calls``
    (number of ``llm_query`` calls while the code ran), ``output_chars`` (length of the
    whole output), ``success``, and ``confidence`` / ``last_reward`` (floats) when the
    step's code reported them.
    """
    metadata: dict[str, Any] = {"step": step, "seconds": outcome.seconds,
                                "sub_calls": len(outcome.llm_calls),
                                "output_chars": len(outcome.output),
                                "success": outcome.success, **outcome.signals}
    if outcome.final:
        return ActionResult(action_type="final", success=True,
                            output=outcome.answer or "", metadata=metadata)
    return ActionResult(action_type="code", success=outcome.success,
                        output=model_words(outcome.reply_for_history),
                        error=outcome.error_for_model, metadata=metadata)


def policy_context(question: str, step: int, outcome: StepOutcome, *, max_steps: int,
                   namespace: Mapping[str, Any], history: REPLHistory,
                   totals: Mapping[str, Any], seconds: float) -> PolicyContext:
    """The :class:`PolicyContext` a termination policy sees after ``step``.

    ``history``: the run's :class:`~rlm_kernel.repl_types.REPLEntry` list so far (this
    step last); ``variables``: the REPL namespace; ``metrics``: ``steps``,
    ``llm_calls``, ``prompt_tokens``, ``completion_tokens``, ``cost_usd`` (``totals``:
    the ledger's so far, child runs included), ``seconds`` (since the run started),
    ``last_success`` (this step's), and ``last_reward`` / ``confidence`` when this
    step's code reported them (absent otherwise).
    """
    metrics: dict[str, Any] = {**totals, "steps": len(history), "seconds": seconds,
                               "last_success": outcome.success, **outcome.signals}
    return PolicyContext(task=question, step=step, max_steps=max_steps, variables=namespace,
                         history=list(history.entries), metrics=metrics)
