"""What a step is made of: the model's reply split into reasoning and code (the
termination spec's ``extract_code_blocks``), the step's record (:class:`StepOutcome`)
its notebook cell source, and what one step hands the next (:class:`LoopState`).  The
step itself runs in :meth:`rlm_kernel.engine.run.Run._step`; a ``FINAL`` written in
prose is read by :func:`~rlm_kernel.engine.answer.final.final_from_text`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..termination import extract_code_blocks

if TYPE_CHECKING:
    from .repetition import Repetition

__all__ = ["SIGNAL_NAMES", "TRACEBACK_LINE", "LoopState", "StepOutcome", "before_traceback", "model_words",
           "split_reply", "step_source", "writes_final", "writing_source"]

#: REPL variables through which model code (or code a caller's task asks for) reports
#: how a step went: their number goes to the termination policy (``RLM_REWARD`` as
#: ``PolicyContext.metrics["last_reward"]``; ``RLM_CONFIDENCE`` as ``"confidence"`` in
#: both ``ActionResult.metadata`` and the metrics).  The host takes (removes) them after
#: every step, so each report counts for the step that made it; a value that is not an
#: ``int``/``float`` (``bool`` included) is dropped unread.
SIGNAL_NAMES: dict[str, str] = {"RLM_REWARD": "last_reward", "RLM_CONFIDENCE": "confidence"}

TRACEBACK_LINE = "Traceback (most recent call last)"
"""The line that starts a Python or IPython traceback in a step's output."""

_FENCE_LINE = re.compile(r"^[ \t]*```", re.MULTILINE)  # a line that opens or closes a block
_FINAL_CALL = re.compile(r"\bfinal(?:_var)?\s*\(", re.IGNORECASE)  # FINAL(, FINAL_VAR(, any case


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
        answer: the answer as text (:func:`~rlm_kernel.engine.answer.text.answer_text`);
            answer_value: the value itself.
        error_for_model: a message to put before the next step line, if any.
        llm_calls: the records of the ``llm_query`` calls that returned while the
            code ran (``prompt``, ``response``, ``model``, ``seconds``); a call a
            timed-out step left running is not counted.
        signals: ``{"last_reward": float, "confidence": float}`` as reported through
            :data:`SIGNAL_NAMES` (either may be absent).
        names_read: the watched names the code read while it ran
            (``REPLResult.names_read``; None: not recorded).
        finished: the step ended the run with ``finish()`` (then ``final`` too).
        diff: ``finish()``'s diff of the working folder, computed by the host (None:
            not finished, or no diff could be computed).
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
    names_read: frozenset[str] | None = None
    finished: bool = False
    diff: str | None = None


@dataclass(frozen=True)
class LoopState:
    """What one step of the loop hands the next: a value, never changed in place (a step
    returns a new one, :func:`dataclasses.replace`).  The loop starts from
    ``LoopState()`` (a continued run: with ``forced_reply``).

    Attributes:
        warned: the repetition the model was told of (at most one a run); None: none yet.
        repeated: this step's first repetition, told in the next message.
        asked_again: this step's reply repeated an earlier step's code and was sampled
            again before it ran (told in the step's cell).
        resample: the next reply is sampled at ``resample_temperature``.
        stuck: a repetition after the model was told of one: the run stops.
        pending: a step whose ``FINAL`` is held for one look back (the check step).
        failures: steps in a row that failed or ran no code.
        forced_reply: the next step's reply, given (a continued run), not asked for.
    """

    warned: Repetition | None = None
    repeated: Repetition | None = None
    asked_again: Repetition | None = None
    resample: bool = False
    stuck: Repetition | None = None
    pending: StepOutcome | None = None
    failures: int = 0
    forced_reply: str | None = None


def before_traceback(output: str) -> str:
    """``output`` (a step's printed text) up to the line that starts a traceback
    (:data:`TRACEBACK_LINE`); all of it when there is none."""
    at = output.find(TRACEBACK_LINE)
    return output if at < 0 else output[: output.rfind("\n", 0, at) + 1]


def model_words(reply: str) -> str:
    """The model's own words in ``reply`` (a reply as kept in the conversation): its
    text outside fenced code blocks, stripped; the whole reply when it has no block.

    This, never what executed code printed, is what the termination policy is shown of
    a step without a ``FINAL``: a document that holds ``FINAL(x)`` and is printed by
    model code is data, not the model's answer.
    """
    lines, inside = [], False
    for line in reply.splitlines():
        if _FENCE_LINE.match(line):
            inside = not inside
            continue
        if not inside:
            lines.append(line)
    return "\n".join(lines).strip()


def writes_final(text: str) -> bool:
    """True when ``text`` holds something shaped like a ``FINAL(`` or ``FINAL_VAR(``
    call, in any letter case.  A policy that stops on such words of the model is not
    given the last word: a FINAL written in prose is judged by the spec's text
    fallback alone (:func:`~rlm_kernel.engine.answer.final.final_from_text`, a reply
    without code), and a reply with code answers only through the ``FINAL`` its code
    executed."""
    return _FINAL_CALL.search(text) is not None


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


def writing_source(reply: str) -> str:
    """The cell source of a reply being written (:func:`step_source`'s form, so the cell
    does not change shape when the step starts): the prose before its first fence as
    ``# `` comment lines, then what the model wrote after that fence so far, up to a
    closing fence.

    Args:
        reply: the reply so far (a prefix of a root-model reply).
    """
    fences = list(_FENCE_LINE.finditer(reply))
    if not fences:
        return step_source(reply, "")
    start = reply.find("\n", fences[0].start())
    code = "" if start == -1 else reply[start + 1:]
    if len(fences) >= 2:
        code = reply[start + 1:fences[1].start()]
    return step_source(reply[:fences[0].start()], code)

