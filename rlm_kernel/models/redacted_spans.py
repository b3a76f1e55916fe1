"""OpenTelemetry spans that carry no secret: spans leave the machine (a collector, a trace
viewer), so every text in them is redacted (:mod:`rlm_kernel.redaction`: the
environment's keys, a fleet's, a client's) before any exporter sees it.

Two layers, both OpenTelemetry's own extension points:

* :class:`RedactingSpan` wraps each live span :mod:`rlm_kernel.models.tracing` opens:
  every attribute, event, link, name and status description set through it is
  redacted, and :meth:`RedactingSpan.record_exception` writes the semantic conventions'
  ``exception`` event (``exception.type``, ``exception.message``,
  ``exception.stacktrace``, ``exception.escaped``) with the message and the stacktrace
  redacted.  ``tracing.span`` starts the span with ``record_exception=False`` and
  ``set_status_on_exception=False`` (so the SDK records nothing of its own from an
  escaping exception) and makes the wrapper the *current* span
  (``opentelemetry.trace.use_span``): whatever writes to the current span (litellm's
  own OpenTelemetry callback, the user's code) writes through it.  This holds whatever
  tracer provider is in use, the user's own included.
* :class:`RedactingSpanExporter` wraps the exporter of the provider this package makes
  from the ``OTEL_EXPORTER_OTLP_*`` variables (:mod:`rlm_kernel.models.trace_export`):
  each span it sends, this package's or another library's under the same provider, is
  copied with its name, attributes, events, links' attributes and status description
  redacted (the SDK's span processors hand exporters finished, read-only spans; a copy is
  how an exporter wrapper changes them).

A provider the user set up exports through the user's own exporters: spans of
:mod:`rlm_kernel.models.tracing` are redacted by the first layer, other libraries'
spans are the user's to redact.

Imported once tracing is on (it needs opentelemetry-api; the exporter the SDK).
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanContext, Status, StatusCode

from ..redaction import Redactor

__all__ = ["RedactingSpan", "RedactingSpanExporter", "exception_attributes",
           "redacted_attributes", "start_redacting_span", "use_redacting_span"]


def _value(value: Any, redact: Redactor) -> Any:
    """An attribute value (text, number, bool or a sequence of them) redacted."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, (list, tuple)):
        return type(value)(redact(v) if isinstance(v, str) else v for v in value)
    return value


def redacted_attributes(attributes: Mapping[str, Any] | None,
                        redact: Redactor | None = None) -> dict[str, Any] | None:
    """``attributes`` with every secret redacted in their keys and text values (a new
    dict; None stays None).

    Args:
        attributes: span, event or link attributes (values: text, bool, int, float,
            or a list or tuple of them).
        redact: the redactor (default: a new one of every secret the process knows).
    """
    if attributes is None:
        return None
    redact = Redactor() if redact is None else redact
    if not redact:
        return dict(attributes)
    return {redact(str(k)): _value(v, redact) for k, v in attributes.items()}


def exception_attributes(exception: BaseException, escaped: bool,
                         redact: Redactor) -> dict[str, Any]:
    """The semantic conventions' ``exception`` event attributes of ``exception``, its
    message and stacktrace redacted (the SDK's ``Span.record_exception`` writes the same
    keys, unredacted)."""
    try:
        message = str(exception)
    except Exception:  # noqa: BLE001 - an exception whose __str__ fails
        message = f"<{type(exception).__name__}: no message>"
    stacktrace = "".join(traceback.format_exception(type(exception), exception,
                                                    exception.__traceback__))
    return {"exception.type": type(exception).__name__,
            "exception.message": redact(message),
            "exception.stacktrace": redact(stacktrace),
            "exception.escaped": str(escaped)}


