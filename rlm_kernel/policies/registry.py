"""Name-based registry of termination policies.

Built-in policies register themselves when :mod:`rlm_kernel.policies` is imported; user
code adds its own with the :meth:`PolicyRegistry.register_termination` decorator and
then selects any policy by name, as in the RLM termination-policy spec.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from .base import TerminationPolicy

__all__ = ["PolicyRegistry", "UnknownPolicyError"]

_T = TypeVar("_T", bound=type[TerminationPolicy])


class UnknownPolicyError(KeyError, ValueError):
    """No policy is registered under the requested name.

    A ``KeyError`` (a lookup miss) and a ``ValueError`` (a bad configuration value), so
    either ``except`` clause catches it. The message lists the registered names.
    """

    def __str__(self) -> str:  # KeyError would otherwise show the message in quotes
        return str(self.args[0]) if self.args else ""


class PolicyRegistry:
    """Class-level map from a policy name to its class; never instantiated."""

    _termination: ClassVar[dict[str, type[TerminationPolicy]]] = {}

    @classmethod
    def register_termination(cls, name: str) -> Callable[[_T], _T]:
        """Class decorator registering a :class:`TerminationPolicy` subclass as ``name``.

        Registering a name again replaces the earlier class (so re-running a notebook
        cell that defines a policy works).

        Raises:
            TypeError: if the decorated object is not a ``TerminationPolicy`` subclass.
        """

        def decorator(policy_cls: _T) -> _T:
            if not (isinstance(policy_cls, type) and issubclass(policy_cls, TerminationPolicy)):
                raise TypeError(
                    f"register_termination({name!r}) expects a TerminationPolicy subclass, "
                    f"got {policy_cls!r}"
                )
            cls._termination[name] = policy_cls
            return policy_cls

        return decorator

    @classmethod
    def unregister_termination(cls, name: str) -> None:
        """Remove ``name`` from the registry; unknown names are ignored."""
        cls._termination.pop(name, None)

    @classmethod
    def get_termination(
        cls, name: str = "final_pattern", config: dict[str, Any] | None = None
    ) -> TerminationPolicy:
        """A new instance of the policy registered as ``name``, configured with ``config``.

        Every call returns a fresh object, so stateful policies never share state.

        Raises:
            UnknownPolicyError: (a ``KeyError`` and ``ValueError``) if ``name`` is not
                registered; the message lists the names that are.
        """
        try:
            policy_cls = cls._termination[name]
        except KeyError:
            raise UnknownPolicyError(
                f"unknown termination policy {name!r}; registered: "
                f"{', '.join(cls.list_termination()) or '(none)'}"
            ) from None
        return policy_cls(config)

    @classmethod
    def list_termination(cls) -> list[str]:
        """The registered termination policy names, sorted."""
        return sorted(cls._termination)
