"""The budget guard's reservations (rlm_kernel.engine.budget): calls in flight together
never spend more than the budget between them; a call's completion cap is cut to what
is left; what a call did not spend is given back; a prompt that cannot fit is refused."""

from __future__ import annotations

import random
import threading
import time

import pytest

from rlm_kernel.engine.budget import (
    MESSAGE_TOKENS,
    REQUEST_TOKENS,
    Budget,
    BudgetExceeded,
    BudgetGuard,
    prompt_tokens,
)
from rlm_kernel.models import LLMCall, TokenPrices, UsageLedger

PRICES = TokenPrices(prompt_usd=1e-6, completion_usd=4e-6, request_usd=1e-5)


def _spend(guard: BudgetGuard, ledger: UsageLedger, prompt: int, cap: int | None,
           prices: TokenPrices | None, share: float, outcome: list[str]) -> None:
    """One call as a provider would make it: reserve, spend ``share`` of the cap (1.0:
    all of it; a provider never passes the cap it is sent), record, give back."""
    try:
        reservation = guard.begin_call(cap, prompt, prices)
    except BudgetExceeded as exc:
        outcome.append(f"refused: {exc}")
        return
    try:
        assert reservation.cap is not None and reservation.cap >= 1
        time.sleep(random.uniform(0, 0.004))
        completion = max(1, int(reservation.cap * share))
        cost = prices.cost(prompt, completion) if prices else 0.0
        ledger.record(LLMCall(model="m", role="sub", prompt_tokens=prompt,
                              completion_tokens=completion, cost_usd=cost))
        outcome.append("sent")
    finally:
        guard.end_call(reservation)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("limit", ["tokens", "usd", "both"])
def test_calls_in_flight_together_never_pass_the_budget(seed, limit):
    rng = random.Random(seed)
    budget = Budget(max_tokens=rng.choice([1_000, 5_000, 40_000]) if limit != "usd" else None,
                    max_cost_usd=rng.choice([0.002, 0.01, 0.05]) if limit != "tokens" else None)
    ledger = UsageLedger()
    guard = BudgetGuard(budget, ledger, time.monotonic())
    outcome: list[str] = []
    threads = [threading.Thread(target=_spend, args=(
        guard, ledger, rng.choice([1, 50, 400, 900, 3_000, 20_000]),
        rng.choice([None, 1, 256, 1_024, 8_192]), PRICES, rng.choice([0.1, 1.0]), outcome))
        for _ in range(rng.choice([2, 16, 64]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    totals = ledger.totals()
    if budget.max_tokens is not None:
        assert totals["prompt_tokens"] + totals["completion_tokens"] <= budget.max_tokens
    if budget.max_cost_usd is not None:
        assert totals["cost_usd"] <= budget.max_cost_usd * (1 + 1e-9)
    assert len(outcome) == len(threads)
    assert all(o == "sent" or "does not fit" in o or "used up" in o for o in outcome)
    assert guard.reserved() == (0, 0, 0.0)  # all given back


def test_a_cap_is_cut_to_what_is_left_and_given_back_when_unspent():
    ledger = UsageLedger()
    guard = BudgetGuard(Budget(max_tokens=1_000), ledger, time.monotonic())
    first = guard.begin_call(1_024, 100)
    assert first.cap == 900 and first.tokens == 1_000
    ledger.record(LLMCall(model="m", role="sub", prompt_tokens=100, completion_tokens=50))
    guard.end_call(first)
    second = guard.begin_call(1_024, 100)  # 150 spent: 750 left after its prompt
    assert second.cap == 750
    guard.end_call(second)


def test_a_call_waits_for_calls_in_flight_to_give_back_then_gets_its_cap():
    ledger = UsageLedger()
    guard = BudgetGuard(Budget(max_tokens=3_000), ledger, time.monotonic())
    first = guard.begin_call(1_000, 500)  # 1,500 held
    got: list[int | None] = []
    waiter = threading.Thread(target=lambda: got.append(guard.begin_call(1_000, 1_000).cap))
    waiter.start()
    time.sleep(0.3)
    assert not got  # 1,500 left beside the first: less than its 2,000
    ledger.record(LLMCall(model="m", role="sub", prompt_tokens=500, completion_tokens=10))
    guard.end_call(first)  # gives back 990
    waiter.join(5)
    assert got == [1_000]


def test_a_prompt_that_cannot_fit_is_refused_and_the_run_not_stopped():
    guard = BudgetGuard(Budget(max_tokens=1_000), UsageLedger(), time.monotonic())
    with pytest.raises(BudgetExceeded, match="does not fit in the 1,000 left"):
        guard.begin_call(10, 1_000)
    assert guard.exceeded is None  # a smaller prompt may still go
    guard.end_call(guard.begin_call(10, 100))


def test_a_usd_budget_caps_the_completion_by_its_price():
    guard = BudgetGuard(Budget(max_cost_usd=0.01), UsageLedger(), time.monotonic())
    reservation = guard.begin_call(None, 1_000, PRICES)
    # $0.01 - $0.00001 a request - 1,000 x $0.000001 = $0.00899 -> 2,247 tokens at $4e-6
    assert reservation.cap == 2_247 and reservation.usd <= 0.01
    guard.end_call(reservation)


def test_a_prompt_is_weighed_at_one_token_a_byte():
    messages = [{"role": "system", "content": "abc"}, {"role": "user", "content": "é🙂"}]
    assert prompt_tokens(messages) == REQUEST_TOKENS + 2 * MESSAGE_TOKENS + 3 + 2 + 4


def test_waiting_ends_when_the_run_is_closed():
    guard = BudgetGuard(Budget(max_tokens=2_000), UsageLedger(), time.monotonic())
    held = guard.begin_call(1_000, 500)
    errors: list[str] = []

    def wait() -> None:
        try:
            guard.begin_call(1_000, 500)
        except BudgetExceeded as exc:
            errors.append(str(exc))

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.3)
    guard.close()
    waiter.join(5)
    assert errors == ["the run is over: no more model calls"]
    guard.end_call(held)


def test_a_prompt_that_repeats_counted_messages_is_weighed_by_the_providers_count():
    from rlm_kernel.engine.budget import PromptBound

    bound = PromptBound()
    system = {"role": "system", "content": "You answer questions. " * 200}  # 4,400 bytes
    task = {"role": "user", "content": "The task."}
    first = [system, task]
    assert bound.tokens(first) == prompt_tokens(first)  # nothing counted yet: a byte each
    bound.learn(first, 1_150)  # the provider counted it
    reply = {"role": "assistant", "content": "🙂" * 10}
    output = {"role": "user", "content": "Output: 42"}
    second = [system, task, reply, output]
    assert bound.tokens(second) == 1_150 + 2 * MESSAGE_TOKENS + 40 + 10
    assert bound.tokens([system, output]) == 1_150 + MESSAGE_TOKENS + 10  # task dropped
    assert bound.tokens([{"role": "user", "content": "x"}]) == prompt_tokens(
        [{"role": "user", "content": "x"}])  # less than any earlier report plus it
    bound.learn(second, 0)  # no usage reported: nothing learned
    assert bound.tokens(second) == 1_150 + 2 * MESSAGE_TOKENS + 40 + 10
