"""Budgets of a run: LLM calls, tokens, US dollars and wall-clock seconds.

A :class:`BudgetGuard` lives in the host (the engine), never in the REPL
namespace, so model code cannot raise its own limits.  Every model call, the root
model's and every sub-call's, is a :class:`Reservation` held from before it is sent
until its usage is in the ledger: what it may spend (one call; its prompt's tokens at
most plus its completion cap; their price) is set aside, its completion cap is cut to
what is left, and what it did not spend is given back when it returns.  So calls in
flight together (``llm_query_batched``, candidates, threads of model code) never spend
more than the budget between them, however many they are and however large their
prompts.  Child runs started by ``rlm_query`` and a run's candidates share their
parent's guard, hence its reservations.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, replace
from typing import Any

from ..executors import is_quarantined
from ..models import (
    CallOptions,
    ClientWrapper,
    Completion,
    LanguageModel,
    TokenPrices,
    UsageLedger,
    token_prices,
)

__all__ = ["Budget", "BudgetExceeded", "BudgetGuard", "BudgetedClient", "CHARS_PER_TOKEN",
           "MESSAGE_TOKENS", "PromptBound", "REQUEST_TOKENS", "Reservation", "prompt_tokens"]

CHARS_PER_TOKEN = 4
"""Characters of English text per token on average in the providers' tokenizers: for
estimates shown to people, never for a limit (model code picks its prompts' text)."""

MESSAGE_TOKENS = 8
"""Tokens a chat template adds per message at most: OpenAI's chat format adds 3 ("How
to count tokens with tiktoken", OpenAI Cookbook), ChatML (Qwen) and Llama 3 add 5
(``<|im_start|>role\\n ... <|im_end|>\\n``; ``<|start_header_id|>role<|end_header_id|>
\\n\\n ... <|eot_id|>``)."""

REQUEST_TOKENS = 32
"""Tokens a chat template adds per request at most: the reply's header (3 to 5 tokens in
the formats above) and a default system prompt some templates insert when a request has
none (Qwen2.5's, about 20 tokens)."""

_WAIT_SLICE = 0.25  # seconds between looks at the clock and at close() while waiting


def _text(message: dict[str, Any]) -> str:
    """A message's content as text (a content that is not text: its JSON text)."""
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content, default=str)


def _message_tokens(message: dict[str, Any]) -> int:
    """The most tokens one message can cost: its UTF-8 bytes plus :data:`MESSAGE_TOKENS`."""
    return MESSAGE_TOKENS + len(_text(message).encode("utf-8", "surrogatepass"))


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """The most tokens ``messages`` can cost as a prompt, in tokens: one per UTF-8 byte
    of their text (a byte-level BPE tokenizer, as GPT-2's and its heirs' (Radford et
    al. 2019: cl100k, o200k, Qwen2, Llama 3), never makes more tokens than bytes, nor
    does SentencePiece with byte fallback), plus :data:`MESSAGE_TOKENS` per message and
    :data:`REQUEST_TOKENS`.  A content that is not text counts as its JSON text."""
    return REQUEST_TOKENS + sum(_message_tokens(m) for m in messages)


