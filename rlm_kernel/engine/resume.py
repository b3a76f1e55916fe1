"""Continuing a run from one of its steps, possibly with that step's code edited.

The steps before ``from_step`` are taken as they were (their code ran already: in the
kernel, the namespace holds what they made): each becomes a history entry and the
conversation turns the model saw after it (its recorded reply, then the step's output
message).  Step ``from_step`` is then run afresh with the given code (or its recorded
code) in place of a model reply, and the model continues from there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .config import RLMConfig
from .prompts import next_message
from .run_state import RunState
from .step import split_reply

__all__ = ["Continuation", "seed_run"]

_TRACEBACK = "Traceback (most recent call last)"


@dataclass(frozen=True)
class Continuation:
    """Where and how a run continues.

    Attributes:
        previous: the :class:`~rlm_kernel.engine.result.RLMResult` continued.
        from_step: the first step run again (1 = from the start; at most one past
            the previous run's last step).
        code: the code of step ``from_step`` (None: its recorded code; "" for a
            step the previous run never reached: the model is asked instead).
    """

    previous: Any
    from_step: int
    code: str | None = None

    def __post_init__(self) -> None:
        last = len(self.previous.history) + 1
        if not 1 <= self.from_step <= last:
            raise ValueError(f"a run of {last - 1} steps continues from a step in 1..{last}, "
                             f"not {self.from_step}")


def _recorded_reply(previous: Any, step: int, reasoning: str, code: str) -> str:
    """The reply that produced ``step`` (the last top-level root exchange of that
    step), or one rebuilt from its reasoning and code."""
    replies = [e["response"] for e in getattr(previous, "exchanges", [])
               if e.get("step") == step and e.get("role") == "root" and not e.get("depth")]
    if replies:
        return replies[-1]
    return f"{reasoning}\n```repl\n{code}\n```" if code else reasoning


def seed_run(run: RunState, cont: Continuation, cfg: RLMConfig) -> str | None:
    """Fill ``run`` with the steps before ``cont.from_step``: history entries,
    conversation turns and the code already seen.  Returns the reply to use for step
    ``from_step`` instead of asking the model (None: ask the model)."""
    entries = list(cont.previous.history)
    for step, entry in enumerate(entries[: cont.from_step - 1], start=1):
        run.result.history = run.result.history.append(
            reasoning=entry.reasoning, code=entry.code, output=entry.output,
            execution_time=entry.execution_time, llm_calls=entry.llm_calls)
        reply = _recorded_reply(cont.previous, step, entry.reasoning, entry.code)
        run.turns.append({"role": "assistant",
                          "content": split_reply(reply, cfg.cut_after_first_block)[2]})
        text = next_message(entry.code, entry.output, _TRACEBACK not in entry.output,
                            step + 1, cfg.max_iterations, limit=cfg.max_output_chars,
                            question=run.question if cfg.restate_question else None)
        run.turns.append({"role": "user", "content": text})
        if entry.code:
            run.seen_code.setdefault(entry.code, step)
    if cont.from_step > len(entries):
        return None if not cont.code else f"```repl\n{cont.code}\n```"
    entry = entries[cont.from_step - 1]
    code = entry.code if cont.code is None else cont.code
    reasoning = entry.reasoning.strip()
    return f"{reasoning}\n```repl\n{code}\n```" if reasoning else f"```repl\n{code}\n```"
