"""Base classes and data records shared by RLM policies.

Mirrors ``rlm_code.rlm.policies.base`` from the RLM termination-policy spec: a
:class:`Policy` carries a class-level ``name``/``description`` and a config dict merged
over its defaults; :class:`TerminationPolicy` adds ``should_terminate``. An
:class:`ActionResult` (what a step did) and a :class:`PolicyContext` (where the run is)
are what policies look at.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = ["ActionResult", "Policy", "PolicyContext", "TerminationPolicy"]


@dataclass
class ActionResult:
    """What one step of the agent produced.

    Attributes:
        action_type: kind of action, e.g. ``"code"`` or ``"final"`` (str).
        success: whether the action ran without error.
        output: the text the action produced (stdout, or the final answer).
        error: an error message, or ``None``.
        metadata: free-form extras, e.g. ``{"confidence": 0.9}``.
    """

    action_type: str
    success: bool = True
    output: str = ""
    error: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class PolicyContext:
    """The state of the run a policy is asked about.

    Attributes:
        task: the question being worked on.
        step: the current step number (``int``; the engine numbers steps from 1).
        max_steps: the step budget (``0`` when unknown).
        variables: the REPL namespace, used to resolve ``FINAL_VAR`` names.
        history: earlier steps, in whatever form the engine records them.
        metrics: numbers such as ``{"last_reward": 0.5}``.
    """

    task: str = ""
    step: int = 0
    max_steps: int = 0
    variables: Mapping[str, Any] = field(default_factory=dict)
    history: list[Any] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)


class Policy:
    """Common base of all policies.

    Class attributes ``name`` (registry key) and ``description`` (one line for humans)
    identify a policy. ``self.config`` is ``{**get_default_config(), **config}``: the
    defaults with the caller's keys laid over them.

    Args:
        config: overrides for the defaults (``dict`` or ``None``).
    """

    name: ClassVar[str] = "base"
    description: ClassVar[str] = "Base policy"

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.config: dict[str, Any] = {**self.get_default_config(), **(config or {})}

    @classmethod
    def get_default_config(cls) -> dict[str, Any]:
        """This policy's default configuration (a fresh dict on every call)."""
        return {}

    def reset(self) -> None:
        """Forget any state kept between calls (start of a new episode). No-op here."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(config={self.config!r})"


class TerminationPolicy(Policy, ABC):
    """A policy that decides, after each step, whether the run should stop."""

    name: ClassVar[str] = "termination_base"
    description: ClassVar[str] = "Base termination policy"

    @abstractmethod
    def should_terminate(
        self, result: ActionResult, context: PolicyContext
    ) -> tuple[bool, str | None]:
        """Decide whether to stop after ``result``.

        Args:
            result: the latest step's :class:`ActionResult`.
            context: the run's :class:`PolicyContext`.

        Returns:
            ``(stop, answer)``: ``stop`` is ``True`` to end the run; ``answer`` is the
            final answer text when one could be extracted, else ``None``.
        """
