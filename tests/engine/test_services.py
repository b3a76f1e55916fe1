"""A run's shared services (rlm_kernel.engine.services): the composition of a run's model
clients (redaction, record, budget, trace, in that order), services derived for a child
run and for a candidate, and the loop running on them (scripted models)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from rlm_kernel.engine import repl_functions
from rlm_kernel.engine.budget import Budget, BudgetExceeded, BudgetGuard, Reservation
from rlm_kernel.engine.config import RLMConfig
from rlm_kernel.engine.repl_functions import REPLFunctions
from rlm_kernel.engine.replay.recording import Recorder
from rlm_kernel.engine.services import RunServices, compose_client
from rlm_kernel.models import UsageLedger, tracing
from rlm_kernel.models.scripted import ScriptedModel
from tests.replies import block
from tests.scripted import scripted_rlm

SECRET = "sk-test-0123456789abcdefSECRET"
HI = [{"role": "user", "content": f"the key is {SECRET}"}]


class _Guard(BudgetGuard):
    """A budget guard that logs its reservations."""

    def __init__(self, log: list[str], budget: Budget | None = None) -> None:
        super().__init__(budget or Budget(), UsageLedger(), 0.0)
        self.log = log

    def begin_call(self, *args: Any, **kwargs: Any) -> Reservation:
        self.log.append("budget: begin")
        return super().begin_call(*args, **kwargs)

    def end_call(self, *args: Any, **kwargs: Any) -> None:
        self.log.append("budget: end")
        super().end_call(*args, **kwargs)


class _Recorder(Recorder):
    """A recorder that logs what it records."""

    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log

    def record(self, role: str, messages: list[dict[str, str]], text: str,
               depth: int) -> None:
        self.log.append("record")
        super().record(role, messages, text, depth)


@pytest.fixture()
def spans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The log, with ``tracing.chat_span`` replaced by one that logs its opening and
    closing (``TracedClient`` opens it through the module)."""
    log: list[str] = []

    @contextlib.contextmanager
    def chat_span(model: str, role: str = "root", depth: int = 0) -> Iterator[None]:
        log.append(f"span: open {role}")
        try:
            yield None
        finally:
            log.append("span: close")

    monkeypatch.setattr(tracing, "chat_span", chat_span)
    return log


