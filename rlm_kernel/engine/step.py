"""One step of the loop: from a model reply to an executed, judged outcome.

Splits the reply into reasoning and code (spec 000's ``extract_code_blocks``),
runs the code in the executor, and turns ``FINAL``/``FINAL_VAR`` (raised in
code, or written in prose when the reply has no code) into an answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..executors import Executor, combined_output
from ..repl_types import REPLResult
from ..termination import (
    detect_final_in_code,
    detect_final_in_text,
    extract_code_blocks,
    format_final_answer,
    resolve_final_var,
)
from .config import RLMConfig
from .tools import RunTools

__all__ = ["SIGNAL_NAMES", "StepOutcome", "run_reply", "split_reply", "step_source"]

#: REPL variables through which model code (or code a caller's task asks for) reports
#: how a step went: their number goes to the termination policy (``RLM_REWARD`` as
#: ``PolicyContext.metrics["last_reward"]``; ``RLM_CONFIDENCE`` as ``"confidence"`` in
#: both ``ActionResult.metadata`` and the metrics).  The host takes (removes) them after
#: every step, so each report counts for the step that made it; a value that is not an
#: ``int``/``float`` (``bool`` included) is dropped unread.
SIGNAL_NAMES: dict[str, str] = {"RLM_REWARD": "last_reward", "RLM_CONFIDENCE": "confidence"}

_FENCE_LINE = re.compile(r"^[ \t]*```", re.MULTILINE)  # a line that opens or closes a block
_IDENT = re.compile(r"^[A-Za-z_]\w*$")


@dataclass
class StepOutcome:
    """What one step did.

    Attributes:
        reply: the model's raw reply.
        reply_for_history: the reply as kept in the conversation (cut after its
            first code block, fence closed).
        reasoning: the prose before the first code block.
        code: the code that ran ("" if none).
        output: stdout and stderr of the code (untruncated).
        success: False when the code raised, timed out, or FINAL_VAR failed.
        seconds: execution time of the code.
        final: True when the step produced the final answer.
        answer: the answer as text (``format_final_answer``); answer_value raw.
        error_for_model: a message to put before the next step line, if any.
        llm_calls: the records of the ``llm_query`` calls that returned while the
            code ran (``prompt``, ``response``, ``model``, ``seconds``); a call a
            timed-out step left running is not counted.
        signals: ``{"last_reward": float, "confidence": float}`` as reported through
            :data:`SIGNAL_NAMES` (either may be absent).
    """

    reply: str
    reply_for_history: str
    reasoning: str = ""
    code: str = ""
    output: str = ""
    success: bool = True
    seconds: float = 0.0
    final: bool = False
    answer: str | None = None
    answer_value: Any = None
    error_for_model: str | None = None
    llm_calls: list[dict[str, Any]] = field(default_factory=list)
    signals: dict[str, float] = field(default_factory=dict)


def split_reply(reply: str, cut_after_first_block: bool) -> tuple[str, list[str], str]:
    """Return (reasoning, code blocks, reply as kept in history)."""
    blocks = extract_code_blocks(reply)
    match = _FENCE_LINE.search(reply)
    reasoning = (reply[: match.start()] if match else reply).strip()
    kept = reply
    if cut_after_first_block and blocks:
        blocks = blocks[:1]
        fences = list(_FENCE_LINE.finditer(reply))
        if len(fences) >= 2:
            end = reply.find("\n", fences[1].start())
            kept = reply[: end if end != -1 else len(reply)]
        else:
            kept = reply.rstrip() + "\n```"
    return reasoning, blocks, kept.rstrip()


def step_source(reasoning: str, code: str) -> str:
    """A step's notebook cell source, the same live (``step_added``) and exported.

    The model's reasoning becomes ``# `` comment lines (a blank line becomes ``#``,
    so paragraphs survive), followed by the code without leading or trailing blank
    lines; with no code, the comments alone.

    Args:
        reasoning: the prose before the reply's first code block.
        code: the code that ran ("" if none).
    """
    comments = [f"# {line}".rstrip() for line in reasoning.strip().splitlines()]
    return "\n".join([*comments, code.strip("\n")] if code.strip() else comments)


def _final_from_text(reply: str, ns: Any) -> tuple[bool, Any, str | None]:
    """FINAL written in prose: (found, value, error).  Accepted only when it cannot
    be a placeholder: a quoted literal, or a name that exists in the REPL."""
    det = detect_final_in_text(reply)
    if not det.detected or det.content is None:
        return False, None, None
    if det.final_type == "variable":
        try:
            return True, resolve_final_var(det.content, ns), None
        except KeyError as exc:
            return False, None, str(exc.args[0])
    raw = det.raw_match or ""
    inner = raw[raw.find("(") + 1:].strip()
    if inner[:1] in "\"'":
        return True, det.content, None
    if _IDENT.match(det.content) and det.content in ns:
        return True, ns[det.content], None
    return False, None, None


def run_reply(reply: str, executor: Executor, tools: RunTools, step: int, cfg: RLMConfig,
              notify: Callable[[str, dict[str, Any]], None], *,
              final_only: bool = False) -> StepOutcome:
    """Execute the code of one reply and judge whether it ended the run.

    Args:
        reply: the model's reply text.
        executor: where the code runs.
        tools: the run's namespace functions (their sub-call records of this step
            become ``outcome.llm_calls``).
        step: 1-based step number (for events).
        cfg: the run's settings (timeout, block cutting).
        notify: ``callable(kind, data)`` for ``step_started``/``step_output`` events.
        final_only: run the code only if it calls FINAL/FINAL_VAR (the last
            "answer now" call).
    """
    reasoning, blocks, kept = split_reply(reply, cfg.cut_after_first_block)
    outcome = StepOutcome(reply=reply, reply_for_history=kept, reasoning=reasoning)
    if not blocks:
        found, value, error = _final_from_text(reply, executor.namespace)
        if found:
            outcome.final, outcome.answer_value = True, value
            outcome.answer = tools.redact(format_final_answer(value))
        outcome.error_for_model = error
        return outcome
    code = "\n\n".join(blocks)
    if final_only and not detect_final_in_code(code).detected:
        return outcome
    outcome.code = code
    notify("step_started", {"step": step, "code": code, "reasoning": reasoning})
    res = _execute(code, executor, tools, step, cfg, notify)
    outcome.output, outcome.success, outcome.seconds = (combined_output(res), res.success,
                                                        res.execution_time)
    outcome.llm_calls = res.llm_calls
    outcome.signals = _take_signals(executor.namespace)
    _judge_final(outcome, res, executor.namespace, tools)
    return outcome


def _execute(code: str, executor: Executor, tools: RunTools, step: int, cfg: RLMConfig,
             notify: Callable[[str, dict[str, Any]], None]) -> REPLResult:
    """Run a step's code under its time limit, streaming ``step_output`` events; the
    result's ``llm_calls`` are the sub-calls that returned while it ran, and its
    ``final_output`` the step's first ``FINAL`` (even one model code swallowed)."""
    def on_output(stream: str, text: str) -> None:
        notify("step_output", {"step": step, "stream": stream, "text": text})

    tools.take_final()  # a FINAL left over from outside this step does not count
    tools.step_calls = calls = []  # this step's llm_query records
    res = executor.execute(code, timeout=cfg.step_timeout, on_output=on_output)
    res.llm_calls = list(calls)
    res.final_output = tools.take_final() or res.final_output
    return res


def _take_signals(ns: Any) -> dict[str, float]:
    """Remove the :data:`SIGNAL_NAMES` variables from ``ns``; their numbers by key."""
    signals: dict[str, float] = {}
    for name, key in SIGNAL_NAMES.items():
        value = ns.pop(name, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            signals[key] = float(value)
    return signals


def _judge_final(outcome: StepOutcome, res: REPLResult, ns: Any, tools: RunTools) -> None:
    """Turn the step's ``FINAL``/``FINAL_VAR`` (if any) into ``outcome``'s answer;
    a ``FINAL_VAR`` of a missing name fails the step and tells the model why."""
    if res.final_output is None:
        return
    try:
        if res.final_output.get("type") == "variable":
            value = resolve_final_var(res.final_output["var"], ns)
        else:
            value = res.final_output.get("answer")
    except KeyError as exc:
        outcome.success = False
        outcome.error_for_model = f"FINAL_VAR failed: {exc.args[0]}"
        return
    if isinstance(value, str):  # the text answer may hold a secret; other types are data
        value = tools.redact(value)
    outcome.final, outcome.answer_value = True, value
    outcome.answer = tools.redact(format_final_answer(value))
