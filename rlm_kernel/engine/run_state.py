"""The state of one run while it goes, and what the loop's steps compute from it: the
text of a root-model call, the policy's view of a step, restoring reserved names."""

from __future__ import annotations

import time
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

from ..executors import Executor
from ..models import LanguageModel, LLMError, UsageLedger
from ..policies import ActionResult, PolicyContext, TerminationPolicy
from ..repl_types import REPLHistory
from .budget import BudgetExceeded, BudgetGuard
from .config import RLMConfig
from .events import Event, Observer, emit
from .prompts import check_answer_message
from .result import RLMResult
from .step import StepOutcome, split_reply
from .tools import RESERVED_NAMES, RunTools

__all__ = ["RunState", "action_result", "check_message", "repeats", "before_traceback", "policy_config", "policy_context",
           "prompt_chars", "reply_text", "restore_names"]

_MISSING = object()


def before_traceback(output: str) -> str:
    """``output`` up to the line that starts a Python or IPython traceback."""
    at = output.find("Traceback (most recent call last)")
    return output if at < 0 else output[: output.rfind("\n", 0, at) + 1]


def reply_text(client: LanguageModel, messages: list[dict[str, str]], **kwargs: Any) -> str:
    """The text of one root-model call.

    Raises:
        LLMError: the client failed in any way (its own exception type and message
            are kept in the text) or returned no text.
    """
    try:
        text = client.complete(messages, **kwargs).text
    except (LLMError, KeyboardInterrupt, BudgetExceeded):
        raise
    except Exception as exc:  # noqa: BLE001 - a client is third-party code
        raise LLMError(f"the model client failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(text, str):
        raise LLMError(f"the model returned no text (got {type(text).__name__})")
    return text


@dataclass
class RunState:
    """The state of one run (or child run) while it goes: what the loop's steps share."""

    question: str
    executor: Executor
    root: LanguageModel
    ledger: UsageLedger
    guard: BudgetGuard
    depth: int
    ns: MutableMapping[str, Any]
    tools: RunTools
    inputs: dict[str, Any]  # protected input variables (empty when not protected)
    reserved: dict[str, Any]  # the reserved names and the run's functions for them
    result: RLMResult
    first: str  # the task message
    prompt_chars: int | None
    policy: TerminationPolicy
    observer: Observer | None
    start: float  # time.perf_counter() when the run started
    turns: list[dict[str, str]] = field(default_factory=list)  # the conversation after `first`
    seen_code: dict[str, int] = field(default_factory=dict)  # code -> first step that ran it
    pending: StepOutcome | None = None  # a FINAL awaiting its check step
    failures: int = 0  # steps in a row that failed or ran no code
    first_step: int = 1  # > 1 when continuing a run (engine.resume)
    forced_reply: str | None = None  # the next step's reply given, not asked for

    def notify(self, kind: str, data: dict[str, Any]) -> None:
        """Tell the observer: ``data`` plus ``depth``, ``elapsed`` (seconds) and, but
        for the frequent ``step_output``, the ledger's ``totals`` (see ``events``)."""
        if self.observer is None:
            return
        base: dict[str, Any] = {"depth": self.depth, "elapsed": time.perf_counter() - self.start}
        if kind != "step_output":  # frequent; totals cost O(calls)
            base["totals"] = self.ledger.totals()
        emit(self.observer, Event(kind, {**base, **data}))


def action_result(outcome: StepOutcome, step: int) -> ActionResult:
    """The :class:`ActionResult` a termination policy sees for one step.

    ``action_type`` is ``"final"`` (output = the answer text) when the step called
    ``FINAL``/``FINAL_VAR``, else ``"code"`` (output = the step's output up to a
    traceback, which echoes the failed line: a ``FINAL`` there is not an answer).
    ``error`` is the message the model is shown about a failed ``FINAL``, if any.
    ``metadata``: ``step`` (from 1), ``seconds`` (execution time), ``sub_calls``
    (number of ``llm_query`` calls while the code ran), ``output_chars`` (length of
    the whole output), ``success``, and ``confidence`` / ``last_reward`` (floats)
    when the step's code reported them (:data:`~rlm_kernel.engine.step.SIGNAL_NAMES`).
    """
    metadata: dict[str, Any] = {"step": step, "seconds": outcome.seconds,
                                "sub_calls": len(outcome.llm_calls),
                                "output_chars": len(outcome.output),
                                "success": outcome.success, **outcome.signals}
    if outcome.final:
        return ActionResult(action_type="final", success=True, output=outcome.answer or "",
                            metadata=metadata)
    return ActionResult(action_type="code", success=outcome.success,
                        output=before_traceback(outcome.output),
                        error=outcome.error_for_model, metadata=metadata)


def policy_context(run: RunState, step: int, outcome: StepOutcome, cfg: RLMConfig) -> PolicyContext:
    """The :class:`PolicyContext` a termination policy sees after ``step``.

    ``history`` is the run's :class:`~rlm_kernel.repl_types.REPLEntry` list so far
    (this step last); ``variables`` the REPL namespace; ``metrics``: ``steps`` (steps
    run), ``llm_calls``, ``prompt_tokens``, ``completion_tokens``, ``cost_usd``
    (the ledger's totals so far, child runs included), ``seconds`` (float, since the
    run started), ``last_success`` (bool: this step's), and ``last_reward`` /
    ``confidence`` (floats) when this step's code reported them; absent otherwise,
    so a reward policy sums only reported rewards.
    """
    metrics: dict[str, Any] = {**run.ledger.totals(), "steps": len(run.result.history),
                               "seconds": time.perf_counter() - run.start,
                               "last_success": outcome.success, **outcome.signals}
    return PolicyContext(task=run.question, step=step, max_steps=cfg.max_iterations,
                         variables=run.ns, history=list(run.result.history.entries),
                         metrics=metrics)


def restore_names(ns: Any, reserved: dict[str, Any], outcome: StepOutcome | None,
             inputs: dict[str, Any]) -> None:
    """Undo rebinding or deletion of reserved names and protected input variables,
    and tell the model in the step's output."""
    broken = [n for n in RESERVED_NAMES if ns.get(n) is not reserved[n]]
    for name in broken:
        ns[name] = reserved[name]
    changed = [n for n, v in inputs.items() if ns.get(n, _MISSING) is not v]
    for name in changed:
        ns[name] = inputs[name]
    if outcome is None:
        return
    notes = []
    if broken:
        notes.append(f"Warning: {', '.join(broken)} {'is' if len(broken) == 1 else 'are'} "
                     "reserved; the original was restored.")
    if changed:
        notes.append(f"Warning: {', '.join(changed)} {'is' if len(changed) == 1 else 'are'} "
                     "the task's input and read-only; the original was restored. "
                     "Store results under a new name.")
    if notes:
        outcome.output = "\n".join([outcome.output.rstrip(), *notes]).lstrip()


def prompt_chars(cfg: RLMConfig, root: LanguageModel) -> int | None:
    """Characters of prompt that fit the root model's context window, if known.

    Estimated at 3 characters a token (code and output tokenise densely),
    leaving room for the completion.
    """
    window = cfg.context_window or getattr(root, "context_window", None)
    if not window:
        return None
    reply = cfg.max_step_tokens or 1024
    return max(2000, (window - reply - 128) * 3)


def policy_config(cfg: RLMConfig) -> dict[str, Any] | None:
    """The policy's config.  ``final_pattern`` defaults to case-sensitive matching
    here: printed data such as ``def final(f):`` must not end a run."""
    if not cfg.termination_config and cfg.termination == "final_pattern":
        return {"case_sensitive": True}
    return cfg.termination_config


def check_message(cfg: RLMConfig, question: str, outcome: StepOutcome,
                  history: REPLHistory, step: int) -> str:
    """The answer check's message: the held FINAL value beside the question and the
    output it came from (this step's, or the previous step's when this one
    printed nothing)."""
    evidence = outcome.output
    if not evidence.strip() and len(history) >= 2:
        evidence = history.entries[-2].output
    return check_answer_message(question, outcome.answer_value, evidence, step + 1,
                                cfg.max_iterations)


def repeats(cfg: RLMConfig, reply: str, seen_code: dict[str, int]) -> bool:
    """True when ``reply``'s code is exactly the code of an earlier step (which
    did not end the run): at temperature 0 a small model that repeats itself
    once usually loops until the step limit."""
    _, blocks, _ = split_reply(reply, cfg.cut_after_first_block)
    code = "\n\n".join(blocks)
    return bool(code) and code in seen_code