class PromptBound:
    """The most tokens a prompt can cost, tightened by what the provider counted.

    A chat template puts special tokens between messages, so each message is tokenized
    on its own and a prompt's tokens are the sum of its messages' plus the template's:
    a prompt that repeats messages of an earlier one whose tokens the provider reported
    (a root step repeats the system prompt, the task and the earlier turns) costs at
    most that report plus its new messages at one token a byte
    (:func:`prompt_tokens`), a message it dropped only lowering it.  The bound is the
    least of that over the last few prompts and of :func:`prompt_tokens` itself.

    Args:
        remembered: how many earlier prompts (with their reported tokens) are kept.
    """

    def __init__(self, remembered: int = 4) -> None:
        self._known: deque[tuple[Counter[tuple[str, str]], int]] = deque(maxlen=remembered)
        self._lock = threading.Lock()

    @staticmethod
    def _keys(messages: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
        return Counter((str(m.get("role", "")), _text(m)) for m in messages)

    def tokens(self, messages: list[dict[str, Any]]) -> int:
        """The most tokens ``messages`` can cost as a prompt."""
        best = prompt_tokens(messages)
        with self._lock:
            known = list(self._known)
        if not known:
            return best
        keys = self._keys(messages)
        cost = {key: _message_tokens({"role": key[0], "content": key[1]}) for key in keys}
        for earlier, reported in known:
            extra = sum(cost[key] * (n - earlier.get(key, 0)) for key, n in keys.items()
                        if n > earlier.get(key, 0))
            best = min(best, reported + extra)
        return best

    def learn(self, messages: list[dict[str, Any]], reported: int) -> None:
        """Remember that the provider counted ``messages`` as ``reported`` prompt tokens
        (a report of 0, no usage given, is not kept)."""
        if reported > 0:
            keys = self._keys(messages)
            with self._lock:
                self._known.append((keys, int(reported)))


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


@dataclass(frozen=True, slots=True)
class Reservation:
    """What one model call may spend, set aside by :meth:`BudgetGuard.begin_call` and
    given back by :meth:`BudgetGuard.end_call` once its usage is in the ledger.

    Attributes:
        cap: the completion cap to send, in tokens (None: the provider's own, when no
            token or USD budget bounds it).
        tokens: tokens set aside (the prompt's most plus ``cap``; 0 without a token
            budget).
        usd: US dollars set aside (the price of ``tokens``; 0 without a USD budget or
            without known prices).
        thread: the thread that holds it (``threading.get_ident()``).
    """

    cap: int | None
    tokens: int = 0
    usd: float = 0.0
    thread: int = 0


class BudgetExceeded(BaseException):
    """A budget limit was reached.

    A ``BaseException`` so that ``except Exception`` in model code lets it
    through; the engine also remembers it host-side, so even code that
    catches it cannot keep the run going.
    """


class BudgetGuard:
    """Checks a :class:`Budget` against a :class:`UsageLedger`, a start time and the
    :class:`Reservation` of every call in flight.

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
        self._reserved_tokens = 0
        self._reserved_usd = 0.0
        self._held: dict[int, int] = {}  # thread id -> reservations it holds
        self._lock = threading.Lock()
        self._released = threading.Condition(self._lock)

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
        with self._released:
            self._released.notify_all()

    def seconds_left(self) -> float | None:
        """Seconds of ``max_seconds`` left (at least 0), or None without a time budget."""
        if self.budget.max_seconds is None:
            return None
        return max(0.0, self.budget.max_seconds - (time.monotonic() - self.started))

    def reserved(self) -> tuple[int, int, float]:
        """What the calls in flight hold: ``(calls, tokens, usd)``."""
        with self._lock:
            return self._in_flight, self._reserved_tokens, self._reserved_usd

    def _room(self, prompt: int, prices: TokenPrices | None,
              others: bool) -> tuple[int | None, str | None]:
        """Completion tokens a call of ``prompt`` tokens can be given (None: no limit
        bounds them), with what is reserved by the calls in flight counted (``others``)
        or not; or ``(0, why)`` when its prompt alone does not fit.  Called with the
        lock held."""
        b, totals = self.budget, self.ledger.totals()
        room: int | None = None
        if b.max_tokens is not None:
            left = b.max_tokens - totals["prompt_tokens"] - totals["completion_tokens"] \
                - (self._reserved_tokens if others else 0)
            if prompt >= left:
                return 0, (f"token budget of {b.max_tokens:,}: a prompt of up to {prompt:,} "
                           f"tokens (one a byte), with its reply, does not fit in the "
                           f"{max(0, int(left)):,} left")
            room = int(left - prompt)
        if b.max_cost_usd is not None and prices is not None:
            left_usd = b.max_cost_usd - totals["cost_usd"] - (self._reserved_usd if others else 0)
            prompt_usd = prices.cost(prompt)
            slack = 1e-12 * b.max_cost_usd  # sums of prices in binary floating point
            fits = prompt_usd <= left_usd + slack if prices.completion_usd == 0 else \
                prompt_usd + prices.completion_usd <= left_usd + slack
            if not fits:
                return 0, (f"cost budget of ${b.max_cost_usd:g}: a call of a prompt of up "
                           f"to {prompt:,} tokens (${prompt_usd:.6f}) and its reply does "
                           f"not fit in the ${max(0.0, left_usd):.6f} left")
            if prices.completion_usd > 0:
                usd_room = math.floor((left_usd + slack - prompt_usd) / prices.completion_usd)
                room = usd_room if room is None else min(room, usd_room)
        return room, None

    def begin_call(self, max_tokens: int | None, prompt: int = 0,
                   prices: TokenPrices | None = None) -> Reservation:
        """Reserve one call before it is sent: what it may spend is set aside until
        :meth:`end_call`.

        The call counts against ``max_llm_calls`` while in flight.  With a token budget
        it sets aside ``prompt`` plus its completion cap, and the cap is cut to what is
        left after the prompt and after what the calls in flight hold; with a USD budget
        and ``prices``, the same in USD.  A call that would get less than its own cap
        because of calls in flight waits for them to give back what they did not spend;
        one whose prompt does not fit in what is left with nothing in flight is
        refused.  A call after :meth:`close`, or from a thread an earlier step left
        running (:func:`~rlm_kernel.executors.thread_output.is_quarantined`), is
        refused: it would be spent outside the run's steps and records.

        Args:
            max_tokens: the caller's own completion cap in tokens (None = provider
                default).
            prompt: the most tokens the prompt can cost (:func:`prompt_tokens`).
            prices: the model's prices (:func:`~rlm_kernel.models.prices.token_prices`),
                or None (unknown: nothing set aside in USD, the ledger prices its calls
                at 0).

        Returns:
            The :class:`Reservation`; its ``cap`` is the completion cap to send.

        Raises:
            BudgetExceeded: a limit is reached, the call's prompt does not fit in what
                is left, the run is over, or the caller is a thread left running by an
                earlier step; nothing is reserved.
        """
        if self.closed:
            raise BudgetExceeded("the run is over: no more model calls")
        if is_quarantined():
            raise BudgetExceeded("a thread that an earlier step left running may not "
                                 "call the model")
        me = threading.get_ident()
        with self._released:
            while True:
                if self.closed:
                    raise BudgetExceeded("the run is over: no more model calls")
                self.check()
                _, why = self._room(prompt, prices, others=False)
                if why is not None:  # it does not fit even with nothing in flight
                    raise BudgetExceeded(why)
                now, why = self._room(prompt, prices, others=True)
                if why is None and (now is None or max_tokens is not None and max_tokens <= now):
                    cap = max_tokens  # its own cap fits beside the calls in flight
                elif self._in_flight > self._held.get(me, 0):
                    self._released.wait(_WAIT_SLICE)  # for calls in flight to give back
                    continue
                elif why is not None:  # only this thread's own calls hold the rest
                    raise BudgetExceeded(why)
                else:
                    cap = now if max_tokens is None or now is None else min(max_tokens, now)
                return self._reserve(me, cap, prompt, prices)

    def _reserve(self, me: int, cap: int | None, prompt: int,
                 prices: TokenPrices | None) -> Reservation:
        """Set a call's reservation aside (the lock held)."""
        b = self.budget
        tokens = prompt + (cap or 0) if b.max_tokens is not None else 0
        usd = prices.cost(prompt, cap or 0) \
            if b.max_cost_usd is not None and prices is not None else 0.0
        self._in_flight += 1
        self._reserved_tokens += tokens
        self._reserved_usd += usd
        self._held[me] = self._held.get(me, 0) + 1
        return Reservation(cap, tokens, usd, me)

    def end_call(self, reservation: Reservation | None = None) -> None:
        """Give back ``reservation`` (the ledger has the call now, or it failed) and
        wake the calls waiting for room.

        Args:
            reservation: what :meth:`begin_call` returned; None for a call counted but
                holding nothing (callers written before reservations).
        """
        with self._released:
            self._in_flight -= 1
            if reservation is not None:
                self._reserved_tokens -= reservation.tokens
                self._reserved_usd -= reservation.usd
                held = self._held.get(reservation.thread, 0) - 1
                if held > 0:
                    self._held[reservation.thread] = held
                else:
                    self._held.pop(reservation.thread, None)
            if self._in_flight == 0:  # no drift from float sums
                self._reserved_tokens, self._reserved_usd = 0, 0.0
            self._released.notify_all()


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
        self._prices: TokenPrices | None | bool = False  # False: not looked up yet
        self.prompts = PromptBound()

    def prices(self) -> TokenPrices | None:
        """The model's prices for a USD budget (looked up once, only when the run has
        one: :func:`~rlm_kernel.models.prices.token_prices`), else None."""
        if self._guard.budget.max_cost_usd is None:
            return None
        if self._prices is False:
            self._prices = token_prices(self._client)
        return self._prices  # type: ignore[return-value]

    def call(self, messages: list[dict[str, str]], options: CallOptions) -> Completion:
        """One call, reserved before it is sent and given back after
        (:meth:`BudgetGuard.begin_call`: counted, its prompt weighed at its most
        (:class:`PromptBound`, which then learns the provider's count of it), its
        completion capped at what is left beside the calls in flight); see
        ``LanguageModel.complete``.

        Every call is streamed, a sub-call too (its pieces go to ``options.stream`` when
        there is one): after each piece is handed on, the run must still be on (its
        guard not closed: it returned, was stopped or failed) and within
        ``max_seconds``; else :class:`BudgetExceeded` ends the request, so a model server
        stops generating a reply nobody will read (a sub-call in flight when the user
        stops the run, in a thread of the host that the stop does not reach).

        Raises:
            BudgetExceeded: the budget is used up, or this call does not fit in what
                is left (no call is made), or the run ended while the model wrote.
            LLMError: the call failed.
        """
        reservation = self._guard.begin_call(
            options.max_tokens if options.max_tokens is not None else self.max_tokens,
            self.prompts.tokens(messages), self.prices())
        guard, handed = self._guard, options.stream

        def while_wanted(piece: str) -> None:
            if handed is not None:
                handed(piece)  # first: a reply cut here keeps this piece (ReplyStream)
            if guard.seconds_left() == 0:
                guard.check()  # remembers why, and raises
            if guard.closed:
                raise BudgetExceeded("the run is over: the model's reply is not read")

        try:
            completion = super().call(messages, replace(
                options, max_tokens=reservation.cap, stream=while_wanted))
        finally:
            self._guard.end_call(reservation)
        self.prompts.learn(messages, completion.call.prompt_tokens)
        return completion
