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

from bench.openai_stub import send_reply, serve_http
from rlm_kernel import RLM
from rlm_kernel.engine.budget import prompt_tokens
from rlm_kernel.models import Completion, LLMCall, TokenPrices
from rlm_kernel.models.prices import token_prices
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


class Counting(Spender):
    """A model client whose provider counts English text as about 4 characters a token
    and answers in 60 tokens: what a real provider reports for the loop's prompts."""

    def complete(self, messages, *, role="root", stop=None, max_tokens=None,
                 temperature=None, seed=None) -> Completion:
        text = "ok" if role == "sub" else (
            self.replies.pop(0) if self.replies else "FINAL('out of script')")
        pt = sum(len(m["content"]) for m in messages) // 4 + 20
        call = LLMCall(model=self.model, role=role, prompt_tokens=pt,
                       completion_tokens=min(60, max_tokens or UNCAPPED), depth=self.depth)
        self.ledger.record(call)
        return Completion(text=text, call=call)


def test_a_token_budget_is_spent_by_what_the_provider_counts_not_lost_to_the_bound():
    """After its first call, a root step's prompt is weighed by the provider's count of
    the messages it repeats (one token a byte for the new ones only), so a budget of
    5,000 tokens runs several steps of a 3,500-character system prompt, and holds."""
    # twenty different lines (not one line with a counter: that is a loop, stopped as stuck)
    words = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima "
             "mike november oscar papa quebec romeo sierra tango").split()
    lm = Counting([block(f"print('{w} line ' * 20)", THOUGHT) for w in words])
    rlm = RLM(root_client=lm, sub_client=lm, executor=helpers.EXECUTOR, max_iterations=20,
              **{**SCRIPTED_SETTINGS, "max_tokens": 5_000})
    res = rlm.run("Go on.", context="some data")
    assert res.stopped_by == "budget" and res.steps >= 3, (res.steps, res.error)
    assert 4_000 < _used(res) <= 5_000


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
            send_reply(self, {  # streamed when asked (root replies are), as OpenAI does
                "id": "x", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": pt, "completion_tokens": cap,
                          "total_tokens": pt + cap}}, body)

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


# -- any value, however deeply nested, is kept or refused with its reason ---------------

DEEP = {
    "list": "x = []\nfor _ in range(100_000):\n    x = [x]",
    "dict": "x = {}\nfor _ in range(100_000):\n    x = {'k': x}",
    "tuple": "x = ()\nfor _ in range(100_000):\n    x = (x,)",
    "holds itself": "x = [1]\nx.append(x)\nd = {'a': x}\nd['d'] = d\nx.append(d)",
    "object graph": "class Node:\n    def __init__(self, child):\n        self.child = child\n"
                    "    def __repr__(self):\n        return f'Node({self.child!r})'\n"
                    "x = None\nfor _ in range(100_000):\n    x = Node(x)",
    "mixed": "x = 'leaf'\nfor i in range(100_000):\n"
             "    x = [x] if i % 3 == 0 else ({'k': x} if i % 3 == 1 else (x,))",
}
"""Values model code builds in a few lines, each beyond any recursive walk's reach."""


def _kept_everywhere(res, tmp_path) -> None:
    """The run's record survives every way out: JSON, the notebook, the rlm JSONL log,
    a batch's result line."""
    from rlm_kernel.batch import ResultsFile, result_line
    from rlm_kernel.export import export_rlm_log, export_run

    assert json.loads(json.dumps(res.to_dict()))["stopped_by"] == res.stopped_by
    export_run(res, tmp_path / "run.ipynb")
    export_rlm_log(res, tmp_path / "run.jsonl")
    with ResultsFile(tmp_path / "results.jsonl") as out:
        assert out.write(result_line("t", res, None))
    assert "internal error" not in str(res.error) and "RecursionError" not in str(res.error)
    for entry in res.history.entries:
        assert "RecursionError" not in entry.output and "internal error" not in entry.output


@pytest.mark.parametrize("final", ["FINAL(x)", "FINAL_VAR('x')"])
@pytest.mark.parametrize("value", DEEP)
def test_a_deep_value_is_kept_as_the_answer(value, final, tmp_path):
    rlm, _ = scripted_run([block(f"{DEEP[value]}\n{final}", THOUGHT)], max_iterations=1)
    res = rlm.run("Build it.", context="some data")
    assert res.stopped_by == "final" and res.answer, (res.stopped_by, res.error)
    assert len(res.answer) < 10_000  # its text, bounded
    _kept_everywhere(res, tmp_path)


