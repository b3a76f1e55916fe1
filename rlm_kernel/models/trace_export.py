"""Sending a run's spans to an OTLP endpoint (a trace viewer, a collector) from the
standard ``OTEL_EXPORTER_OTLP_*`` environment variables, when the user set up no
OpenTelemetry SDK of their own.

:func:`env_tracer_provider` is asked by :func:`rlm_kernel.models.tracing.enable` for the
provider of ``c.RLM.callbacks = "otel"``.  The rule:

- a global SDK ``TracerProvider`` the user installed (``trace.set_tracer_provider``)
  always wins: it is used as it is, nothing is added to it;
- else, when ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` is
  set, one SDK ``TracerProvider`` of this process (made once, not installed as the global
  one, so a provider the user sets later still wins) sends the spans through a
  ``BatchSpanProcessor`` and OpenTelemetry's own OTLP exporter (behind
  :class:`~rlm_kernel.models.redacted_spans.RedactingSpanExporter`: every span it sends,
  any library's, has its secrets redacted), which reads the other
  variables itself (``..._HEADERS``, ``..._TIMEOUT``, ``..._COMPRESSION``,
  ``..._CERTIFICATE``); its resource reads ``OTEL_SERVICE_NAME`` and
  ``OTEL_RESOURCE_ATTRIBUTES`` (service name ``rlm-kernel`` when neither names one);
- else (or when ``OTEL_TRACES_EXPORTER`` does not name ``otlp``, e.g. ``none``) nothing
  is exported (the API's no-op provider: spans cost next to nothing).

``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` / ``OTEL_EXPORTER_OTLP_PROTOCOL`` pick the
exporter as the SDK's auto-configuration does: ``http/protobuf`` (the default,
``opentelemetry-exporter-otlp-proto-http``, in the ``otel`` extra) or ``grpc``
(``opentelemetry-exporter-otlp-proto-grpc``, installed separately).

:func:`flush` is called when a top-level run ends, so a short ``rlm run`` has delivered
its spans before the process exits.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["ENDPOINT_VARIABLES", "env_tracer_provider", "flush", "reset"]

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
PROTOCOL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
FLUSH_MILLIS = 10_000  # the longest a run's end waits for its spans to be sent
DEFAULT_SERVICE = "rlm-kernel"

_lock = threading.Lock()
_made: dict[str, Any] = {"provider": None}


def env_tracer_provider() -> Any:
    """The tracer provider for this module's rule (see the module docstring).

    Returns:
        The user's global SDK provider if one is set; else this process's exporting
        SDK provider when an OTLP endpoint variable is set (made on the first call);
        else OpenTelemetry's global (no-op or proxy) provider.

    Raises:
        ImportError: an endpoint variable is set but the exporter for its protocol
            (or the OpenTelemetry SDK) is not installed.
        ValueError: the protocol variable names a protocol other than
            ``http/protobuf`` or ``grpc``.
    """
    from opentelemetry import trace

    current = trace.get_tracer_provider()
    if not isinstance(current, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return current  # the user's own provider
    if not any(os.environ.get(name) for name in ENDPOINT_VARIABLES) or not _otlp_chosen():
        return current
    with _lock:
        if _made["provider"] is None:
            _made["provider"] = _exporting_provider()
        return _made["provider"]


def flush(timeout_millis: int = FLUSH_MILLIS) -> bool:
    """Send the spans the exporting provider still holds (no-op when none was made).

    Args:
        timeout_millis: the longest to wait, in milliseconds.

    Returns:
        False if the spans could not all be handed to the exporter in time.
    """
    provider = _made["provider"]
    if provider is None:
        return True
    done = bool(provider.force_flush(timeout_millis))
    if not done:
        log.warning("trace spans not all sent within %.0f s", timeout_millis / 1000)
    return done


def reset() -> None:
    """Shut the exporting provider down (its last spans sent) and forget it, so the
    next :func:`env_tracer_provider` reads the environment again (tests)."""
    with _lock:
        provider, _made["provider"] = _made["provider"], None
    if provider is not None:
        provider.shutdown()


def _exporting_provider() -> Any:
    """A new SDK provider whose spans go to the OTLP exporter named by the environment."""
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise ImportError(
            f"{_endpoint_variable()} is set: sending spans needs the OpenTelemetry SDK "
            "(install the 'otel' extra: pip install \".[otel]\" in the checkout)") from exc
    from .redacted_spans import RedactingSpanExporter

    exporter = _exporter()
    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; they win.
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(RedactingSpanExporter(exporter)))
    log.info("spans of runs go to the OTLP endpoint in %s", _endpoint_variable())
    return provider


def _exporter() -> Any:
    """OpenTelemetry's OTLP span exporter for the protocol variable, built with no
    arguments so that it reads its endpoint, headers, timeout and TLS settings from the
    environment itself."""
    protocol = next((os.environ[name].strip() for name in PROTOCOL_VARIABLES
                     if os.environ.get(name, "").strip()), "http/protobuf")
    if protocol == "http/protobuf":
        package, module = ("opentelemetry-exporter-otlp-proto-http",
                           "opentelemetry.exporter.otlp.proto.http.trace_exporter")
    elif protocol == "grpc":
        package, module = ("opentelemetry-exporter-otlp-proto-grpc",
                           "opentelemetry.exporter.otlp.proto.grpc.trace_exporter")
    else:
        raise ValueError(f"OTLP protocol {protocol!r} is not supported for spans: use "
                         "'http/protobuf' (the default) or 'grpc'")
    try:
        import importlib

        exporter_class = importlib.import_module(module).OTLPSpanExporter
    except ImportError as exc:
        extra = " (the 'otel' extra: pip install \".[otel]\" in the checkout)" \
            if protocol == "http/protobuf" else ""
        raise ImportError(f"{_endpoint_variable()} is set: sending spans over {protocol} "
                          f"needs {package}{extra}") from exc
    return exporter_class()


def _otlp_chosen() -> bool:
    """Whether ``OTEL_TRACES_EXPORTER`` (default ``otlp``) names ``otlp``; ``none``, as
    for the SDK's auto-configuration, exports nothing."""
    names = os.environ.get("OTEL_TRACES_EXPORTER", "").strip() or "otlp"
    return "otlp" in {name.strip() for name in names.split(",")}


def _endpoint_variable() -> str:
    """The name of the endpoint variable that is set (for messages)."""
    return next((name for name in ENDPOINT_VARIABLES if os.environ.get(name)),
                ENDPOINT_VARIABLES[1])
