"""OpenTelemetry spans of a run, after the GenAI semantic conventions: the run is an
``invoke_agent`` span, each step's code an ``execute_tool`` span, each model call a
``chat`` span (with tokens and USD), nested as they happen.

Off unless a run's ``callbacks`` setting names ``otel`` (``c.RLM.callbacks = "otel"``);
other names in it (``"langfuse"``, ...) turn on litellm's own callbacks of that name.
When off, the span helpers cost one boolean test and opentelemetry is never imported.

Span names are ``"{gen_ai.operation.name} {target}"``: ``invoke_agent rlm``,
``execute_tool repl``, ``chat {model}``.  Attribute names: ``gen_ai.operation.name``,
``gen_ai.agent.name``, ``gen_ai.request.model``, ``gen_ai.provider.name``, ``gen_ai.tool.name``, ``gen_ai.usage.input_tokens``,
``gen_ai.usage.output_tokens`` (OpenTelemetry's GenAI conventions, which define no cost
attribute); ``rlm.cost_usd`` (USD, litellm's price map), ``rlm.cached``, ``rlm.step``,
``rlm.role``, ``rlm.depth``, ``rlm.question`` (its first 500 characters) are ours.

The engine opens the run and step spans (:func:`run_span`, :func:`step_span`);
:class:`~rlm_kernel.models.LiteLLMClient` opens each call's ``chat`` span itself, so a
client used outside the engine is traced too.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

__all__ = ["chat_span", "disable", "enable", "enabled", "run_span", "span", "step_span",
           "usage_attributes"]

_state: dict[str, Any] = {"on": False, "tracer": None, "provider": None}
#: The open ``chat`` span of this context: a model call is one span, whether the engine's
#: budget wrapper, the client, or both open it.
_chat: contextvars.ContextVar[Any] = contextvars.ContextVar("rlm_chat_span", default=None)
QUESTION_CHARS = 500  # of the question kept on a run span


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
    if operation == "chat" and _chat.get() is not None:  # the same call, one level in
        current = _chat.get()
        if attributes:
            current.set_attributes(_clean(attributes))
        yield current
        return
    attrs = {"gen_ai.operation.name": operation, **(attributes or {})}
    with _state["tracer"].start_as_current_span(f"{operation} {name}".strip(),
                                                attributes=_clean(attrs)) as current:
        token = _chat.set(current) if operation == "chat" else None
        try:
            yield current
        finally:
            if token is not None:
                _chat.reset(token)


def run_span(question: str, model: str, depth: int = 0) -> contextlib.AbstractContextManager[Any]:
    """The ``invoke_agent rlm`` span of a run (or child run at ``depth``); yields the span,
    or None when tracing is off."""
    return span("invoke_agent", "rlm", {"gen_ai.agent.name": "rlm",
                                        "gen_ai.request.model": model,
                                        "rlm.question": question[:QUESTION_CHARS],
                                        "rlm.depth": depth})


def step_span(step: int, depth: int = 0) -> contextlib.AbstractContextManager[Any]:
    """The ``execute_tool repl`` span of one step (its code running in the REPL)."""
    return span("execute_tool", "repl", {"gen_ai.tool.name": "repl", "rlm.step": step,
                                         "rlm.depth": depth})


def chat_span(model: str, role: str = "root", depth: int = 0
              ) -> contextlib.AbstractContextManager[Any]:
    """The ``chat {model}`` span of one model call; inside another ``chat`` span (the
    engine's wrapper around a client that opens one too) it is that span."""
    return span("chat", model, {"gen_ai.request.model": model, "rlm.role": role,
                                "rlm.depth": depth})


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
