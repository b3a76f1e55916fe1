"""Budgets of a run: LLM calls, tokens, US dollars and wall-clock seconds.

A :class:`BudgetGuard` lives in the host (the engine), never in the REPL
namespace, so model code cannot raise its own limits.  It is checked before
every model call, the root model's and every sub-call's; child runs started by
``rlm_query`` share their parent's guard.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from ..executors import is_quarantined
from ..models import ClientWrapper, Completion, LanguageModel, UsageLedger

__all__ = ["Budget", "BudgetExceeded", "BudgetGuard", "BudgetedClient", "CHARS_PER_TOKEN",
           "prompt_tokens"]

CHARS_PER_TOKEN = 4
"""Characters counted as one token when a prompt is weighed before it is sent (the
usual average of English text in the providers' tokenizers)."""


def prompt_tokens(messages: list[dict[str, str]]) -> int:
    """The tokens ``messages`` are estimated to cost as a prompt: their text's
    characters over :data:`CHARS_PER_TOKEN`."""
    return sum(len(m["content"]) for m in messages
               if isinstance(m.get("content"), str)) // CHARS_PER_TOKEN


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
        self.closed = False  # the run is over: no more calls (see close)
        self._in_flight = 0
        self._lock = threading.Lock()

    def reason(self) -> str | None:
        """The first limit reached, as a readable phrase, or None."""
        b = self.budget
        if self.seconds_left() == 0:
            return f"time budget of {b.max_seconds:g} s used up"
        if b.max_llm_calls is None and b.max_tokens is None and b.max_cost_usd is None:
            return None
        totals = self.ledger.totals()
        if b.max_llm_calls is not None and \
                totals["llm_calls"] + self._in_flight >= b.max_llm_calls:
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

    def overspent(self) -> str | None:
        """Why the run is past a limit that the guarded path never crosses (more
        calls than ``max_llm_calls``: model code called a client around the
        guard), or None.  Remembered like :meth:`check`'s reason."""
        b = self.budget
        if b.max_llm_calls is not None and self.ledger.totals()["llm_calls"] > b.max_llm_calls:
            self.exceeded = self.exceeded or (
                f"budget of {b.max_llm_calls} LLM calls used up (calls were made "
                "around the budget check)")
        return self.exceeded

    def close(self) -> None:
        """End the run's spending: every later call is refused (:meth:`begin_call`),
        whoever makes it (a thread model code left running, a client kept from the
        run)."""
        self.closed = True

    def seconds_left(self) -> float | None:
        """Seconds of ``max_seconds`` left (at least 0), or None without a time budget."""
        if self.budget.max_seconds is None:
            return None
        return max(0.0, self.budget.max_seconds - (time.monotonic() - self.started))

    def begin_call(self, max_tokens: int | None, prompt: int = 0) -> int | None:
        """Reserve one call before it is sent; return its completion cap in tokens.

        Calls in flight count against ``max_llm_calls``, so concurrent calls (a
        batch) cannot all pass the check before any of them is recorded.  With a
        token budget the prompt's tokens count before the call is sent (a prompt that
        does not fit in the tokens left is not sent), and the completion cap is at
        most the tokens left after it.  A call after :meth:`close`,
        or from a thread an earlier step left running
        (:func:`~rlm_kernel.executors.thread_output.is_quarantined`), is refused: it
        would be spent outside the run's steps and records.

        Args:
            max_tokens: the caller's own completion cap (None = provider default).
            prompt: the prompt's estimated tokens (:func:`prompt_tokens`).

        Raises:
            BudgetExceeded: a limit is reached, the run is over, or the caller is a
                thread left running by an earlier step; nothing is reserved.
        """
        if self.closed:
            raise BudgetExceeded("the run is over: no more model calls")
        if is_quarantined():
            raise BudgetExceeded("a thread that an earlier step left running may not "
                                 "call the model")
        with self._lock:
            self.check()
            self._in_flight += 1
            if self.budget.max_tokens is None:
                return max_tokens
            totals = self.ledger.totals()
            left = self.budget.max_tokens - totals["prompt_tokens"] - totals["completion_tokens"]
            if prompt >= left:
                self._in_flight -= 1
                raise BudgetExceeded(
                    f"token budget of {self.budget.max_tokens:,}: a prompt of about "
                    f"{prompt:,} tokens does not fit in the {max(0, int(left)):,} left")
            left = max(1, int(left - prompt))
            return left if max_tokens is None else min(max_tokens, left)

    def end_call(self) -> None:
        """Release the reservation of :meth:`begin_call` (the ledger has the call now)."""
        with self._lock:
            self._in_flight -= 1


class BudgetedClient(ClientWrapper):
    """A :class:`~rlm_kernel.models.LanguageModel` whose every call asks a
    :class:`BudgetGuard` first: the budget holds for model code that reaches the
    client itself (``llm_query.__self__.sub_client.complete(...)``), not only for
    the namespace functions.  Budgets only: a run's clients are this wrapper composed
    with redaction, recording and tracing
    (:func:`~rlm_kernel.engine.services.compose_client`).

    Args:
        client: the model client to hold to the budget.
        guard: the run's budget guard.
    """

    def __init__(self, client: LanguageModel, guard: BudgetGuard) -> None:
        super().__init__(client)
        self._guard = guard

    def complete(self, messages: list[dict[str, str]], *, role: str = "root",
                 stop: list[str] | None = None, max_tokens: int | None = None,
                 temperature: float | None = None, seed: int | None = None) -> Completion:
        """One call, reserved before it is sent and released after
        (:meth:`BudgetGuard.begin_call`: counted, its prompt weighed, its completion
        capped at the tokens left); see ``LanguageModel.complete``.

        Raises:
            BudgetExceeded: the budget is used up (no call is made).
            LLMError: the call failed.
        """
        cap = self._guard.begin_call(max_tokens if max_tokens is not None
                                     else self.max_tokens, prompt_tokens(messages))
        try:
            return super().complete(messages, role=role, stop=stop, max_tokens=cap,
                                    temperature=temperature, seed=seed)
        finally:
            self._guard.end_call()
