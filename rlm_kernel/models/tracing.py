"""OpenTelemetry spans of a run, after the GenAI semantic conventions: the run is an
``invoke_agent`` span, each step's code an ``execute_tool`` span, each model call a
``chat`` span (with tokens and USD), nested as they happen.

Off unless a run's ``callbacks`` setting names ``otel`` (``c.RLM.callbacks = "otel"``);
other names in it (``"langfuse"``, ...) turn on litellm's own callbacks of that name.
When off, the span helpers cost one boolean test and opentelemetry is never imported.

Spans leave the machine, so they carry no secret (:mod:`rlm_kernel.redaction`): every
span opened here redacts whatever is set on it, attributes (``rlm.question`` ...),
events (an escaping exception's message and stacktrace) and status
(:mod:`rlm_kernel.models.redacted_spans`).

Span names are ``"{gen_ai.operation.name} {target}"``: ``invoke_agent rlm``,
``execute_tool repl``, ``chat {model}``.  Each span's attributes are listed, for users,
in docs/tracing.md ("What you see"); the functions below say which they set.

The engine opens the spans: the run and step spans (:func:`run_span`, :func:`step_span`)
and each call's ``chat`` span (:func:`chat_span`, opened by :class:`TracedClient`, the
innermost of the wrappers every model call of a run passes through: one call, one span,
whatever the backend).  Span kinds: ``chat`` is ``CLIENT`` (a request to a model
server), the run and step spans ``INTERNAL`` (in-process).

Where the spans go: ``rlm_kernel.models.trace_export`` (a provider the user set up,
else OTLP from the ``OTEL_EXPORTER_OTLP_*`` variables, else nowhere).  Arize Phoenix
(the ``traces`` extra, docs/tracing.md) reads these GenAI attributes itself:
``gen_ai.operation.name`` gives its span kinds (``invoke_agent`` agent, ``execute_tool``
tool, ``chat`` LLM), the usage attributes its token counts, and the model and provider
names its own USD cost (equal to ``rlm.cost_usd`` for the models both price, checked
with Phoenix 20.26); so no OpenInference attribute (``openinference.span.kind``,
``llm.token_count.*``) is added.

Why ``"otel"`` is not handed to litellm's own OpenTelemetry callback
(``litellm.integrations.opentelemetry.OpenTelemetry``, checked with litellm 1.106.2):
inside an active span it opens no ``chat`` span of its own; it writes its ~60 attributes
(``gen_ai.operation.name``, ``gen_ai.request.model``, ``gen_ai.cost.*``, ``metadata.*``,
the messages) onto whatever span is current, so a step's ``execute_tool`` span would be
relabelled ``chat``, and adds a ``raw_gen_ai_request`` child; without litellm's proxy
installed it also logs a warning on start.  Putting ``otel`` in ``litellm.callbacks``
yourself still works: inside a run's ``chat`` span its attributes land on that span
(its ``gen_ai.request.model`` then lacks the provider prefix).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ..redaction import Redactor
from .base import CallOptions, ClientWrapper, Message
from .usage import Completion

__all__ = ["TracedClient", "call_attributes", "chat_span", "disable", "enable", "enabled",
           "run_span", "span", "step_span", "usage_attributes"]

_state: dict[str, Any] = {"on": False, "tracer": None, "provider": None}
QUESTION_CHARS = 500  # of the question kept on a run span


def enabled() -> bool:
    """True when spans are being recorded."""
    return bool(_state["on"])


def enable(callbacks: list[str], tracer_provider: Any = None) -> None:
    """Turn on tracing for the names in ``callbacks``.

    Args:
        callbacks: callback names; ``"otel"`` records this module's spans (through
            ``tracer_provider``, by default the one
            :func:`~rlm_kernel.models.trace_export.env_tracer_provider` picks: the
            user's global SDK provider, else an OTLP exporter when an
            ``OTEL_EXPORTER_OTLP_*ENDPOINT`` variable is set); any other name is added
            to ``litellm.callbacks`` (litellm's integrations).
        tracer_provider: an ``opentelemetry.sdk.trace.TracerProvider`` (tests use one
            with an in-memory exporter); kept for later calls that give none.

    Raises:
        ImportError: ``otel`` asked for without opentelemetry-api installed, or an
            OTLP endpoint variable set without the exporter installed.
        ValueError: the OTLP protocol variable names an unsupported protocol.
    """
    names = [n.strip() for n in callbacks if n and n.strip()]
    if "otel" in names:
        from . import trace_export

        if tracer_provider is not None:
            _state["provider"] = tracer_provider
        provider = _state["provider"] or trace_export.env_tracer_provider()
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
    the current one and the current span inside the block; yields it (None when tracing
    is off).  Every text set on it is redacted, by whoever sets it
    (:class:`~rlm_kernel.models.redacted_spans.RedactingSpan`).  An exception escaping
    the block is recorded as the ``exception`` event (message and stacktrace redacted),
    marks the span as an error (its description redacted) and goes on."""
    if not _state["on"]:
        yield None
        return
    attrs = {"gen_ai.operation.name": operation, **(attributes or {})}
    # imported once tracing is on
    from opentelemetry.trace import SpanKind, Status, StatusCode

    from .redacted_spans import start_redacting_span, use_redacting_span

    kind = SpanKind.CLIENT if operation == "chat" else SpanKind.INTERNAL
    current = start_redacting_span(_state["tracer"], f"{operation} {name}".strip(), kind,
                                   _clean(attrs))
    with use_redacting_span(current):
        try:
            yield current
        except Exception as exc:  # as OpenTelemetry's use_span would, redacted
            if current.is_recording():
                current.record_exception(exc, escaped=True)
                current.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            raise


def run_span(question: str, model: str, depth: int = 0) -> contextlib.AbstractContextManager[Any]:
    """The ``invoke_agent rlm`` span of a run (or of a child run), child of the current span.

    Use as ``with run_span(question, model) as span:`` around the whole run; the steps'
    and calls' spans opened inside it become its children.

    Args:
        question: the run's task; its first ``QUESTION_CHARS`` (500) characters are
            kept, redacted.
        model: the root model's litellm string.
        depth: recursion depth of the run (0 = top level, n = an ``rlm_query`` child).

    Attributes set: ``gen_ai.operation.name = "invoke_agent"``, ``gen_ai.agent.name =
    "rlm"``, ``gen_ai.request.model = model``, ``rlm.question``, ``rlm.depth``.

    Returns:
        A context manager yielding the span (add more with ``span.set_attribute``), or
        None when tracing is off.  An exception leaving the block marks the span as an
        error and propagates.
    """
    return _flushed_after(span("invoke_agent", "rlm", {"gen_ai.agent.name": "rlm",
                                                       "gen_ai.request.model": model,
                                                       "rlm.question": _head(question),
                                                       "rlm.depth": depth}), depth)


@contextlib.contextmanager
def _flushed_after(run: contextlib.AbstractContextManager[Any], depth: int) -> Iterator[Any]:
    """``run``'s span; once a top-level run's span has ended, the spans the OTLP
    exporter still holds are sent (``trace_export.flush``), so a short process has
    delivered them before it exits."""
    try:
        with run as current:
            yield current
    finally:
        if depth == 0 and _state["on"]:
            from . import trace_export

            trace_export.flush()


def step_span(step: int, depth: int = 0) -> contextlib.AbstractContextManager[Any]:
    """The ``execute_tool repl`` span of one step: its code running in the REPL (the
    ``llm_query`` calls the code makes become its ``chat`` children), child of the
    current span (the run's).

    Args:
        step: the step's number, from 1.
        depth: recursion depth of the run the step belongs to.

    Attributes set: ``gen_ai.operation.name = "execute_tool"``, ``gen_ai.tool.name =
    "repl"``, ``rlm.step``, ``rlm.depth``.

    Returns:
        A context manager yielding the span, or None when tracing is off.
    """
    return span("execute_tool", "repl", {"gen_ai.tool.name": "repl", "rlm.step": step,
                                         "rlm.depth": depth})


def chat_span(model: str, role: str = "root", depth: int = 0
              ) -> contextlib.AbstractContextManager[Any]:
    """The ``chat {model}`` span of one model call (kind ``CLIENT``), child of the current
    span.  :class:`TracedClient` opens it around every call of a run and, after the
    reply, adds :func:`call_attributes`.

    Attributes set: ``gen_ai.operation.name = "chat"``, ``gen_ai.request.model``,
    ``rlm.role`` (``root``/``sub``/``final``), ``rlm.depth``.
    """
    return span("chat", model, {"gen_ai.request.model": model, "rlm.role": role,
                                "rlm.depth": depth})


class TracedClient(ClientWrapper):
    """A :class:`~rlm_kernel.models.LanguageModel` whose every call is one ``chat`` span
    (:func:`chat_span`, then :func:`call_attributes` once the reply is in); tracing only:
    with tracing off a call costs one boolean test more.

    Args:
        client: the model client to trace.
    """

    def call(self, messages: list[Message], options: CallOptions) -> Completion:
        """The wrapped client's call inside a ``chat {model}`` span (attributes: the
        model, ``role``, the client's ``depth``; after the reply its tokens, USD, cache
        hit and provider); see ``LanguageModel.complete``.

        Raises:
            LLMError: the call failed (the span is marked as an error).
        """
        with chat_span(self.model, options.role, options.call_depth(self.depth)) as sp:
            completion = super().call(messages, options)
            if sp is not None:
                sp.set_attributes(call_attributes(completion.call))
        return completion


def call_attributes(call: Any) -> dict[str, Any]:
    """A finished call's span attributes: :func:`usage_attributes`, ``rlm.cached``,
    ``gen_ai.provider.name`` (the prefix of the call's litellm model string, if any) and
    ``rlm.deployment`` (the fleet deployment that answered, if any)."""
    model = str(getattr(call, "model", "") or "")
    provider = model.split("/", 1)[0] if "/" in model else None
    deployment = getattr(call, "deployment", None)
    return {**usage_attributes(call), "rlm.cached": bool(getattr(call, "cached", False)),
            **({"gen_ai.provider.name": provider} if provider else {}),
            **({"rlm.deployment": deployment} if deployment else {})}


def usage_attributes(call: Any) -> dict[str, Any]:
    """A call record's tokens and USD as span attributes."""
    return {"gen_ai.usage.input_tokens": int(getattr(call, "prompt_tokens", 0) or 0),
            "gen_ai.usage.output_tokens": int(getattr(call, "completion_tokens", 0) or 0),
            "rlm.cost_usd": float(getattr(call, "cost_usd", 0.0) or 0.0)}


def _head(text: str) -> str:
    """The first ``QUESTION_CHARS`` characters of ``text``, redacted before the cut (a
    cut inside a secret would leave its start)."""
    return Redactor()(text)[:QUESTION_CHARS]


def _clean(attrs: dict[str, Any]) -> dict[str, Any]:
    """Attributes OpenTelemetry accepts: None dropped, other values as str."""
    out: dict[str, Any] = {}
    for key, value in attrs.items():
        if value is None:
            continue
        out[key] = value if isinstance(value, (str, bool, int, float)) else str(value)
    return out
