"""Continuing a run from one of its steps, its code edited or not (the loop's
mechanics with scripted replies)."""

from __future__ import annotations

import pytest

from rlm_kernel.engine import RLM, Continuation
from rlm_kernel.executors import PlainExecutor
from rlm_kernel.models.scripted import ScriptedModel
from tests.replies import block


def first_run():
    lm = ScriptedModel([block("n = len(context)\nprint(n)", "Measure."),
                        block("half = n // 3\nprint(half)", "Divide."),
                        block("FINAL(half)")])
    executor = PlainExecutor()
    result = RLM(root_client=lm, sub_client=lm, verify_answer=False).run(
        "Half the length?", context="abcdef", executor=executor)
    return result, executor


def test_continuing_from_an_edited_step_keeps_the_steps_before_and_asks_the_model_after():
    result, executor = first_run()
    assert result.answer == "2"  # the model divided by 3: the user fixes step 2
    lm = ScriptedModel([block("FINAL(half)", "Done.")])
    rlm = RLM(root_client=lm, sub_client=lm, verify_answer=False)
    cont = rlm.run("Half the length?", executor=executor, variables={"context": "abcdef"},
                   continuation=Continuation(result, 2, code="half = n // 2\nprint(half)"))
    assert cont.answer == "3"
    assert [e.code for e in cont.history][:2] == ["n = len(context)\nprint(n)",
                                                  "half = n // 2\nprint(half)"]
    assert cont.history.entries[1].output == "3\n"  # the edited code ran afresh
    assert len(lm.calls) == 1  # only the step after the edited one asked the model
    convo = lm.calls[0]
    assert any("Measure." in m["content"] for m in convo if m["role"] == "assistant")
    assert any("half = n // 2" in m["content"] for m in convo if m["role"] == "assistant")
    assert result.answer == "2" and len(result.history) == 3  # the original run is kept


def test_continuing_without_an_edit_reruns_the_recorded_code():
    result, executor = first_run()
    lm = ScriptedModel([block("FINAL(half * 10)")])
    cont = RLM(root_client=lm, sub_client=lm, verify_answer=False).run(
        "q", executor=executor, variables={"context": "abcdef"},
        continuation=Continuation(result, 3))
    assert cont.answer == "2"  # step 3's recorded code, FINAL(half), ran again
    assert lm.calls == []


def test_a_step_outside_the_run_is_refused():
    result, _ = first_run()
    with pytest.raises(ValueError, match="continues from a step in 1..4"):
        Continuation(result, 9)
