"""What the engine feeds the termination policy and the trajectory each step:
PolicyContext.history/metrics, ActionResult.metadata, and the sub-calls of a step in
REPLResult.llm_calls and the REPLHistory entry (scripted model, both executors)."""

from __future__ import annotations

from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.testing.globalipapp import start_ipython

from rlm_kernel.engine.step import SIGNAL_NAMES
from rlm_kernel.executors import PlainExecutor
from rlm_kernel.jupyter.shell_executor import ShellExecutor
from rlm_kernel.policies import (
    ActionResult,
    PolicyContext,
    PolicyRegistry,
    TerminationPolicy,
)
from rlm_kernel.repl_types import REPLEntry
from tests.replies import block
from tests.scripted import scripted_rlm

SEEN: list[tuple[ActionResult, PolicyContext]] = []


@pytest.fixture()
def recording():
    """A registered policy that records what it is asked and stops on a final action."""

    @PolicyRegistry.register_termination("recording_test")
    class Recording(TerminationPolicy):
        name = "recording_test"

        def should_terminate(self, result, context):
            SEEN.append((result, context))
            return (True, result.output) if result.action_type == "final" else (False, None)

    SEEN.clear()
    yield SEEN
    PolicyRegistry.unregister_termination("recording_test")



REPLIES = [
    block("a = llm_query('one')\nb = llm_query('two')\nprint(a, b)"),
    block("RLM_CONFIDENCE = 0.75\nRLM_REWARD = 0.5\nprint('no calls')"),
    block("FINAL(a)"),
]


def run(executor: Any, replies=REPLIES, **cfg) -> tuple[Any, list]:
    events: list = []
    rlm, _ = scripted_rlm(replies, events=events, **cfg)
    return rlm.run("q?", context="ctx", executor=executor), events


def test_policy_sees_history_and_metrics_each_step(recording):
    res, _ = run(PlainExecutor(), termination="recording_test")
    assert res.stopped_by == "final" and res.answer == "sub:one"
    assert [ctx.step for _, ctx in recording] == [1, 2, 3]
    for step, (action, ctx) in enumerate(recording, start=1):
        assert len(ctx.history) == step and all(isinstance(e, REPLEntry) for e in ctx.history)
        assert ctx.history[-1].code == res.history.entries[step - 1].code
        m = ctx.metrics
        assert m["steps"] == step and m["last_success"] is True
        assert m["llm_calls"] >= step and m["prompt_tokens"] > 0 and m["seconds"] >= 0
        assert {"completion_tokens", "cost_usd"} <= set(m)
        assert action.metadata["step"] == step
        assert action.metadata["seconds"] >= 0 and action.metadata["success"] is True
    first, second, third = (a for a, _ in recording)
    assert first.metadata["sub_calls"] == 2 and first.metadata["output_chars"] > 0
    assert second.metadata["sub_calls"] == 0
    # reported through the namespace, taken by the host for that step only
    assert second.metadata["confidence"] == 0.75
    assert recording[1][1].metrics["last_reward"] == 0.5
    assert recording[1][1].metrics["confidence"] == 0.75
    assert "last_reward" not in recording[0][1].metrics
    assert "confidence" not in third.metadata and "last_reward" not in recording[2][1].metrics
    # the 2nd step's llm_calls metric counts the root calls and both sub-calls
    assert recording[1][1].metrics["llm_calls"] == 2 + 2


def test_signals_are_taken_out_of_the_namespace():
    ex = PlainExecutor()
    run(ex)
    assert not set(SIGNAL_NAMES) & set(ex.namespace)


def test_reward_threshold_policy_stops_on_reported_rewards():
    replies = [block("RLM_REWARD = 0.5"), block("RLM_REWARD = 0.4 + 0.1"), block("FINAL('late')")]
    res, _ = run(PlainExecutor(), replies, termination="reward_threshold",
                 termination_config={"min_reward_threshold": 0.9})
    assert res.steps == 2 and res.stopped_by == "final"
    assert res.answer == "Reward threshold reached: 1.00"


def test_confidence_policy_reads_reported_confidence():
    """The policy's answer is made of the model's words (its reply outside the code),
    never of what the code printed."""
    replies = [block("RLM_CONFIDENCE = 0.99\nprint('x')", "It is x."),
               block("RLM_CONFIDENCE = 0.99\nprint('y')", "It is y."), block("FINAL('z')")]
    res, _ = run(PlainExecutor(), replies, termination="confidence")
    assert res.steps == 2 and res.answer == "It is y."  # min_steps_before_termination = 2


def shell_executor() -> ShellExecutor:
    start_ipython()
    return ShellExecutor(InteractiveShell.instance(), store_history=False)


@pytest.fixture(autouse=True)
def _shell_namespace_left_as_found():
    """A run over the shared shell binds the REPL's names into its namespace (the magic
    lends them for a run only; these tests drive the engine directly): later test
    modules get the shell's namespace back as it was."""
    shell = InteractiveShell.instance() if InteractiveShell.initialized() else None
    before = set(shell.user_ns) if shell is not None else None
    yield
    if InteractiveShell.initialized():
        shell = InteractiveShell.instance()
        for name in set(shell.user_ns) - (before or set(shell.user_ns_hidden)):
            shell.user_ns.pop(name, None)


class Recorded:
    """An executor that keeps every REPLResult the wrapped one returns."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.namespace, self.results = inner, inner.namespace, []
        self.in_process = inner.in_process

    def execute(self, code, **kwargs):
        self.results.append(self.inner.execute(code, **kwargs))
        return self.results[-1]


@pytest.mark.parametrize("make_executor", [PlainExecutor, shell_executor],
                         ids=["plain", "shell"])
def test_sub_calls_are_attributed_to_their_step(make_executor):
    executor = Recorded(make_executor())
    res, events = run(executor)
    assert [len(r.llm_calls) for r in executor.results] == [2, 0, 0]
    outcomes = [e.outcome for e in events if e.kind == "step_finished"]
    assert [len(o.llm_calls) for o in outcomes] == [2, 0, 0]
    assert [len(e.llm_calls) for e in res.history.entries] == [2, 0, 0]
    calls = res.history.entries[0].llm_calls
    assert [c["prompt"] for c in calls] == ["one", "two"]
    assert [c["response"] for c in calls] == ["sub:one", "sub:two"]
    assert executor.results[0].llm_calls == calls