class RedactingSpan(Span):
    """A live span whose every text is redacted as it is set (see the module docstring).

    Args:
        span: the span to write to (an SDK span, or the API's non-recording one).
    """

    def __init__(self, span: Span) -> None:
        self._span = span

    @property
    def wrapped(self) -> Span:
        """The span written to."""
        return self._span

    def end(self, end_time: int | None = None) -> None:
        """End the span (``end_time`` in nanoseconds since the epoch, or now)."""
        self._span.end(end_time)

    def get_span_context(self) -> SpanContext:
        """The wrapped span's context (children started under this span use it)."""
        return self._span.get_span_context()

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        """Set ``attributes``, redacted."""
        self._span.set_attributes(redacted_attributes(attributes) or {})

    def set_attribute(self, key: str, value: Any) -> None:
        """Set one attribute, redacted."""
        redact = Redactor()
        self._span.set_attribute(redact(key), _value(value, redact))

    def add_event(self, name: str, attributes: Mapping[str, Any] | None = None,
                  timestamp: int | None = None) -> None:
        """Add an event, its name and attributes redacted."""
        redact = Redactor()
        self._span.add_event(redact(name), redacted_attributes(attributes, redact),
                             timestamp)

    def add_link(self, context: SpanContext,
                 attributes: Mapping[str, Any] | None = None) -> None:
        """Add a link, its attributes redacted."""
        self._span.add_link(context, redacted_attributes(attributes))

    def update_name(self, name: str) -> None:
        """Rename the span, the name redacted."""
        self._span.update_name(Redactor()(name))

    def is_recording(self) -> bool:
        """Whether the wrapped span records."""
        return self._span.is_recording()

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        """Set the status, its description redacted."""
        redact = Redactor()
        if isinstance(status, Status):
            if status.description:
                status = Status(status.status_code, redact(status.description))
            self._span.set_status(status)
            return
        self._span.set_status(status, redact(description) if description else description)

    def record_exception(self, exception: BaseException,
                         attributes: Mapping[str, Any] | None = None,
                         timestamp: int | None = None, escaped: bool = False) -> None:
        """Add the ``exception`` event of ``exception`` (:func:`exception_attributes`:
        message and stacktrace redacted), with ``attributes`` (redacted) added."""
        redact = Redactor()
        attrs = exception_attributes(exception, escaped, redact)
        attrs.update(redacted_attributes(attributes, redact) or {})
        self._span.add_event("exception", attrs, timestamp)

    def __getattr__(self, name: str) -> Any:
        """What the wrapped span has beyond the API (an SDK span's ``name``,
        ``attributes`` ...), read from it."""
        return getattr(self._span, name)


def start_redacting_span(tracer: Any, name: str, kind: Any,
                         attributes: Mapping[str, Any]) -> RedactingSpan:
    """A new span of ``tracer``, child of the current one, its name and start
    attributes redacted (a sampler sees them redacted too), wrapped."""
    redact = Redactor()
    return RedactingSpan(tracer.start_span(redact(name), kind=kind,
                                           attributes=redacted_attributes(attributes, redact)))


def use_redacting_span(span: RedactingSpan) -> Any:
    """``span`` as the current span until the block ends (then ended), with nothing
    recorded by OpenTelemetry itself from an escaping exception (the caller records it,
    redacted)."""
    return trace.use_span(span, end_on_exit=True, record_exception=False,
                          set_status_on_exception=False)


if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter as _SpanExporter
else:
    # The SDK's interface, duck-typed at run time: this module needs only the API
    # (models/tracing.py imports it without the SDK).
    _SpanExporter = object


class RedactingSpanExporter(_SpanExporter):
    """A span exporter that sends, through ``exporter``, copies of the spans with every
    text redacted (see the module docstring).  The SDK's ``SpanExporter`` interface:
    :meth:`export`, :meth:`shutdown`, :meth:`force_flush`.

    Args:
        exporter: the exporter that sends (an ``OTLPSpanExporter``).
    """

    def __init__(self, exporter: Any) -> None:
        self.exporter = exporter

    def export(self, spans: Sequence[Any]) -> Any:
        """Send ``spans`` (SDK ``ReadableSpan`` objects) redacted; the wrapped
        exporter's ``SpanExportResult``."""
        redact = Redactor()
        return self.exporter.export([_redacted_span(s, redact) for s in spans]
                                    if redact else list(spans))

    def shutdown(self) -> None:
        """Shut the wrapped exporter down."""
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Flush the wrapped exporter (at most ``timeout_millis`` milliseconds)."""
        return bool(self.exporter.force_flush(timeout_millis))


def _redacted_span(span: Any, redact: Redactor) -> Any:
    """A copy of the finished SDK span ``span`` with every text redacted."""
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.trace import Link

    status = span.status
    if status is not None and status.description:
        status = Status(status.status_code, redact(status.description))
    return ReadableSpan(
        name=redact(span.name), context=span.context, parent=span.parent,
        resource=span.resource, attributes=redacted_attributes(span.attributes, redact),
        events=[Event(redact(e.name), redacted_attributes(e.attributes, redact), e.timestamp)
                for e in span.events],
        links=[Link(link.context, redacted_attributes(link.attributes, redact))
               for link in span.links],
        kind=span.kind, status=status, start_time=span.start_time, end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope)
