"""Every limit holds whatever model code does (t5, the claims the given cases did not
name): a token or USD budget holds across a batch of sub-calls, child runs and threads,
however many calls fly together and however large their prompts.

The model here spends all it may: it reports each prompt at the most tokens it can cost
(one a byte, :func:`~rlm_kernel.engine.budget.prompt_tokens`) and each completion at the
cap it was sent (100,000 tokens when it was sent none), priced by its prices; a
provider that honours ``max_tokens`` never spends more.  Once through a scripted
client, once through real litellm against a local OpenAI-compatible server that
reports usage the same way.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler

import pytest

from rlm_kernel import RLM
from rlm_kernel.engine.budget import prompt_tokens
from rlm_kernel.models import Completion, LLMCall, TokenPrices
from rlm_kernel.models.prices import token_prices
from tests.fake_provider import send_ok, serve_http
from tests.replies import block
from tests.scripted import SCRIPTED_SETTINGS

from . import helpers
from .helpers import THOUGHT, scripted_run  # noqa: F401 - both executors (conftest)

UNCAPPED = 100_000
"""What the spending model reports for a completion sent no cap."""

PRICES = TokenPrices(prompt_usd=2e-6, completion_usd=8e-6)

# prompts of many sizes: empty, short, long, and text of many bytes a character
SIZES = ["''", "'x'", "'word ' * 60", "'y' * 3000", "'🙂' * 700", "'é' * 1500",
         "'z' * 9000"]


def _batch_step(n: int) -> str:
    """A step that sends ``n`` prompts of mixed sizes in one batch and answers how many
    were answered."""
    sizes = ", ".join(SIZES)
    return (f"sizes = [{sizes}]\n"
            f"prompts = [sizes[i % len(sizes)] + str(i) for i in range({n})]\n"
            "replies = llm_query_batched(prompts)\n"
            "refused = [r for r in replies if r.startswith('Error:')]\n"
            "print(len(refused), 'refused;', refused[:1])\n"
            "FINAL(f'{len(replies) - len(refused)} answered')")


class Spender:
    """A model client that spends all it may (module docstring); 20 ms a call, so the
    calls of a batch are in flight together.

    Args:
        replies: the root model's replies in order (then ``FINAL('out of script')``).
        prices: what its tokens cost (USD).
    """

    model = "spender"

    def __init__(self, replies: list[str], prices: TokenPrices = PRICES) -> None:
        self.replies = list(replies)
        self.token_prices = prices
        self.ledger, self.depth = None, 0
        self.max_tokens = 1_024  # the default completion cap of a run's clients
        self.context_window = None
        self.in_flight = self.most_in_flight = 0
        self._lock = threading.Lock()

    def check(self) -> None:
        pass

    def complete(self, messages, *, role="root", stop=None, max_tokens=None,
                 temperature=None, seed=None) -> Completion:
        with self._lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            text = "ok" if role == "sub" else (
                self.replies.pop(0) if self.replies else "FINAL('out of script')")
        time.sleep(0.02)
        pt, ct = prompt_tokens(messages), UNCAPPED if max_tokens is None else max_tokens
        call = LLMCall(model=self.model, role=role, prompt_tokens=pt, completion_tokens=ct,
                       cost_usd=self.token_prices.cost(pt, ct), depth=self.depth)
        with self._lock:
            self.in_flight -= 1
        if self.ledger is not None:
            self.ledger.record(call)
        return Completion(text=text, call=call)


def _run(replies: list[str], **settings) -> tuple:
    lm = Spender([block(code, THOUGHT) for code in replies])
    rlm = RLM(root_client=lm, sub_client=lm, executor=helpers.EXECUTOR,
              **{**SCRIPTED_SETTINGS, **settings})
    return rlm.run("How many were answered?", context="some data"), lm


def _used(res) -> int:
    return res.prompt_tokens + res.completion_tokens


def _ended_clearly(res) -> None:
    """The run ends with an answer or a clear stop reason, its steps kept."""
    assert res.answer is not None or (res.stopped_by == "budget" and res.error), res
    assert res.steps >= 1 and "internal error" not in str(res.error)


@pytest.mark.parametrize("budget", [7_000, 12_000, 60_000])
@pytest.mark.parametrize("prompts", [16, 64])
def test_a_token_budget_holds_across_a_batch_of_sub_calls(budget, prompts):
    res, lm = _run([_batch_step(prompts)], max_tokens=budget)
    assert _used(res) <= budget, f"{_used(res):,} tokens used under a budget of {budget:,}"
    _ended_clearly(res)
    assert res.llm_calls >= 2  # the root call and at least one sub-call went
    output = res.history.entries[0].output
    if res.answer is not None and not res.answer.startswith(str(prompts)):
        assert "does not fit" in output or "used up" in output, output


def test_a_batch_runs_its_calls_together_while_the_budget_has_room():
    res, lm = _run([_batch_step(16).replace("'z' * 9000", "'z'")], max_tokens=500_000)
    assert res.answer == "16 answered" and _used(res) <= 500_000
    assert lm.most_in_flight > 4  # reservations do not make a roomy batch one by one


@pytest.mark.parametrize("budget", [0.05, 0.12, 0.5])
def test_a_usd_budget_holds_across_a_batch_of_sub_calls(budget):
    res, _ = _run([_batch_step(32)], max_cost_usd=budget)
    assert res.cost_usd <= budget * (1 + 1e-9), f"${res.cost_usd} under ${budget}"
    _ended_clearly(res)
    assert res.llm_calls >= 2


def test_child_runs_share_and_hold_the_budget():
    """Each child's root calls and sub-calls are reserved with the parent's guard.  (One
    child at a time: child runs started from threads of model code wait for the
    parent's step in-process, so they are not run together here.)"""
    child = ("answers = [rlm_query('part %d' % i) for i in range(6)]\n"
             "print(answers)\nFINAL(str(sum(not a.startswith('Error') for a in answers)))")
    res, lm = _run([child] + ["print(llm_query_batched(['c' * 900] * 6))\n"
                              "FINAL('child answer')"] * 6,
                   max_tokens=30_000, max_depth=1, child_max_iterations=1)
    assert _used(res) <= 30_000
    _ended_clearly(res)
    assert res.llm_calls >= 8  # children ran, and their batches, within the budget


def test_candidates_share_and_hold_the_budget():
    res, _ = _run(["print(llm_query_batched(['a' * 2000] * 8))\nFINAL('x')"] * 3,
                  max_tokens=25_000, candidates=3)
    assert _used(res) <= 25_000
    _ended_clearly(res)


# -- the same through litellm and a local OpenAI-compatible server --------------------


@contextmanager
def spending_server():
    """A local server of ``/v1/chat/completions`` that answers the root model with one
    batch step (:func:`_batch_step` of 16) and a sub-call with ``ok``, and reports usage
    as :class:`Spender` does; yields its ``api_base``."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
            messages = body["messages"]
            sub = "Answer the request directly" in messages[0]["content"]
            text = "ok" if sub else block(_batch_step(16), THOUGHT)
            cap = body.get("max_completion_tokens") or body.get("max_tokens") or UNCAPPED
            time.sleep(0.2)  # the calls of a batch overlap
            pt = prompt_tokens(messages)
            send_ok(self, json.dumps({
                "id": "x", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": pt, "completion_tokens": cap,
                          "total_tokens": pt + cap}}).encode(), "application/json")

    httpd = serve_http(Handler)
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def litellm_warm():
    """litellm with its pool of logging threads started, by 32 calls at once outside any
    step: threads that start during a step are taken for model code's and waited for
    after each test (the suite's ``no_stray_threads``)."""
    from concurrent.futures import ThreadPoolExecutor

    from rlm_kernel.models import LiteLLMClient

    with pytest.MonkeyPatch.context() as mp, spending_server() as base:
        mp.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        client = LiteLLMClient("openai/gpt-4o-mini", api_base=base, api_key="sk-test")
        with ThreadPoolExecutor(32) as pool:
            list(pool.map(lambda _: client.complete([{"role": "user", "content": "hi"}],
                                                    max_tokens=1), range(32)))


@pytest.mark.usefixtures("litellm_warm")
@pytest.mark.parametrize("limit", [{"max_tokens": 9_000}, {"max_tokens": 30_000},
                                   {"max_cost_usd": 0.004}, {"max_cost_usd": 0.012}])
def test_budgets_hold_through_litellm_against_a_server_that_reports_usage(limit,
                                                                          monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with spending_server() as base:
        monkeypatch.setenv("OPENAI_API_BASE", base)
        rlm = RLM(model="openai/gpt-4o-mini", executor=helpers.EXECUTOR, **SCRIPTED_SETTINGS,
                  cache=None, **limit)  # every call is sent, and priced
        res = rlm.run("How many were answered?", context="some data")
    if "max_tokens" in limit:
        assert _used(res) <= limit["max_tokens"]
    else:
        assert 0 < res.cost_usd <= limit["max_cost_usd"] * (1 + 1e-9)
    _ended_clearly(res)
    assert res.llm_calls >= 2


def test_a_fleet_or_client_without_known_prices_is_priced_by_the_cost_map(monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from rlm_kernel.models import LiteLLMClient

    mini = token_prices(LiteLLMClient("openai/gpt-4o-mini"))
    assert mini is not None and mini.prompt_usd > 0 and mini.completion_usd > mini.prompt_usd
    assert token_prices(LiteLLMClient("openai/not-a-mapped-model")) is None
    assert token_prices(LiteLLMClient("openai/x", priced=False)) == TokenPrices()
    custom = LiteLLMClient("openai/x", extra={"input_cost_per_token": 1e-3,
                                              "output_cost_per_token": 2e-3})
    assert token_prices(custom) == TokenPrices(1e-3, 2e-3)
