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

__all__ = ["Continuation", "recorded_reply"]


@dataclass(frozen=True)
class Continuation:
    """Where and how a run continues (taken by :meth:`~rlm_kernel.engine.run.Run.execute`).

    Attributes:
        previous: the :class:`~rlm_kernel.engine.result.RLMResult` continued.
        from_step: the first step run again (1 = from the start; at most one past
            the previous run's last step).
        code: the code of step ``from_step`` (None: its recorded code; "" for a
            step the previous run never reached: the model is asked instead).

    Raises:
        ValueError: ``from_step`` is outside ``1..len(previous.history) + 1``.
    """

    previous: Any
    from_step: int
    code: str | None = None

    def __post_init__(self) -> None:
        last = len(self.previous.history) + 1
        if not 1 <= self.from_step <= last:
            raise ValueError(f"a run of {last - 1} steps continues from a step in 1..{last}, "
                             f"not {self.from_step}")

    def first_reply(self) -> str | None:
        """The reply that stands for step ``from_step`` instead of asking the model: its
        reasoning and its (edited or recorded) code; None: ask the model."""
        entries = list(self.previous.history)
        if self.from_step > len(entries):
            return None if not self.code else f"```repl\n{self.code}\n```"
        entry = entries[self.from_step - 1]
        code = entry.code if self.code is None else self.code
        reasoning = entry.reasoning.strip()
        return f"{reasoning}\n```repl\n{code}\n```" if reasoning else f"```repl\n{code}\n```"


def recorded_reply(previous: Any, step: int, reasoning: str, code: str) -> str:
    """The reply that produced ``step`` of run ``previous`` (the last top-level root
    exchange of that step), or one rebuilt from its reasoning and code."""
    replies = [e["response"] for e in getattr(previous, "exchanges", [])
               if e.get("step") == step and e.get("role") == "root" and not e.get("depth")]
    if replies:
        return replies[-1]
    return f"{reasoning}\n```repl\n{code}\n```" if code else reasoning