@pytest.mark.parametrize("returns", [list, object, {"type": "array"}, "JsonValue"])
@pytest.mark.parametrize("value", DEEP)
def test_a_deep_typed_answer_is_refused_with_its_reason_and_the_run_goes_on(value, returns,
                                                                           tmp_path):
    import pydantic

    returns = pydantic.JsonValue if returns == "JsonValue" else returns
    rlm, _ = scripted_run([block(f"{DEEP[value]}\nFINAL(x)", THOUGHT),
                           block("FINAL([1, 2])", THOUGHT)], max_iterations=2)
    res = rlm.run("Build it.", context="some data", output_type=returns)
    refusal = res.history.entries[0].output
    if value == "object graph" and returns is object and helpers.EXECUTOR == "in-process":
        assert res.stopped_by == "final" and res.answer and res.steps == 1  # kept as is
        _kept_everywhere(res, tmp_path)
        return
    if value == "object graph":  # not a list, or (isolated) an object that stays there
        assert "FINAL not accepted" in refusal
    else:
        assert "nested deeper than 100 levels" in refusal or "contains itself" in refusal, \
            refusal
    assert res.stopped_by == "final" and res.answer_value == [1, 2], (res.stopped_by,
                                                                      res.error)
    _kept_everywhere(res, tmp_path)


def test_a_typed_answer_as_deep_as_the_limit_is_taken_and_one_level_more_refused():
    code = ("x = 'leaf'\nfor _ in range({n}):\n    x = [x]\nFINAL(x)")
    for levels, taken in ((100, True), (101, False)):
        rlm, _ = scripted_run([block(code.format(n=levels), THOUGHT), block("FINAL([])")],
                              max_iterations=2)
        res = rlm.run("Build it.", context="some data", output_type=list)
        assert (res.answer_value != []) is taken, (levels, res.history.entries[0].output)


def test_deep_values_in_the_variables_view_and_the_host_functions():
    """SHOW_VARS, the result's variables, and llm_query / llm_query_batched / rlm_query
    given a deep value: previews are bounded, each call answers or says why it could
    not, the run goes on to its answer."""
    steps = [DEEP["list"] + "\n" + DEEP["dict"].replace("x", "d") + "\nprint(1)",
             "SHOW_VARS()",
             "for call in (lambda: llm_query(x), lambda: llm_query_batched([x, 'ok']),\n"
             "             lambda: rlm_query('look', context=x)):\n"
             "    try:\n        print(str(call())[:80])\n"
             "    except Exception as exc:\n        print('refused:', type(exc).__name__)"]
    rlm, lm = scripted_run([block(s, THOUGHT) for s in steps]
                           + [block("FINAL('child')"), block("FINAL('done')", THOUGHT)],
                           max_iterations=4, max_depth=1, child_max_iterations=1)
    res = rlm.run("Look at x.", context="some data")
    assert res.answer == "done", (res.stopped_by, res.error)
    shown = res.history.entries[1].output
    assert "`x`" in shown and "`d`" in shown and len(shown) < 20_000  # bounded previews
    assert len(res.history.entries[2].output.splitlines()) >= 3  # each call answered
    for entry in res.history.entries:
        assert "RecursionError" not in entry.output and "internal error" not in entry.output


def test_candidates_vote_over_deep_answers():
    rlm, _ = scripted_run([block(f"{DEEP['mixed']}\nFINAL(x)", THOUGHT)] * 3,
                          candidates=3, max_iterations=1)
    res = rlm.run("Build it.", context="some data")
    assert res.stopped_by == "final" and res.answer


def test_the_namespace_keeps_a_deep_value_for_the_next_run():
    from rlm_kernel.executors import close_executor, new_executor

    executor = new_executor(helpers.EXECUTOR)
    try:
        first, _ = scripted_run([block(f"{DEEP['list']}\nFINAL_VAR('x')", THOUGHT)])
        assert first.run("Build it.", context="a", executor=executor).stopped_by == "final"
        code = "n, y = 0, x\nwhile y:\n    n, y = n + 1, y[0]\nFINAL(n)"
        second, _ = scripted_run([block(code, THOUGHT)])
        assert second.run("How deep?", context="a", executor=executor).answer == "100000"
        if helpers.EXECUTOR == "in-process":  # the notebook's variables table
            from rlm_kernel.jupyter.variables_view import VariablesView, variables_from_namespace

            view = VariablesView(title="Variables")
            view.update(variables_from_namespace(executor.namespace, ["x"]))
            assert "[ [ [" in view.static()["text/plain"]
    finally:
        close_executor(executor)


def test_nesting_is_found_without_recursion_in_linear_time():
    from rlm_kernel.engine.answer.nesting import nesting_problem

    x: list = []
    for _ in range(1_000_000):
        x = [x]
    assert nesting_problem(x) == "the answer is nested deeper than 100 levels"
    shared: list = []
    for _ in range(99):
        shared = [shared, shared]  # 2**99 paths: each part is walked once
    assert nesting_problem(shared) is None and nesting_problem([[shared]]) is not None
    cycle: dict = {}
    cycle["me"] = (1, [cycle])
    assert "contains itself" in nesting_problem(cycle)
    key: tuple = ()
    for _ in range(200):
        key = (key,)
    assert nesting_problem({key: 1}) is not None  # dict keys count
    assert nesting_problem("x" * 1000) is None and nesting_problem(3) is None
