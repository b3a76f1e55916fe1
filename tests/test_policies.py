"""Tests for rlm_kernel.policies: every example of the termination-policy spec, plus
registry edge cases."""

from __future__ import annotations

import re
from typing import Any

import pytest

from rlm_kernel.policies import (
    ActionResult,
    CompositeTerminationPolicy,
    ConfidenceTerminationPolicy,
    FinalPatternTerminationPolicy,
    Policy,
    PolicyContext,
    PolicyRegistry,
    RewardThresholdTerminationPolicy,
    TerminationPolicy,
)
from rlm_kernel.policies import base as base_module

BUILTINS = {
    "final_pattern": FinalPatternTerminationPolicy,
    "reward_threshold": RewardThresholdTerminationPolicy,
    "confidence": ConfidenceTerminationPolicy,
    "composite": CompositeTerminationPolicy,
}


def code(output: str, **metadata: Any) -> ActionResult:
    return ActionResult(action_type="code", success=True, output=output, metadata=metadata)


# --- base records and classes ----------------------------------------------------------


def test_records_defaults():
    result = ActionResult(action_type="code")
    assert (result.success, result.output, result.error, result.metadata) == (True, "", None, {})
    ctx = PolicyContext()
    assert (ctx.task, ctx.step, ctx.max_steps, ctx.variables, ctx.history, ctx.metrics) == (
        "", 0, 0, {}, [], {})
    assert PolicyContext().variables is not PolicyContext().variables
    assert base_module.ActionResult is ActionResult and base_module.PolicyContext is PolicyContext


def test_termination_policy_is_abstract():
    assert issubclass(TerminationPolicy, Policy)
    assert (TerminationPolicy.name, TerminationPolicy.description) == (
        "termination_base", "Base termination policy")
    with pytest.raises(TypeError):
        TerminationPolicy()  # type: ignore[abstract]


def test_config_is_merged_over_defaults_and_defaults_are_fresh():
    policy = PolicyRegistry.get_termination("reward_threshold", config={"min_reward_threshold": 0.9})
    assert policy.config == {"min_reward_threshold": 0.9, "max_negative_streak": 3,
                             "require_final_action": False}
    defaults = FinalPatternTerminationPolicy.get_default_config()
    defaults["final_patterns"].append("x")
    assert len(FinalPatternTerminationPolicy.get_default_config()["final_patterns"]) == 3


# --- registry --------------------------------------------------------------------------


def test_builtins_registered_and_default_is_final_pattern():
    assert set(BUILTINS) <= set(PolicyRegistry.list_termination())
    for name, cls in BUILTINS.items():
        policy = PolicyRegistry.get_termination(name)
        assert type(policy) is cls and policy.name == name and policy.description
    assert isinstance(PolicyRegistry.get_termination(), FinalPatternTerminationPolicy)


def test_get_termination_returns_a_new_instance_each_call():
    first = PolicyRegistry.get_termination("reward_threshold")
    second = PolicyRegistry.get_termination("reward_threshold")
    assert first is not second
    first.should_terminate(code("x"), PolicyContext(metrics={"last_reward": 0.7}))
    assert second.should_terminate(code("x"), PolicyContext(metrics={"last_reward": 0.2}))[0] is False


def test_unknown_name_lists_registered_names():
    with pytest.raises(KeyError) as info:
        PolicyRegistry.get_termination("does_not_exist")
    message = str(info.value)
    assert "does_not_exist" in message and all(name in message for name in BUILTINS)
    assert not message.startswith(("'", '"'))
    with pytest.raises(ValueError):
        PolicyRegistry.get_termination("does_not_exist")


def test_register_rejects_non_policies():
    with pytest.raises(TypeError, match="TerminationPolicy subclass"):
        PolicyRegistry.register_termination("bad")(object)  # type: ignore[arg-type]
    assert "bad" not in PolicyRegistry.list_termination()


@pytest.fixture
def clean_registry():
    before = set(PolicyRegistry.list_termination())
    yield
    for name in set(PolicyRegistry.list_termination()) - before:
        PolicyRegistry.unregister_termination(name)


def test_reregistering_a_name_replaces_it(clean_registry):
    @PolicyRegistry.register_termination("always")
    class Always(TerminationPolicy):
        def should_terminate(self, result, context):
            return True, "v1"

    @PolicyRegistry.register_termination("always")
    class AlwaysAgain(TerminationPolicy):
        def should_terminate(self, result, context):
            return True, "v2"

    assert PolicyRegistry.get_termination("always").should_terminate(code(""), PolicyContext()) == (
        True, "v2")


