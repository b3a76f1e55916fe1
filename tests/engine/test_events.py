"""Typed events: one frozen dataclass per kind, the observer with one method per kind."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from rlm_kernel import RLM, RLMResult
from rlm_kernel.engine.events import (
    CANDIDATE_EVENTS,
    EVENT_TYPES,
    Event,
    ModelCall,
    ModelWriting,
    RunFinished,
    RunObserver,
    StepFinished,
    StepOutput,
    Totals,
)
from rlm_kernel.engine.step import StepOutcome
from rlm_kernel.models.scripted import ScriptedModel
from tests.replies import block

# The kinds' names, as logs and tests have always read them.
KINDS = {"run_started", "model_call", "model_writing", "step_started", "step_output", "sub_call",
         "step_notice", "step_finished", "answer_check", "run_finished",
         "candidate_started", "candidate_finished"}

STEPS = [block("context = 0\na = llm_query('x')\nprint(a)"), block("FINAL(a)"), block("FINAL(a)")]


def record(observer, **cfg) -> RLMResult:
    """Run the scripted task (a restored input, a sub-call, an answer check) with
    ``observer``; returns the result."""
    n = cfg.get("candidates", 1)
    lm = ScriptedModel(STEPS * n)
    return RLM(root_client=lm, sub_client=lm, observer=observer, verify_answer=True,
               **cfg).run("q?", context="ctx")


def _keeps(name: str) -> typing.Callable[[typing.Any, Event], None]:
    def method(self: typing.Any, event: Event) -> None:
        self.got.append((name, event))
    return method


# A RunObserver that overrides every on_<kind> method: each keeps what it was given.
Recorder = type("Recorder", (RunObserver,), {
    "__init__": lambda self: setattr(self, "got", []),
    **{f"on_{kind}": _keeps(f"on_{kind}") for kind in KINDS}})


def check_fields(events: list[Event], *, candidates: bool) -> None:
    for event in events:
        assert type(event) is EVENT_TYPES[event.kind]
        assert event.depth == 0 and event.elapsed >= 0
        if isinstance(event, (StepOutput, ModelWriting)):  # frequent: no totals
            assert event.totals is None
        else:
            assert event.totals is not None
            assert set(event.totals) == set(typing.get_type_hints(Totals))
        if candidates:
            assert (event.candidate, event.candidates) in {(1, 2), (2, 2)}
        else:
            assert event.candidate is None and event.candidates is None


def test_every_kind_has_a_frozen_dataclass_and_an_observer_method():
    assert set(EVENT_TYPES) == KINDS and CANDIDATE_EVENTS < KINDS
    for kind, cls in EVENT_TYPES.items():
        assert cls.kind == kind and issubclass(cls, Event)
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
        assert "__slots__" in vars(cls)
        method = getattr(RunObserver, f"on_{kind}")
        hints = typing.get_type_hints(method)
        assert hints["event"] is cls, kind  # the method takes its kind's dataclass


def test_a_wrong_or_missing_field_is_an_error_and_events_are_frozen():
    with pytest.raises(TypeError):
        ModelCall(stepp=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ModelCall()  # type: ignore[call-arg]
    event = ModelCall(step=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.step = 3  # type: ignore[misc]
    assert (event.kind, event.depth, event.totals, event.candidate) == ("model_call", 0, None,
                                                                       None)


def test_a_run_reports_each_kind_as_its_dataclass():
    events: list[Event] = []
    res = record(events.append)
    assert res.stopped_by == "final"
    # every kind but a candidates run's own happened here (step_notice: context put back)
    assert {e.kind for e in events} == KINDS - CANDIDATE_EVENTS
    check_fields(events, candidates=False)
    finished = [e for e in events if isinstance(e, StepFinished)]
    assert [e.step for e in finished] == [1, 2, 3]
    assert all(isinstance(e.outcome, StepOutcome) for e in finished)
    # the step's one record: the trajectory's entry is made of it
    for event, entry in zip(finished, res.history.entries, strict=True):
        assert (entry.code, entry.output, entry.llm_calls) == \
            (event.outcome.code, event.outcome.output, event.outcome.llm_calls)
    last = events[-1]
    assert isinstance(last, RunFinished) and last.result is res
    assert (last.answer_source, last.votes) == (res.answer_source, res.votes)


def test_a_candidates_run_adds_its_kinds_and_fields_to_every_event():
    events: list[Event] = []
    res = record(events.append, candidates=2)
    assert res.stopped_by == "final" and len(res.candidates) == 2
    assert {e.kind for e in events} == KINDS
    check_fields(events, candidates=True)


def test_an_observer_subclass_gets_each_kind_in_its_method_and_a_callable_gets_all():
    plain: list[Event] = []
    record(plain.append, candidates=2)
    observer = Recorder()
    record(observer, candidates=2)
    assert [name for name, _ in observer.got] == [f"on_{e.kind}" for e in plain]
    assert {name for name, _ in observer.got} == {f"on_{k}" for k in KINDS}
    assert all(type(event).kind == name[3:] for name, event in observer.got)


def test_a_subclass_overrides_only_what_it_needs():
    class Steps(RunObserver):
        def __init__(self) -> None:
            self.steps: list[int] = []

        def on_step_finished(self, event: StepFinished) -> None:
            self.steps.append(event.step)

    observer = Steps()
    res = record(observer)
    assert observer.steps == [1, 2, 3] and res.steps == 3


def test_data_gives_the_fields_as_observers_of_untyped_events_read_them():
    from rlm_kernel.engine.events import ModelCall, RunStarted

    started = RunStarted(question="q", variables=[], max_iterations=3, model="m",
                         inputs=["context"], no_data=False, depth=1, elapsed=0.5)
    assert started.data == {"question": "q", "variables": [], "max_iterations": 3,
                            "model": "m", "inputs": ["context"], "no_data": False,
                            "mcp_tools": [], "mcp_problems": [], "depth": 1, "elapsed": 0.5}
    call = ModelCall(step=2, totals={"llm_calls": 1, "prompt_tokens": 5,
                                     "completion_tokens": 2, "cost_usd": 0.0},
                     candidate=1, candidates=3)
    assert call.data["step"] == 2 and call.data["candidate"] == 1
    assert call.data["totals"]["llm_calls"] == 1
