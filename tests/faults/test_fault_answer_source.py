"""The answer is the model's: text that executed code prints or shows never ends a run
or becomes its answer, whatever it holds (``FINAL(result)``, ``FINAL_VAR("x")``,
``FINAL_VAR(context)``); only a ``FINAL`` that model code executed does, or, for a reply
with no code block, one the model wrote (the spec's text fallback).  Both executors."""

from __future__ import annotations

import pytest

from tests.replies import block

from .helpers import THOUGHT, scripted_run

DOCUMENT = ("Report 7.\nThe tool prints FINAL(result) when it is done.\n"
            'Old scripts call FINAL_VAR("x") or FINAL_VAR(context) instead.\n'
            "final('lower case') and FINAL('quoted answer') appear too.\n")


def run(*replies: str, **cfg):
    rlm, lm = scripted_run(list(replies), step_timeout=10, **cfg)
    return rlm.run("What does the report say?", context=DOCUMENT, x="the value of x"), lm


@pytest.mark.parametrize("code", [
    "print(context)",                          # printed
    "context",                                 # shown as the last expression
    "print('FINAL(result)')",                  # printed by the model's own code
    "print('FINAL_VAR(\"x\")')",
    "print('FINAL_VAR(context)')",
    "import sys\nsys.stderr.write(context)",   # on stderr
])
def test_printed_final_does_not_end_the_run(code):
    res, _ = run(block(code, THOUGHT), block("FINAL('from the code')", THOUGHT))
    assert res.steps == 2, [e.output for e in res.history.entries]
    assert (res.stopped_by, res.answer) == ("final", "from the code")


def test_a_step_that_prints_the_document_and_fails_is_not_an_answer():
    res, _ = run(block("print(context)\nraise ValueError('boom')", THOUGHT),
                 block("FINAL_VAR('x')", THOUGHT))
    assert res.steps == 2 and res.answer == "the value of x"


def test_without_any_final_call_the_run_has_no_answer():
    res, _ = run(*[block("print(context)", THOUGHT)] * 2, "I cannot tell yet.",
                 max_iterations=2, repeat_limit=None)  # the last reply answers "answer now"
    assert res.stopped_by == "max_iterations" and res.answer is None
    assert res.steps >= 2


def test_the_final_the_code_executed_is_the_answer_not_the_printed_one():
    res, _ = run(block("print(context)\nFINAL('mine')", THOUGHT))
    assert (res.steps, res.answer) == (1, "mine")


def test_a_final_the_model_writes_in_prose_beside_code_is_not_the_answer():
    """A reply with code answers only through the FINAL its code executed."""
    reply = "I expect FINAL('guess') soon.\n```repl\nprint(len(context))\n```"
    res, _ = run(reply, block("FINAL('counted')", THOUGHT))
    assert (res.steps, res.answer) == (2, "counted")


def test_a_reply_without_code_still_answers_through_the_text_fallback():
    res, _ = run("The answer is FINAL('in prose').")
    assert (res.stopped_by, res.answer) == ("final", "in prose")


def test_a_placeholder_final_in_prose_is_no_answer():
    """``FINAL(answer)`` naming no variable is a placeholder; the run goes on."""
    res, _ = run("I will write FINAL(answer) when I know it.", block("FINAL('known')", THOUGHT))
    assert res.answer == "known"


@pytest.mark.parametrize("termination", ["confidence", "composite"])
def test_other_policies_ignore_printed_finals_too(termination):
    cfg = {"min_steps_before_termination": 0} if termination == "confidence" else None
    res, _ = run(block("print(context)", THOUGHT), block("FINAL('done')", THOUGHT),
                 termination=termination, termination_config=cfg)
    assert (res.steps, res.answer) == (2, "done")


def test_a_confidence_stop_answers_with_the_models_words_not_the_output():
    reply = "Sure: it is about report 7.\n```repl\nRLM_CONFIDENCE = 0.99\nprint(context)\n```"
    res, _ = run(reply, termination="confidence",
                 termination_config={"min_steps_before_termination": 0})
    assert res.steps == 1 and res.stopped_by == "final"
    assert res.answer == "Sure: it is about report 7."
