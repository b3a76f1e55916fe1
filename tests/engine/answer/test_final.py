"""The record of a FINAL (engine.answer.final): kept once, host-side, per step; a
FINAL_VAR resolved against the namespace; a FINAL written in prose taken only when it
cannot be a placeholder."""

from __future__ import annotations

import threading

import pytest

from rlm_kernel.engine.answer.final import FinalRecord, final_from_text, record_value
from rlm_kernel.executors import PlainExecutor
from rlm_kernel.termination import FINAL, FINAL_VAR, FinalOutput
from tests.replies import block
from tests.scripted import scripted_rlm


def output_of(call, *args) -> dict:
    with pytest.raises(FinalOutput) as caught:
        call(*args)
    return caught.value.output


def test_the_first_final_of_a_step_is_kept_and_taken_once():
    record = FinalRecord()
    assert record.take() is None
    record.keep(output_of(FINAL, 1))
    record.keep(output_of(FINAL, 2))  # a second FINAL of the same step does not count
    assert record.take() == {"answer": 1, "type": "direct"}
    assert record.take() is None  # taken: the next step starts empty


def test_a_final_from_another_thread_is_kept():
    record = FinalRecord()
    worker = threading.Thread(target=record.keep, args=(output_of(FINAL_VAR, "n"),))
    worker.start()
    worker.join()
    assert record.take() == {"var": "n", "type": "variable"}


def test_a_record_names_its_value_or_tells_the_model_the_variable_is_missing():
    ns = {"n": 3}
    assert record_value(output_of(FINAL, "x"), ns) == ("x", None)
    assert record_value(output_of(FINAL_VAR, "n"), ns) == (3, None)
    value, error = record_value(output_of(FINAL_VAR, "m"), ns)
    assert value is None
    assert error.startswith("FINAL_VAR failed: FINAL_VAR named 'm'") and "'n'" in error


@pytest.mark.parametrize(("reply", "ns", "expected"), [
    ('The answer is FINAL("Paris")', {}, (True, "Paris", None)),
    ("FINAL('a b')", {}, (True, "a b", None)),
    ("FINAL(answer)", {"answer": 42}, (True, 42, None)),
    ("FINAL(answer)", {}, (False, None, None)),  # a placeholder, not an answer
    ("FINAL_VAR(total)", {"total": [1, 2]}, (True, [1, 2], None)),
    ("No final here.", {"x": 1}, (False, None, None)),
])
def test_a_final_in_prose_is_taken_only_when_it_cannot_be_a_placeholder(reply, ns, expected):
    assert final_from_text(reply, ns) == expected


def test_a_final_var_in_prose_of_a_missing_name_says_so():
    found, value, error = final_from_text("FINAL_VAR(total)", {"count": 1})
    assert (found, value) == (False, None)
    assert "FINAL_VAR named 'total'" in error and "'count'" in error


def test_a_final_caught_by_model_code_is_still_the_answer():
    rlm, _ = scripted_rlm([block("try:\n    FINAL(len(context))\nexcept BaseException:\n"
                                 "    print('caught')")])
    res = rlm.run("How long?", context="abcd", executor=PlainExecutor())
    assert res.stopped_by == "final" and res.answer == "4"
    assert "caught" in res.history.entries[0].output


def test_a_final_var_of_a_missing_name_fails_the_step_and_tells_the_model():
    rlm, lm = scripted_rlm([block("FINAL_VAR('nothing')"), block("FINAL(len(context))")])
    res = rlm.run("How long?", context="abc", executor=PlainExecutor())
    assert res.answer == "3" and res.steps == 2
    assert lm.calls[1][-1]["content"].startswith("FINAL_VAR failed: FINAL_VAR named 'nothing'")
