"""``callbacks = "otel"``: the run, each step and each model call become nested
OpenTelemetry spans (GenAI conventions), checked with the SDK's in-memory exporter
(scripted replies: the mechanics of the span tree)."""

from __future__ import annotations

import pytest

from rlm_kernel.engine import RLM
from rlm_kernel.models import tracing
from rlm_kernel.models.scripted import ScriptedModel


def test_run_steps_and_calls_are_nested_spans(exporter):
    lm = ScriptedModel(["```repl\nx = llm_query('say ok')\nprint(x)\n```",
                        "```repl\nFINAL(x)\n```"], sub_replies=["ok"],
                       prompt_tokens=10, completion_tokens=5, cost_usd=0.001)
    result = RLM(root_client=lm, sub_client=lm, verify_answer=False).run("q", context="abc")
    assert result.answer == "ok"
    spans = {s.context.span_id: s for s in exporter.get_finished_spans()}
    by_op: dict[str, list] = {}
    for s in spans.values():
        by_op.setdefault(s.attributes["gen_ai.operation.name"], []).append(s)
    [agent] = by_op["invoke_agent"]
    assert agent.parent is None and agent.name == "invoke_agent rlm"
    assert agent.attributes["gen_ai.usage.input_tokens"] == result.prompt_tokens == 30
    assert agent.attributes["rlm.cost_usd"] == pytest.approx(result.cost_usd)
    tools = sorted(by_op["execute_tool"], key=lambda s: s.attributes["rlm.step"])
    assert [t.attributes["rlm.step"] for t in tools] == [1, 2]
    assert all(t.parent.span_id == agent.context.span_id for t in tools)
    chats = by_op["chat"]
    roots = [c for c in chats if c.attributes["rlm.role"] == "root"]
    subs = [c for c in chats if c.attributes["rlm.role"] == "sub"]
    assert len(roots) == 2 and len(subs) == 1
    assert all(c.parent.span_id == agent.context.span_id for c in roots)
    assert subs[0].parent.span_id == tools[0].context.span_id  # made by step 1's code
    assert subs[0].attributes["gen_ai.usage.output_tokens"] == 5
    assert subs[0].attributes["gen_ai.request.model"] == "scripted"


def test_a_run_with_callbacks_turns_tracing_on(exporter):
    tracing.disable()
    lm = ScriptedModel(["```repl\nFINAL(1)\n```"])
    RLM(root_client=lm, sub_client=lm, verify_answer=False).run("q", context="a")
    assert exporter.get_finished_spans() == ()  # off: nothing recorded
    RLM(root_client=lm, sub_client=lm, verify_answer=False, callbacks="otel").run("q",
                                                                                   context="a")
    assert any(s.name == "invoke_agent rlm" for s in exporter.get_finished_spans())
