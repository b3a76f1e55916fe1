"""Pluggable policies for the RLM loop (currently: when to stop).

Importing this package registers the built-in termination policies ``final_pattern``,
``reward_threshold``, ``confidence`` and ``composite``; select one with
``PolicyRegistry.get_termination(name, config)`` or register your own with
``@PolicyRegistry.register_termination(name)``.
"""

from __future__ import annotations

from .base import ActionResult, Policy, PolicyContext, TerminationPolicy
from .registry import PolicyRegistry, UnknownPolicyError
from .termination import (
    CompositeTerminationPolicy,
    ConfidenceTerminationPolicy,
    FinalPatternTerminationPolicy,
    RewardThresholdTerminationPolicy,
)

__all__ = [
    "ActionResult",
    "CompositeTerminationPolicy",
    "ConfidenceTerminationPolicy",
    "FinalPatternTerminationPolicy",
    "Policy",
    "PolicyContext",
    "PolicyRegistry",
    "RewardThresholdTerminationPolicy",
    "TerminationPolicy",
    "UnknownPolicyError",
]
