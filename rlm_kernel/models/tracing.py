"""OpenTelemetry spans of a run, after the GenAI semantic conventions: the run is an
``invoke_agent`` span, each step's code an ``execute_tool`` span, each model call a
``chat`` span (with tokens and USD), nested as they happen.

Off unless a run's ``callbacks`` setting names ``otel`` (``c.RLM.callbacks = "otel"``);
other names in it (``"langfuse"``, ...) turn on litellm's own callbacks of that name.
When off, the span helpers cost one boolean test and opentelemetry is never imported.

Attribute names: ``gen_ai.operation.name``, ``gen_ai.agent.name``,
``gen_ai.request.model``, ``gen_ai.tool.name``, ``gen_ai.usage.input_tokens``,
``gen_ai.usage.output_tokens`` (OpenTelemetry's GenAI conventions); ``rlm.cost_usd``
(USD, litellm's price map), ``rlm.step``, ``rlm.role``, ``rlm.depth`` are ours.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["enable", "enabled", "span", "usage_attributes"]

_state: dict[str, Any] = {"on": False, "tracer": None, "provider": None}


def enabled() -> bool:
    """True when spans are being recorded."""
    return bool(_state["on"])


def enable(callbacks: list[str], tracer_provider: Any = None) -> None:
    """Turn on tracing for the names in ``callbacks``.

    Args:
        callbacks: callback names; ``"otel"`` records this module's spans (through
            ``tracer_provider``, default OpenTelemetry's global one); any other name
            is added to ``litellm.callbacks`` (litellm's integrations).
        tracer_provider: an ``opentelemetry.sdk.trace.TracerProvider`` (tests use one
            with an in-memory exporter); kept for later calls that give none.

    Raises:
        ImportError: ``otel`` asked for without opentelemetry-api installed.
    """
    names = [n.strip() for n in callbacks if n and n.strip()]
    if "otel" in names:
        from opentelemetry import trace

        if tracer_provider is not None:
            _state["provider"] = tracer_provider
        provider = _state["provider"] or trace.get_tracer_provider()
        _state["tracer"] = provider.get_tracer("rlm_kernel")
        _state["on"] = True
    others = [n for n in names if n != "otel"]
    if others:
        from .litellm_client import import_litellm

        litellm = import_litellm()
        current = list(getattr(litellm, "callbacks", []) or [])
        litellm.callbacks = current + [n for n in others if n not in current]


def disable() -> None:
    """Stop recording spans (litellm's callbacks stay as they are)."""
    _state["on"], _state["tracer"] = False, None


@contextlib.contextmanager
def span(operation: str, name: str, attributes: dict[str, Any] | None = None) -> Iterator[Any]:
    """A span ``"{operation} {name}"`` with ``gen_ai.operation.name = operation``, child of
    the current one; yields it (None when tracing is off).  An exception escaping the
    block marks the span as an error and goes on."""
    if not _state["on"]:
        yield None
        return
    attrs = {"gen_ai.operation.name": operation, **(attributes or {})}
    with _state["tracer"].start_as_current_span(f"{operation} {name}".strip(),
                                                attributes=_clean(attrs)) as current:
        yield current


def usage_attributes(call: Any) -> dict[str, Any]:
    """A call record's tokens and USD as span attributes."""
    return {"gen_ai.usage.input_tokens": int(getattr(call, "prompt_tokens", 0) or 0),
            "gen_ai.usage.output_tokens": int(getattr(call, "completion_tokens", 0) or 0),
            "rlm.cost_usd": float(getattr(call, "cost_usd", 0.0) or 0.0)}


def _clean(attrs: dict[str, Any]) -> dict[str, Any]:
    """Attributes OpenTelemetry accepts: None dropped, other values as str."""
    out: dict[str, Any] = {}
    for key, value in attrs.items():
        if value is None:
            continue
        out[key] = value if isinstance(value, (str, bool, int, float)) else str(value)
    return out
