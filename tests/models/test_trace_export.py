"""``callbacks = "otel"`` with the standard ``OTEL_EXPORTER_OTLP_*`` variables: a run's
spans reach an OTLP/HTTP receiver (a real HTTP server in this test, decoding the
protobuf requests the exporter sends), a provider the user set up wins, and with no
endpoint variable nothing is exported (``rlm_kernel.models.trace_export``)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from bench.openai_stub import send_ok, serve_http
from rlm_kernel.engine import RLM
from rlm_kernel.models import trace_export, tracing
from rlm_kernel.models.scripted import ScriptedModel

OTEL_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                  "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
                  "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                  "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_EXPORTER",
                  "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_SDK_DISABLED")


@dataclass
class Receiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1: the spans it was sent (name, parent,
    attributes, the resource's service name) and the headers of each request."""

    url: str
    spans: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)


@pytest.fixture()
def receiver() -> Iterator[Receiver]:
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )

    lock = threading.Lock()
    got = Receiver("")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            request = ExportTraceServiceRequest.FromString(body)
            with lock:
                got.paths.append(self.path)
                got.headers.append({k.lower(): v for k, v in self.headers.items()})
                for resource_spans in request.resource_spans:
                    resource = {a.key: a.value.string_value
                                for a in resource_spans.resource.attributes}
                    for scope in resource_spans.scope_spans:
                        for span in scope.spans:
                            attributes = MessageToDict(span)["attributes"]
                            got.spans.append({
                                "name": span.name, "id": span.span_id.hex(),
                                "parent": span.parent_span_id.hex(),
                                "service": resource.get("service.name"),
                                "attributes": {a["key"]: next(iter(a["value"].values()))
                                               for a in attributes}})
            send_ok(self, ExportTraceServiceResponse().SerializeToString(),
                    "application/x-protobuf")

    httpd = serve_http(Handler)
    got.url = f"http://127.0.0.1:{httpd.server_port}"
    try:
        yield got
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(autouse=True)
def clean_tracing(monkeypatch):
    """No OTLP variable from the caller's environment, no provider kept by an earlier
    test; tracing off and the exporting provider shut down afterwards."""
    for name in OTEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(tracing._state, "provider", None)
    trace_export.reset()
    yield
    tracing.disable()
    trace_export.reset()


def _run(**settings: Any) -> None:
    """A two-step scripted run (one llm_query in step 1), tracing per ``settings``."""
    lm = ScriptedModel(["```repl\nx = llm_query('say ok')\nprint(x)\n```",
                        "```repl\nFINAL(x)\n```"], sub_replies=["ok"],
                       prompt_tokens=10, completion_tokens=5, cost_usd=0.001)
    result = RLM(root_client=lm, sub_client=lm, verify_answer=False,
                 **settings).run("Say ok", context="abc")
    assert result.answer == "ok"


def test_the_endpoint_variable_sends_the_run_s_spans_before_run_returns(receiver, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-project-name=rlm-tests")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "my-service")
    _run(callbacks="otel")
    # no wait: the run's end flushed the batch processor
    assert receiver.paths and set(receiver.paths) == {"/v1/traces"}
    assert all(h.get("x-project-name") == "rlm-tests" for h in receiver.headers)
    by_name: dict[str, list[dict[str, Any]]] = {}
    for span in receiver.spans:
        by_name.setdefault(span["name"], []).append(span)
    [agent] = by_name["invoke_agent rlm"]
    steps, chats = by_name["execute_tool repl"], by_name["chat scripted"]
    assert len(steps) == 2 and len(chats) == 3
    assert agent["parent"] == "" and agent["attributes"]["rlm.question"] == "Say ok"
    assert all(s["parent"] == agent["id"] for s in steps)
    [sub] = [c for c in chats if c["attributes"]["rlm.role"] == "sub"]
    assert sub["parent"] in {s["id"] for s in steps}
    assert sub["attributes"]["gen_ai.usage.input_tokens"] == "10"  # int64 as JSON text
    assert sub["attributes"]["rlm.cost_usd"] == pytest.approx(0.001)
    assert {s["service"] for s in receiver.spans} == {"my-service"}


def test_the_traces_endpoint_is_used_as_given_and_the_service_is_named(receiver, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{receiver.url}/custom/path")
    _run(callbacks="otel")
    assert set(receiver.paths) == {"/custom/path"}
    assert {s["service"] for s in receiver.spans} == {trace_export.DEFAULT_SERVICE}


def test_a_provider_the_user_set_up_wins(receiver, monkeypatch):
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    mine = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(mine))
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)  # as if set globally
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    _run(callbacks="otel")
    assert any(s.name == "invoke_agent rlm" for s in mine.get_finished_spans())
    assert trace_export.flush() and receiver.spans == []
    assert trace_export.env_tracer_provider() is provider


def test_no_endpoint_variable_exports_nothing(receiver):
    from opentelemetry import trace

    _run(callbacks="otel")
    provider = trace_export.env_tracer_provider()
    assert isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))
    assert receiver.spans == []


def test_otel_traces_exporter_none_exports_nothing(receiver, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    _run(callbacks="otel")
    assert trace_export.flush() and receiver.spans == []


def test_tracing_off_exports_nothing_even_with_an_endpoint(receiver, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    _run()
    assert trace_export.flush() and receiver.spans == []


def test_an_unsupported_protocol_is_one_readable_error(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    with pytest.raises(ValueError, match="'http/json' is not supported.*http/protobuf"):
        tracing.enable(["otel"])


def test_a_run_answers_when_nothing_listens_at_the_endpoint(monkeypatch, caplog):
    """The exporter's retries end at its own timeout (OTEL_EXPORTER_OTLP_TIMEOUT, in
    seconds); the run is answered and the failure is logged, not raised."""
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    start = time.monotonic()
    _run(callbacks="otel")
    assert time.monotonic() - start < 5
    assert any("export" in r.getMessage().lower() for r in caplog.records
               if r.name.startswith("opentelemetry.exporter"))
