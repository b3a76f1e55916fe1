"""Budgets of a run: LLM calls, tokens, US dollars and wall-clock seconds.

A :class:`BudgetGuard` lives in the host (the engine), never in the REPL
namespace, so model code cannot raise its own limits.  It is checked before
every model call, the root model's and every sub-call's; child runs started by
``rlm_query`` share their parent's guard.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from .llm import UsageLedger

__all__ = ["Budget", "BudgetExceeded", "BudgetGuard"]


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits of one run (children included); ``None`` means no limit.

    Attributes:
        max_llm_calls: model requests, root and sub-calls together.
        max_tokens: prompt plus completion tokens over all calls.
        max_cost_usd: US dollars, from litellm's cost map.
        max_seconds: wall-clock seconds since the run started.
    """

    max_llm_calls: int | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    max_seconds: float | None = None


class BudgetExceeded(BaseException):
    """A budget limit was reached.

    A ``BaseException`` so that ``except Exception`` in model code lets it
    through; the engine also remembers it host-side, so even code that
    catches it cannot keep the run going.
    """


class BudgetGuard:
    """Checks a :class:`Budget` against a :class:`UsageLedger` and a start time.

    Args:
        budget: the limits.
        ledger: the calls made so far.
        started: ``time.monotonic()`` at the start of the run.
    """

    def __init__(self, budget: Budget, ledger: UsageLedger, started: float) -> None:
        self.budget = budget
        self.ledger = ledger
        self.started = started
        self.exceeded: str | None = None

    def reason(self) -> str | None:
        """The first limit reached, as a readable phrase, or None."""
        b = self.budget
        if b.max_seconds is not None and time.monotonic() - self.started >= b.max_seconds:
            return f"time budget of {b.max_seconds:g} s used up"
        if b.max_llm_calls is None and b.max_tokens is None and b.max_cost_usd is None:
            return None
        totals = self.ledger.totals()
        if b.max_llm_calls is not None and totals["llm_calls"] >= b.max_llm_calls:
            return f"budget of {b.max_llm_calls} LLM calls used up"
        tokens = totals["prompt_tokens"] + totals["completion_tokens"]
        if b.max_tokens is not None and tokens >= b.max_tokens:
            return f"token budget of {b.max_tokens:,} used up ({tokens:,} tokens)"
        if b.max_cost_usd is not None and totals["cost_usd"] >= b.max_cost_usd:
            return f"cost budget of ${b.max_cost_usd:g} used up (${totals['cost_usd']:.4f})"
        return None

    def check(self) -> None:
        """Raise :class:`BudgetExceeded` (and remember why) if a limit is reached."""
        if self.exceeded is None:
            self.exceeded = self.reason()
        if self.exceeded is not None:
            raise BudgetExceeded(self.exceeded)
