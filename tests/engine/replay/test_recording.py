"""Recording a run's model exchanges and replaying them without a model (the loop's
mechanics, with scripted replies; tests/jupyter/test_replay_kernel.py replays a real
model's run in a kernel)."""

from __future__ import annotations

import json

import pytest

from rlm_kernel.engine import RLM
from rlm_kernel.engine.replay.recording import RESPONSE_CHARS, load_recording
from rlm_kernel.export import export_run
from rlm_kernel.models import LLMError
from rlm_kernel.models.scripted import ScriptedModel
from tests.replies import block

REPLIES = [
    "No code yet, I am thinking.",
    block("words = context.split()\nprint(len(words))"),
    block("parts = llm_query_batched(['upper ' + w for w in words])\nprint(parts)"),
    block("FINAL(' '.join(parts))"),
]


def shout(messages: list[dict[str, str]]) -> str:
    """A sub reply that depends on its prompt ("upper alpha" -> "ALPHA"), not on which
    of the batch's threads calls first."""
    return messages[-1]["content"].split()[-1].upper()


def recorded_run(context: str = "alpha beta"):
    lm = ScriptedModel(REPLIES, sub_replies=[shout, shout])
    result = RLM(root_client=lm, sub_client=lm, verify_answer=False,
                 resample_temperature=None).run("Shout the words", context=context)
    return result, lm


def test_every_exchange_is_recorded_in_call_order_with_its_step():
    result, _ = recorded_run()
    roles = [e["role"] for e in result.exchanges]
    assert roles.count("root") == 4 and roles.count("sub") == 2
    assert [e["response"] for e in result.exchanges if e["role"] == "root"] == REPLIES
    subs = [e for e in result.exchanges if e["role"] == "sub"]
    assert sorted(e["prompt"] for e in subs) == ["upper alpha", "upper beta"]
    assert all(e["step"] == 3 for e in subs)  # the batch ran in step 3
    assert json.loads(json.dumps(result.to_dict()))["exchanges"] == result.exchanges


@pytest.mark.parametrize("form", ["result", "dict", "json", "notebook"])
def test_a_replay_gives_the_same_steps_and_answer_with_no_model(form, tmp_path):
    result, _ = recorded_run()
    source = {"result": result, "dict": result.to_dict()}.get(form)
    if form == "json":
        source = tmp_path / "run.json"
        source.write_text(json.dumps(result.to_dict()))
    elif form == "notebook":
        source = tmp_path / "run.ipynb"
        export_run(result, source)
    replayed = RLM(replay=source, verify_answer=False,
                   resample_temperature=None).run("Shout the words", context="alpha beta")
    assert replayed.answer == result.answer == "ALPHA BETA"
    assert [e.output for e in replayed.history] == [e.output for e in result.history]
    assert replayed.diverged_at is None and replayed.stopped_by == "final"
    assert all(c.model.startswith("replay/") for c in replayed.calls)
    assert replayed.cost_usd == 0


def test_a_changed_context_reports_the_first_diverging_step():
    result, _ = recorded_run("alpha beta")
    replayed = RLM(replay=result, verify_answer=False,
                   resample_temperature=None).run("Shout the words", context="alpha beta gamma")
    assert replayed.diverged_at == 2  # step 1 ran no code; step 2 prints 3, not 2
    assert "replay: no recorded sub-call" in replayed.history.entries[2].output  # 'gamma'
    assert result.diverged_at is None


def test_a_replay_that_runs_out_of_replies_ends_with_a_readable_error():
    result, _ = recorded_run()
    short = result.to_dict()
    short["exchanges"] = short["exchanges"][:1]
    replayed = RLM(replay=short, verify_answer=False).run("Shout", context="alpha beta")
    assert replayed.stopped_by == "error"
    assert "no more root-model replies" in replayed.error


def test_a_record_without_exchanges_is_refused():
    with pytest.raises(ValueError, match="no recorded model exchanges"):
        load_recording({"question": "q", "trajectory": []})


def test_recorded_replies_are_capped():
    lm = ScriptedModel([block("print(1)") + "#" * (RESPONSE_CHARS + 10), block("FINAL(1)")])
    result = RLM(root_client=lm, sub_client=lm, verify_answer=False).run("q", context="x")
    assert len(result.exchanges[0]["response"]) == RESPONSE_CHARS


def test_replay_model_refuses_unknown_sub_calls():
    result, _ = recorded_run()
    from rlm_kernel.engine.replay.recording import ReplayModel

    model = ReplayModel(load_recording(result))
    with pytest.raises(LLMError, match="no recorded sub-call"):
        model.complete([{"role": "user", "content": "never asked"}], role="sub")
