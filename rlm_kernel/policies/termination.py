"""The built-in termination policies of the RLM termination-policy spec.

``final_pattern`` (the default: ``FINAL(...)``/``FINAL_VAR(...)`` in a step's output),
``reward_threshold`` (cumulative reward, or a streak of negative rewards),
``confidence`` (self-reported confidence, after a minimum number of steps) and
``composite`` (several policies joined with OR or AND). Names, defaults and behaviour
follow that spec; each class registers itself with :class:`PolicyRegistry`.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from ..termination import FINAL_VAR_PATTERNS, POLICY_FINAL_PATTERNS
from .base import ActionResult, PolicyContext, TerminationPolicy
from .registry import PolicyRegistry

__all__ = [
    "CompositeTerminationPolicy",
    "ConfidenceTerminationPolicy",
    "FinalPatternTerminationPolicy",
    "RewardThresholdTerminationPolicy",
]

# A match that is a FINAL_VAR call (in any case) names a variable.
_FINAL_VAR_CALLS = [re.compile(p.pattern, p.flags | re.IGNORECASE) for p in FINAL_VAR_PATTERNS]


@PolicyRegistry.register_termination("final_pattern")
class FinalPatternTerminationPolicy(TerminationPolicy):
    """Stop when a step's output contains ``FINAL(...)`` or ``FINAL_VAR(...)``.

    Config (defaults from the spec): ``final_patterns`` (regex strings or compiled
    patterns, tried in order; string patterns get ``re.MULTILINE``, plus
    ``re.IGNORECASE`` unless ``case_sensitive``), ``case_sensitive`` (``False``),
    ``extract_answer`` (``True``: answer = the first capture group, else the whole
    output).

    The default patterns are :data:`rlm_kernel.termination.POLICY_FINAL_PATTERNS`.
    An action of type ``"final"`` stops at once with its output as the answer. A match
    that is a ``FINAL_VAR`` call (:data:`~rlm_kernel.termination.FINAL_VAR_PATTERNS`,
    any letter case) names a variable: its ``str`` value from
    ``context.variables`` is the answer; if no such variable exists the run goes on.

    Raises:
        re.error: at construction, if a pattern is not a valid regular expression.
    """

    name: ClassVar[str] = "final_pattern"
    description: ClassVar[str] = "Stop on FINAL(...) / FINAL_VAR(...) in the output"

    @classmethod
    def get_default_config(cls) -> dict[str, Any]:
        return {
            "final_patterns": list(POLICY_FINAL_PATTERNS),
            "case_sensitive": False,
            "extract_answer": True,
        }

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        flags = re.MULTILINE | (0 if self.config["case_sensitive"] else re.IGNORECASE)
        self._patterns = [
            p if isinstance(p, re.Pattern) else re.compile(p, flags)
            for p in self.config["final_patterns"]
        ]

    def should_terminate(
        self, result: ActionResult, context: PolicyContext
    ) -> tuple[bool, str | None]:
        if result.action_type == "final":
            return True, result.output
        text = result.output or ""
        for pattern in self._patterns:
            m = pattern.search(text)
            if m is None:
                continue
            if not self.config["extract_answer"]:
                return True, text
            answer = (m.group(1) if pattern.groups else None) or m.group(0)
            if _names_variable(m.group(0)):
                if answer not in context.variables:
                    return False, None
                return True, str(context.variables[answer])
            return True, answer.strip()
        return False, None


def _names_variable(matched: str) -> bool:
    """True when a pattern's match is a ``FINAL_VAR`` call, by the termination module's
    own ``FINAL_VAR_PATTERNS`` (any letter case)."""
    return any(p.match(matched.lstrip()) for p in _FINAL_VAR_CALLS)


@PolicyRegistry.register_termination("reward_threshold")
class RewardThresholdTerminationPolicy(TerminationPolicy):
    """Stop once the summed reward reaches a threshold, or after a run of bad rewards.

    Stateful: rewards are read from ``context.metrics["last_reward"]`` on every call
    (steps without that key change nothing) and summed until :meth:`reset`.

    Config (defaults from the spec): ``min_reward_threshold`` (``0.8``),
    ``max_negative_streak`` (``3``; ``0`` or ``None`` disables it),
    ``require_final_action`` (``False``; if ``True`` the threshold only stops a
    ``"final"`` action). The answer is a final action's output, else a
    ``"Reward threshold reached: 0.90"`` style summary.
    """

    name: ClassVar[str] = "reward_threshold"
    description: ClassVar[str] = "Stop when cumulative reward reaches a threshold"

    @classmethod
    def get_default_config(cls) -> dict[str, Any]:
        return {"min_reward_threshold": 0.8, "max_negative_streak": 3,
                "require_final_action": False}

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        self._cumulative_reward = 0.0
        self._negative_streak = 0

    def should_terminate(
        self, result: ActionResult, context: PolicyContext
    ) -> tuple[bool, str | None]:
        reward = context.metrics.get("last_reward")
        if reward is not None:
            reward = float(reward)
            self._cumulative_reward += reward
            self._negative_streak = self._negative_streak + 1 if reward < 0 else 0
        is_final = result.action_type == "final"
        if self._cumulative_reward >= self.config["min_reward_threshold"] and (
            is_final or not self.config["require_final_action"]
        ):
            if is_final and result.output:
                return True, result.output
            return True, f"Reward threshold reached: {self._cumulative_reward:.2f}"
        limit = self.config["max_negative_streak"]
        if limit and self._negative_streak >= limit:
            return True, f"Stopped after {self._negative_streak} negative rewards in a row"
        return False, None

    def reset(self) -> None:
        self._cumulative_reward = 0.0
        self._negative_streak = 0


@PolicyRegistry.register_termination("confidence")
class ConfidenceTerminationPolicy(TerminationPolicy):
    """Stop when the step reports enough confidence, but never before a minimum step.

    Config (defaults from the spec): ``confidence_threshold`` (``0.85``),
    ``min_steps_before_termination`` (``2``; while ``context.step`` is below it the
    answer is always "go on"), ``confidence_key`` (``"confidence"``, read from
    ``result.metadata``; missing or non-numeric counts as no confidence),
    ``fallback_to_final_pattern`` (``True``: below the threshold, ask a default
    :class:`FinalPatternTerminationPolicy`). The answer is the step's output.
    """

    name: ClassVar[str] = "confidence"
    description: ClassVar[str] = "Stop when reported confidence reaches a threshold"

    @classmethod
    def get_default_config(cls) -> dict[str, Any]:
        return {"confidence_threshold": 0.85, "min_steps_before_termination": 2,
                "confidence_key": "confidence", "fallback_to_final_pattern": True}

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        self._fallback = FinalPatternTerminationPolicy()

    def should_terminate(
        self, result: ActionResult, context: PolicyContext
    ) -> tuple[bool, str | None]:
        if context.step < self.config["min_steps_before_termination"]:
            return False, None
        raw = result.metadata.get(self.config["confidence_key"])
        try:
            confidence = float(raw) if raw is not None else None
        except (TypeError, ValueError):
            confidence = None
        if confidence is not None and confidence >= self.config["confidence_threshold"]:
            return True, result.output
        if self.config["fallback_to_final_pattern"]:
            return self._fallback.should_terminate(result, context)
        return False, None


@PolicyRegistry.register_termination("composite")
class CompositeTerminationPolicy(TerminationPolicy):
    """Combine termination policies with OR (default) or AND.

    Config (defaults from the spec): ``policies`` (``["final_pattern",
    "reward_threshold"]``; each entry a registered name, a ``(name, config)`` pair or a
    policy instance), ``require_all`` (``False``: the first policy that stops wins and
    later ones are not asked; ``True``: every policy is asked each step and the run
    stops only if all agree, with the first non-``None`` answer).

    Raises:
        ValueError: at construction, if ``policies`` is empty.
        UnknownPolicyError: at construction, for an unregistered name.
        TypeError: at construction, for an entry of another kind.
    """

    name: ClassVar[str] = "composite"
    description: ClassVar[str] = "Combine several termination policies (OR / AND)"

    @classmethod
    def get_default_config(cls) -> dict[str, Any]:
        return {"policies": ["final_pattern", "reward_threshold"], "require_all": False}

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        if not self.config["policies"]:
            raise ValueError("a composite termination policy needs at least one policy")
        self.policies: list[TerminationPolicy] = [_build(s) for s in self.config["policies"]]

    def should_terminate(
        self, result: ActionResult, context: PolicyContext
    ) -> tuple[bool, str | None]:
        if not self.config["require_all"]:
            for policy in self.policies:
                stop, answer = policy.should_terminate(result, context)
                if stop:
                    return True, answer
            return False, None
        decisions = [policy.should_terminate(result, context) for policy in self.policies]
        if all(stop for stop, _ in decisions):
            return True, next((a for _, a in decisions if a is not None), None)
        return False, None

    def reset(self) -> None:
        for policy in self.policies:
            policy.reset()


def _build(spec: Any) -> TerminationPolicy:
    """A sub-policy from a registered name, a ``(name, config)`` pair or an instance."""
    if isinstance(spec, TerminationPolicy):
        return spec
    if isinstance(spec, str):
        return PolicyRegistry.get_termination(spec)
    if isinstance(spec, (tuple, list)) and len(spec) == 2 and isinstance(spec[0], str):
        return PolicyRegistry.get_termination(spec[0], spec[1])
    raise TypeError(f"cannot build a termination policy from {spec!r}")