def test_a_call_passes_redaction_record_budget_and_trace_in_the_documented_order(
        spans: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    log = spans
    lm = ScriptedModel([lambda messages: log.append("client: call") or "reply"])
    guard, recorder = _Guard(log), _Recorder(log)
    client = compose_client(lm, guard, recorder)
    completion = client.complete(HI, role="root")
    assert completion.text == "reply"
    assert log == ["budget: begin", "span: open root", "client: call", "span: close",
                   "budget: end", "record"]
    # redacted before anything else: the provider, the record and the budget's weighing
    assert SECRET not in str(lm.calls) and "[redacted OPENAI_API_KEY]" in str(lm.calls)
    assert SECRET not in str(recorder.root_prompts) and recorder.exchanges[0]["response"] == \
        "reply"
    assert client.model == "scripted" and client.ledger is lm.ledger


def test_a_call_the_budget_refuses_is_neither_sent_traced_nor_recorded(
        spans: list[str]) -> None:
    log = spans
    lm = ScriptedModel(["one", "two"])
    guard = _Guard(log, Budget(max_llm_calls=1))
    lm.ledger = guard.ledger
    client = compose_client(lm, guard, _Recorder(log))
    client.complete(HI)
    log.clear()
    with pytest.raises(BudgetExceeded, match="1 LLM calls"):
        client.complete(HI)
    assert log == ["budget: begin"]
    assert len(lm.calls) == 1


def test_a_failed_call_is_released_and_not_recorded(spans: list[str]) -> None:
    log = spans
    lm = ScriptedModel([RuntimeError("provider down")])
    client = compose_client(lm, _Guard(log), _Recorder(log))
    with pytest.raises(Exception, match="provider down"):
        client.complete(HI)
    assert log == ["budget: begin", "span: open root", "span: close", "budget: end"]


def test_the_services_compose_each_client_once_and_are_frozen() -> None:
    lm, other = ScriptedModel([]), ScriptedModel([])
    services = RunServices.start(RLMConfig(), lm, lm, Budget())
    assert services.root_client is services.sub_client  # one client, one wrapper chain
    assert lm.ledger is services.ledger and services.guard.ledger is services.ledger
    apart = RunServices.start(RLMConfig(), lm, other, Budget())
    assert apart.root_client is not apart.sub_client and other.ledger is apart.ledger
    with pytest.raises(dataclasses.FrozenInstanceError):
        services.recorder = Recorder()  # type: ignore[misc]


def test_a_derived_services_shares_what_it_does_not_replace() -> None:
    lm = ScriptedModel(["a", "b"])
    services = RunServices.start(RLMConfig(), lm, lm, Budget())
    child = dataclasses.replace(services, config=services.config.replace(max_iterations=2))
    assert (child.ledger, child.guard, child.recorder, child.root) == \
        (services.ledger, services.guard, services.recorder, services.root)
    assert child.root_client is not services.root_client  # composed again, same chain
    child.root_client.complete(HI)
    assert len(services.recorder.exchanges) == 1 and len(services.ledger.calls) == 1
    mine = dataclasses.replace(services, recorder=Recorder())
    mine.root_client.complete(HI)
    assert len(mine.recorder.exchanges) == 1  # its own exchanges only ...
    assert len(services.recorder.exchanges) == 1  # ... not the parent's
    assert len(services.ledger.calls) == 2  # the ledger is shared


def test_a_child_run_shares_the_ledger_the_guard_and_the_recorder() -> None:
    child_steps = [block("print(len(context))"), block("FINAL('inner')")]
    rlm, _ = scripted_rlm([block("print(rlm_query('look', context='abc'))"), *child_steps,
                           block("FINAL('outer')")], executor="in-process")
    res = rlm.run("q", context="x")
    assert res.answer == "outer" and "inner" in res.history.entries[0].output
    assert res.llm_calls == 4  # the child's two calls are in the one ledger
    assert [e["response"] for e in res.exchanges] == [
        block("print(rlm_query('look', context='abc'))"), *child_steps,
        block("FINAL('outer')")]  # and in the one record


def test_a_child_run_spends_the_parents_budget() -> None:
    rlm, _ = scripted_rlm([block("print(rlm_query('look', context='abc'))")]
                          + [block("print(1)"), block("print(2)"), block("print(3)")] * 3,
                          executor="in-process", max_llm_calls=3, child_max_iterations=5)
    res = rlm.run("q", context="x")
    assert res.stopped_by == "budget" and "3 LLM calls" in res.error
    assert res.llm_calls == 3 and res.steps == 1


def _answer(value: str) -> str:
    return block(f"x = {value}\nFINAL_VAR('x')")


def test_a_candidates_recorder_holds_only_its_own_exchanges() -> None:
    rlm, _ = scripted_rlm([_answer("41"), _answer("42")], candidates=2,
                          candidates_early_stop=False)
    res = rlm.run("q", context="x")
    assert [c["answer"] for c in res.candidates] == ["41", "42"]
    chosen = next(c["index"] for c in res.candidates if c["chosen"])
    assert res.exchanges == [{"step": 1, "role": "root", "depth": 0,
                              "response": _answer("41" if chosen == 1 else "42")}]
    assert res.llm_calls == 2  # the ledger is the run's


def test_llm_query_with_another_model_is_composed_like_the_runs_clients(
        monkeypatch: pytest.MonkeyPatch) -> None:
    other = ScriptedModel([], sub_replies=["from the other model"])
    monkeypatch.setattr(repl_functions, "make_client", lambda model, **kw: other)
    lm = ScriptedModel([])
    services = RunServices.start(RLMConfig(), lm, lm, Budget(max_llm_calls=1))
    ns: dict[str, Any] = {}
    functions = REPLFunctions(services.sub_client, services.guard, ns, depth=0,
                              max_concurrency=1, compose=services.compose)
    assert functions.llm_query("hello", model="openai/other") == "from the other model"
    assert services.recorder.exchanges[0]["response"] == "from the other model"
    assert len(services.ledger.calls) == 1 and services.ledger.calls[0].role == "sub"
    with pytest.raises(BudgetExceeded):  # its client asks the guard itself
        functions._clients["openai/other"].complete(HI, role="sub")
    assert len(other.calls) == 1