# --- final_pattern ---------------------------------------------------------------------


def test_final_pattern_defaults():
    policy = PolicyRegistry.get_termination("final_pattern")
    assert policy.config == {
        "final_patterns": [
            r"FINAL\s*\(\s*['\"](.+?)['\"]\s*\)",
            r"FINAL\s*\(\s*(.+?)\s*\)",
            r"FINAL_VAR\s*\(\s*['\"](\w+)['\"]\s*\)",
        ],
        "case_sensitive": False,
        "extract_answer": True,
    }


def test_final_pattern_spec_example_final():
    policy = PolicyRegistry.get_termination("final_pattern")
    result = ActionResult(action_type="code", success=True,
                          output="After computing, the answer is FINAL('42')")
    assert policy.should_terminate(result, PolicyContext(task="What is 6*7?")) == (True, "42")


def test_final_pattern_spec_example_final_var_lookup():
    policy = PolicyRegistry.get_termination("final_pattern")
    result = ActionResult(action_type="code", success=True, output="FINAL_VAR('result')")
    context = PolicyContext(task="Compute the sum", variables={"result": 4950})
    assert policy.should_terminate(result, context) == (True, "4950")


def test_final_pattern_final_var_missing_variable_keeps_running():
    policy = FinalPatternTerminationPolicy()
    assert policy.should_terminate(code("FINAL_VAR('nope')"), PolicyContext()) == (False, None)


def test_final_pattern_final_action_and_no_match():
    policy = FinalPatternTerminationPolicy()
    final = ActionResult(action_type="final", output="the answer")
    assert policy.should_terminate(final, PolicyContext()) == (True, "the answer")
    assert policy.should_terminate(code("still working"), PolicyContext()) == (False, None)
    assert policy.should_terminate(code("FINAL(x + 1)"), PolicyContext()) == (True, "x + 1")


def test_final_pattern_case_sensitivity():
    assert FinalPatternTerminationPolicy().should_terminate(code("final('a')"), PolicyContext()) == (
        True, "a")
    strict = FinalPatternTerminationPolicy({"case_sensitive": True})
    assert strict.should_terminate(code("final('a')"), PolicyContext()) == (False, None)
    assert strict.should_terminate(code("FINAL('a')"), PolicyContext()) == (True, "a")


def test_final_pattern_extract_answer_false_returns_whole_output():
    policy = FinalPatternTerminationPolicy({"extract_answer": False})
    assert policy.should_terminate(code("so: FINAL('42')"), PolicyContext()) == (True, "so: FINAL('42')")


def test_final_pattern_custom_patterns_spec_example():
    policy = PolicyRegistry.get_termination("final_pattern", config={
        "final_patterns": [
            r"FINAL\s*\(\s*['\"](.+?)['\"]\s*\)",
            r"ANSWER:\s*(.+?)$",
            r"SOLUTION\s*=\s*(.+?)$",
        ],
        "case_sensitive": False,
        "extract_answer": True,
    })
    ctx = PolicyContext()
    assert policy.should_terminate(code("ANSWER: 42"), ctx) == (True, "42")
    assert policy.should_terminate(code("work...\nsolution = 42\nbye"), ctx) == (True, "42")
    assert policy.should_terminate(code("FINAL(42)"), ctx) == (False, None)  # bare form not listed


def test_final_pattern_accepts_compiled_patterns_and_rejects_bad_regex():
    policy = FinalPatternTerminationPolicy({"final_patterns": [re.compile(r"DONE<(\d+)>")]})
    assert policy.should_terminate(code("DONE<7>"), PolicyContext()) == (True, "7")
    with pytest.raises(re.error):
        FinalPatternTerminationPolicy({"final_patterns": ["FINAL("]})


# --- reward_threshold ------------------------------------------------------------------


def test_reward_threshold_spec_example_and_reset():
    policy = PolicyRegistry.get_termination("reward_threshold")
    assert policy.config["min_reward_threshold"] == 0.8
    stop, answer = policy.should_terminate(
        ActionResult(action_type="code", success=True, output="progress..."),
        PolicyContext(metrics={"last_reward": 0.4}))
    assert (stop, answer) == (False, None)
    stop, answer = policy.should_terminate(
        ActionResult(action_type="code", success=True, output="more progress..."),
        PolicyContext(metrics={"last_reward": 0.5}))
    assert (stop, answer) == (True, "Reward threshold reached: 0.90")
    policy.reset()
    assert policy.should_terminate(code("again"), PolicyContext(metrics={"last_reward": 0.5})) == (
        False, None)


