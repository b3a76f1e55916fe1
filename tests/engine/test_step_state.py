"""What one step hands the next (step.LoopState, a value), the run's repetition rule
(judging.Judge) on it, and the namespace a run sets up (session.namespace)."""

from __future__ import annotations

import dataclasses
import time

import pytest

from rlm_kernel.engine.budget import Budget, BudgetGuard
from rlm_kernel.engine.judging import Judge
from rlm_kernel.engine.repl_functions import RESERVED_NAMES, REPLFunctions
from rlm_kernel.engine.result import RLMResult
from rlm_kernel.engine.session.namespace import set_up_namespace
from rlm_kernel.engine.session.task import TaskSpec
from rlm_kernel.engine.step import LoopState, StepOutcome
from rlm_kernel.executors import PlainExecutor
from rlm_kernel.models.scripted import ScriptedModel
from rlm_kernel.models.usage import UsageLedger
from rlm_kernel.policies import PolicyRegistry

CODE = "print(len(context))"


def _step(code: str = CODE, output: str = "12\n", final: bool = False) -> StepOutcome:
    return StepOutcome(reply=f"```repl\n{code}\n```", reply_for_history=f"```repl\n{code}\n```",
                       code=code, output=output, final=final)


def _judge(events: list) -> Judge:
    return Judge(PolicyRegistry.get_termination("final_pattern"), 2, checks=None,
                 result=RLMResult(question="q"), redact=str, notify=events.append)


def test_a_loop_state_is_a_value():
    with pytest.raises(dataclasses.FrozenInstanceError):
        LoopState().failures = 1  # type: ignore[misc]


def test_a_repetition_is_told_once_then_the_run_is_stuck_and_each_state_is_new():
    events: list = []
    judge = _judge(events)
    first = judge.repetition(1, _step(), LoopState())
    assert first == LoopState() and events == []
    told = judge.repetition(2, _step(), first)
    assert told.warned is not None and told.warned.step == 1
    assert told.repeated == told.warned and told.resample and told.stuck is None
    assert first == LoopState()  # the state given is not changed
    stuck = judge.repetition(3, _step(), dataclasses.replace(told, resample=False))
    assert stuck.stuck is not None and stuck.stuck.step == 1
    assert stuck.repeated is None and stuck.warned == told.warned
    assert [(e.step, e.reason) for e in events] == [(2, "repeated"), (3, "stuck")]


def test_a_final_and_a_check_step_are_not_judged_and_a_reply_asked_again_is_told():
    events: list = []
    judge = _judge(events)
    judge.repetition(1, _step(), LoopState())
    again = judge.repeats(f"```repl\n{CODE}\n```", LoopState(), cut_after_first_block=True)
    assert again is not None and again.step == 1  # seen before it runs
    assert judge.repeats(f"```repl\n{CODE}\n```", LoopState(pending=_step()),
                         cut_after_first_block=True) is None
    state = LoopState(asked_again=again)
    assert judge.repetition(2, _step(final=True), state) == LoopState()
    held = LoopState(pending=_step())
    assert judge.repetition(2, _step(), held) == held
    assert events == []
    after = judge.repetition(2, _step(code="print(1)", output="1\n"), state)
    assert after.asked_again is None and after.warned is None
    assert [(e.step, e.reason) for e in events] == [(2, "repeated")]
    assert "was told so and asked again" in events[0].text


def test_the_namespace_binds_inputs_tools_and_functions_and_puts_them_back():
    def parse(text: str) -> int:
        """Count the words."""
        return len(text.split())

    executor = PlainExecutor()
    guard = BudgetGuard(Budget(), UsageLedger(), time.monotonic())
    space = set_up_namespace(
        executor, {"context": "a b c"}, TaskSpec(tools={"parse": parse}),
        functions=lambda ns: REPLFunctions(ScriptedModel([]), guard, ns, depth=0,
                                           max_concurrency=1),
        protect_inputs=True)
    ns = executor.namespace
    assert ns["context"] == "a b c" and ns["parse"]("a b") == 2
    assert ns["parse"] is not parse  # in-process: a copy is lent
    assert all(ns[name] is space.reserved[name] for name in RESERVED_NAMES)
    assert space.user_inputs == {"context", "parse"} and not space.no_data
    executor.execute("context = 'changed'\ndel FINAL\nfound = parse(context)", timeout=10)
    broken, changed, _ = space.restore()
    assert broken == ["FINAL"] and changed == ["context"] and ns["context"] == "a b c"
    assert [v.name for v in space.end_run(100)] == ["found"]
    assert ns["parse"] is parse  # the user's own tool back under its name
