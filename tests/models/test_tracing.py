"""Spans of the model layer (``rlm_kernel.models.tracing``): ``invoke_agent`` ->
``execute_tool`` -> ``chat``, the chat span opened by :class:`LiteLLMClient` around a real
litellm request to a local OpenAI-compatible server, read back with the OpenTelemetry
SDK's in-memory exporter."""

from __future__ import annotations

import sys

import pytest

from bench.openai_stub import fake_provider
from rlm_kernel.engine.budget import Budget, BudgetGuard
from rlm_kernel.engine.replay.recording import Recorder
from rlm_kernel.engine.services import compose_client
from rlm_kernel.models import LanguageModel, LiteLLMClient, UsageLedger, tracing

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture()
def server():
    """A chat-completions server answering "fine" with 7 prompt and 2 completion tokens."""
    with fake_provider(lambda n: "fine", prompt_tokens=7, completion_tokens=2) as (api_base, _):
        yield api_base


def _guarded(client: LiteLLMClient) -> LanguageModel:
    """The client as a run calls it: behind the run's wrappers, whose innermost
    (``tracing.TracedClient``) opens the chat span."""
    return compose_client(client, BudgetGuard(Budget(), UsageLedger(), 0.0), Recorder())


def _client(api_base: str) -> LanguageModel:
    # A priced model name, so the chat span carries a real USD cost from litellm's map.
    return _guarded(LiteLLMClient("openai/gpt-4o-mini", api_base=api_base, api_key="k",
                                  num_retries=0))


def test_run_step_and_call_spans_nest(server, exporter):
    client = _client(server)
    with tracing.run_span("Which chapter?", client.model) as run:
        with tracing.step_span(1) as step:
            reply = client.complete(HI, role="sub")
        root = client.complete(HI, role="root")
    assert reply.text == "fine" and reply.call.cost_usd > 0
    spans = exporter.get_finished_spans()
    by_name = {s.name: s for s in spans if not s.name.startswith("chat")}
    chats = [s for s in spans if s.name.startswith("chat")]
    agent, tool = by_name["invoke_agent rlm"], by_name["execute_tool repl"]
    assert agent.context.span_id == run.get_span_context().span_id
    assert tool.context.span_id == step.get_span_context().span_id
    assert agent.parent is None and tool.parent.span_id == agent.context.span_id
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.request.model"] == "openai/gpt-4o-mini"
    assert agent.attributes["rlm.question"] == "Which chapter?"
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["rlm.step"] == 1
    sub, top = sorted(chats, key=lambda s: s.start_time)
    assert sub.name == top.name == "chat openai/gpt-4o-mini"
    assert sub.parent.span_id == tool.context.span_id  # made during the step
    assert top.parent.span_id == agent.context.span_id  # the root model's turn
    for span, call in ((sub, reply.call), (top, root.call)):
        attrs = span.attributes
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.request.model"] == "openai/gpt-4o-mini"
        assert attrs["gen_ai.provider.name"] == "openai"
        assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (7, 2)
        assert attrs["rlm.cost_usd"] == pytest.approx(call.cost_usd) and attrs["rlm.cost_usd"] > 0
        assert attrs["rlm.cached"] is False
    assert (sub.attributes["rlm.role"], top.attributes["rlm.role"]) == ("sub", "root")
    assert (agent.kind.name, tool.kind.name, sub.kind.name) == ("INTERNAL", "INTERNAL", "CLIENT")


def test_the_client_alone_opens_no_span_one_call_is_one_span(server, exporter):
    """The budget wrapper is the one place a chat span opens: the bare client adds none."""
    client = LiteLLMClient("openai/gpt-4o-mini", api_base=server, api_key="k", num_retries=0)
    client.complete(HI, role="sub")
    assert exporter.get_finished_spans() == ()
    _guarded(client).complete(HI, role="sub")
    [chat] = exporter.get_finished_spans()
    assert chat.attributes["gen_ai.usage.input_tokens"] == 7


def test_a_failed_call_is_an_error_span(exporter):
    client = _guarded(LiteLLMClient("openai/m", api_base="http://127.0.0.1:9/v1", api_key="k",
                                    num_retries=0, timeout=5))
    with pytest.raises(Exception, match="cannot reach"):
        client.complete(HI)
    [chat] = exporter.get_finished_spans()
    assert chat.status.status_code.name == "ERROR"


def test_off_nothing_is_recorded_and_opentelemetry_is_not_needed(server, exporter):
    tracing.disable()
    client = _client(server)
    with tracing.run_span("q", client.model) as run, tracing.step_span(1) as step:
        assert client.complete(HI, role="sub").text == "fine"
    assert run is None and step is None
    assert exporter.get_finished_spans() == ()


def test_tracing_off_imports_no_opentelemetry():
    import subprocess

    code = ("import sys\nfrom rlm_kernel.models import tracing\n"
            "with tracing.run_span('q', 'm'), tracing.step_span(1), tracing.chat_span('m'):\n"
            "    pass\n"
            "print(any(m.startswith('opentelemetry') for m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.strip() == "False", out.stderr