def test_reward_threshold_configured_at_point_nine():
    policy = PolicyRegistry.get_termination("reward_threshold", config={"min_reward_threshold": 0.9})
    assert policy.should_terminate(code(""), PolicyContext(metrics={"last_reward": 0.5}))[0] is False
    assert policy.should_terminate(code(""), PolicyContext(metrics={"last_reward": 0.3}))[0] is False
    assert policy.should_terminate(code(""), PolicyContext(metrics={"last_reward": 0.1}))[0] is True


def test_reward_threshold_negative_streak():
    policy = RewardThresholdTerminationPolicy()
    bad = PolicyContext(metrics={"last_reward": -0.1})
    assert policy.should_terminate(code(""), bad)[0] is False
    assert policy.should_terminate(code(""), bad)[0] is False
    stop, answer = policy.should_terminate(code(""), bad)
    assert stop is True and "3" in answer and "negative" in answer


def test_reward_threshold_streak_resets_on_non_negative_reward_and_can_be_disabled():
    policy = RewardThresholdTerminationPolicy()
    for reward in (-0.1, -0.1, 0.0, -0.1, -0.1):
        assert policy.should_terminate(code(""), PolicyContext(metrics={"last_reward": reward}))[0] is False
    off = RewardThresholdTerminationPolicy({"max_negative_streak": 0})
    for _ in range(10):
        assert off.should_terminate(code(""), PolicyContext(metrics={"last_reward": -1}))[0] is False


def test_reward_threshold_missing_reward_changes_nothing():
    policy = RewardThresholdTerminationPolicy()
    policy.should_terminate(code(""), PolicyContext(metrics={"last_reward": -1}))
    policy.should_terminate(code(""), PolicyContext(metrics={"last_reward": -1}))
    assert policy.should_terminate(code(""), PolicyContext()) == (False, None)
    assert policy.should_terminate(code(""), PolicyContext(metrics={"last_reward": -1}))[0] is True


def test_reward_threshold_require_final_action():
    policy = RewardThresholdTerminationPolicy({"require_final_action": True})
    assert policy.should_terminate(code("x"), PolicyContext(metrics={"last_reward": 1.0}))[0] is False
    final = ActionResult(action_type="final", output="the answer")
    assert policy.should_terminate(final, PolicyContext()) == (True, "the answer")


# --- confidence ------------------------------------------------------------------------


def test_confidence_defaults():
    assert PolicyRegistry.get_termination("confidence").config == {
        "confidence_threshold": 0.85, "min_steps_before_termination": 2,
        "confidence_key": "confidence", "fallback_to_final_pattern": True}


def test_confidence_spec_example():
    policy = PolicyRegistry.get_termination("confidence")
    result = ActionResult(action_type="code", success=True, output="42",
                          metadata={"confidence": 0.99})
    assert policy.should_terminate(result, PolicyContext(step=0)) == (False, None)
    assert policy.should_terminate(result, PolicyContext(step=3)) == (True, "42")
    result2 = ActionResult(action_type="code", success=True,
                           output="I think it might be FINAL('42')", metadata={"confidence": 0.4})
    assert policy.should_terminate(result2, PolicyContext(step=3)) == (True, "42")


def test_confidence_configured_example_and_options():
    policy = PolicyRegistry.get_termination("confidence", config={
        "confidence_threshold": 0.95, "min_steps_before_termination": 3})
    high = code("42", confidence=0.96)
    assert policy.should_terminate(high, PolicyContext(step=2)) == (False, None)
    assert policy.should_terminate(high, PolicyContext(step=3)) == (True, "42")
    assert policy.should_terminate(code("42", confidence=0.9), PolicyContext(step=3)) == (False, None)
    no_fallback = ConfidenceTerminationPolicy({"fallback_to_final_pattern": False,
                                               "confidence_key": "p"})
    assert no_fallback.should_terminate(code("FINAL('1')"), PolicyContext(step=5)) == (False, None)
    assert no_fallback.should_terminate(code("7", p="0.9"), PolicyContext(step=5)) == (True, "7")
    assert no_fallback.should_terminate(code("7", p="high"), PolicyContext(step=5)) == (False, None)


# --- composite -------------------------------------------------------------------------


def test_composite_defaults_and_or_mode():
    policy = PolicyRegistry.get_termination("composite", config={
        "policies": ["final_pattern", "reward_threshold"], "require_all": False})
    assert PolicyRegistry.get_termination("composite").config == {
        "policies": ["final_pattern", "reward_threshold"], "require_all": False}
    assert [type(p) for p in policy.policies] == [FinalPatternTerminationPolicy,
                                                 RewardThresholdTerminationPolicy]
    assert policy.should_terminate(code("FINAL('a')"), PolicyContext()) == (True, "a")
    assert policy.should_terminate(code("x"), PolicyContext(metrics={"last_reward": 0.5})) == (
        False, None)
    assert policy.should_terminate(code("x"), PolicyContext(metrics={"last_reward": 0.5})) == (
        True, "Reward threshold reached: 1.00")
    policy.reset()
    assert policy.should_terminate(code("x"), PolicyContext(metrics={"last_reward": 0.5}))[0] is False


def test_composite_and_mode_spec_example():
    policy = PolicyRegistry.get_termination("composite", config={
        "policies": ["confidence", "final_pattern"], "require_all": True})
    sure = code("sure: FINAL('42')", confidence=0.99)
    assert policy.should_terminate(sure, PolicyContext(step=3)) == (True, "sure: FINAL('42')")
    assert policy.should_terminate(code("42", confidence=0.99), PolicyContext(step=3)) == (
        False, None)
    assert policy.should_terminate(sure, PolicyContext(step=0)) == (False, None)


def test_composite_three_way_or_and_entry_kinds():
    policy = CompositeTerminationPolicy({"policies": [
        "final_pattern", ("confidence", {"min_steps_before_termination": 0}),
        RewardThresholdTerminationPolicy({"min_reward_threshold": 5})]})
    assert policy.should_terminate(code("7", confidence=0.9), PolicyContext()) == (True, "7")
    with pytest.raises(ValueError):
        CompositeTerminationPolicy({"policies": []})
    with pytest.raises(TypeError):
        CompositeTerminationPolicy({"policies": [42]})
    with pytest.raises(KeyError):
        CompositeTerminationPolicy({"policies": ["nope"]})


def test_composite_and_mode_asks_every_policy():
    policy = CompositeTerminationPolicy({"policies": ["final_pattern", "reward_threshold"],
                                         "require_all": True})
    assert policy.should_terminate(code("x"), PolicyContext(metrics={"last_reward": 0.9})) == (
        False, None)
    # the reward policy accumulated during the first call even though the run went on
    assert policy.should_terminate(code("FINAL('done')"), PolicyContext()) == (True, "done")


# --- custom policy: the spec's convergence example -------------------------------------


def test_custom_convergence_policy_registration(clean_registry):
    @PolicyRegistry.register_termination("convergence")
    class ConvergenceTerminationPolicy(TerminationPolicy):
        """Stops once the last few outputs are identical."""

        name = "convergence"
        description = "Stop when outputs converge (stabilize)"

        @classmethod
        def get_default_config(cls) -> dict[str, Any]:
            return {"window_size": 3, "similarity_threshold": 0.9, "min_steps": 3}

        def __init__(self, config=None):
            super().__init__(config)
            self._recent_outputs: list[str] = []

        def should_terminate(self, result, context):
            config = {**self.get_default_config(), **self.config}
            self._recent_outputs.append(result.output or "")
            if context.step < config["min_steps"]:
                return False, None
            window = self._recent_outputs[-config["window_size"]:]
            if len(window) < config["window_size"] or len(set(window)) != 1:
                return False, None
            return True, window[-1]

        def reset(self):
            self._recent_outputs = []

    assert "convergence" in PolicyRegistry.list_termination()
    policy = PolicyRegistry.get_termination("convergence", config={"window_size": 4, "min_steps": 5})
    assert isinstance(policy, ConvergenceTerminationPolicy)
    assert policy.config == {"window_size": 4, "similarity_threshold": 0.9, "min_steps": 5}
    outputs = ["a", "b", "b", "b", "b", "b"]
    decisions = [policy.should_terminate(code(o), PolicyContext(step=i + 1))
                 for i, o in enumerate(outputs)]
    assert decisions[:4] == [(False, None)] * 4  # steps 1-4: below min_steps
    assert decisions[4] == (True, "b")  # step 5: the last four outputs are all "b"
    policy.reset()
    assert policy.should_terminate(code("b"), PolicyContext(step=9)) == (False, None)
    composite = CompositeTerminationPolicy({"policies": ["convergence"]})
    assert isinstance(composite.policies[0], ConvergenceTerminationPolicy)
