"""The host's checks of a FINAL (engine.answer.checks.FinalChecks): a value of the
wrong type is refused and the model told which variables hold the type; a FINAL is
held once for the grounding check or the answer check, never after the last step;
the answer's source from the trajectory."""

from __future__ import annotations

from rlm_kernel.engine import RLMConfig
from rlm_kernel.engine.answer.checks import FinalChecks
from rlm_kernel.engine.answer.types import AnswerType
from rlm_kernel.engine.step import StepOutcome
from rlm_kernel.repl_types import REPLHistory


def checks(ns=None, *, answer_type=None, top_level=True, redact=str, **config) -> FinalChecks:
    return FinalChecks("Which files?", RLMConfig(**config), answer_type=answer_type,
                       top_level=top_level, namespace={} if ns is None else ns,
                       inputs={"context": "a.py\nb.py"}, user_inputs={"context"},
                       data_name="context", folder=(), redact=redact)


def outcome(code: str = "", output: str = "") -> StepOutcome:
    return StepOutcome(reply="r", reply_for_history="r", code=code, output=output)


def history(*steps: tuple[str, str]) -> REPLHistory:
    hist = REPLHistory()
    for code, output in steps:
        hist = hist.append(code=code, output=output)
    return hist


def test_a_value_is_the_answer_with_its_text_redacted_once():
    step = outcome()
    assert checks(redact=str.upper).accept(step, "secret") is None
    assert step.final and step.answer_value == "SECRET" and step.answer == "SECRET"


def test_a_value_of_the_wrong_type_is_refused_and_the_holders_are_named():
    ns = {"context": ["x"], "names": ["a.py", "b.py"], "count": 2, "_private": ["z"]}
    step = outcome()
    notice = checks(ns, answer_type=AnswerType(list[str])).accept(step, [1, 2])
    assert not step.final and not step.success and step.answer is None
    assert notice.startswith("FINAL not accepted: expected list[str]: [0]:")
    assert step.error_for_model.startswith("Your FINAL was not accepted: expected list[str]")
    # the protected input (context) and private names are not offered
    assert step.error_for_model.endswith(
        ". Call FINAL with a value of type list[str]. Your variables of that type: names "
        "(e.g. FINAL_VAR('names') answers with the first).")


def test_a_child_run_takes_any_type():
    step = outcome()
    assert checks(answer_type=AnswerType(int), top_level=False).accept(step, "x") is None
    assert step.final and step.answer == "x"


def test_a_record_of_a_missing_variable_fails_the_step_without_a_notice():
    step = outcome(code="FINAL_VAR('nope')")
    assert checks({"n": 1}).take(step, {"type": "variable", "var": "nope"}) is None
    assert not step.final and not step.success
    assert step.error_for_model.startswith("FINAL_VAR failed: ")
    assert checks().take(step, None) is None


def test_an_ungrounded_literal_is_held_for_the_grounding_check():
    step = outcome(code="FINAL('c.py')")
    checks_ = checks(ground_answer=True)
    checks_.accept(step, "c.py")
    held = checks_.look_back(2, step, history(("print(1)", "1\n"), ("FINAL('c.py')", "")))
    assert held.reason == "grounding"
    assert held.finding == ("The answer 'c.py' does not appear in any output of your code "
                            "or in any variable.")
    assert held.message.startswith(f"Your FINAL answer was not accepted yet. {held.finding}")
    assert held.message.endswith("The question: Which files?\nStep 3 of 12.")
    assert checks_.look_back(12, step, history()) is None  # never after the last step
    child = checks(ground_answer=True, top_level=False)
    assert child.look_back(2, step, history()) is None  # grounding: top-level runs only


def test_the_answer_check_shows_the_last_output_when_this_step_printed_nothing():
    step = outcome(code="FINAL(n)")
    checks_ = checks(ground_answer=False, verify_answer=True)
    checks_.accept(step, 2)
    held = checks_.look_back(2, step, history(("n = 2\nprint(n)", "2\n"), ("FINAL(n)", "")))
    assert held.reason == "verify" and held.finding is None
    assert held.message.startswith("You called FINAL with the number 2\nThe last output")
    assert checks(ground_answer=False).look_back(2, step, history()) is None


def test_the_source_reads_the_trajectory():
    step = outcome(code="FINAL('b.py')")
    checks_ = checks()
    checks_.accept(step, "b.py")
    read = history(("print(context)", "a.py\nb.py\n"), ("FINAL('b.py')", ""))
    assert checks_.source(read, step) == "data"
    assert checks_.source(read, step, forced=True) == "forced"
    assert checks_.source(history(("print(1)", "1\n")), step) == "no_input"
    unfounded = history(("print(context[:1])", "a\n"), ("FINAL('b.py')", ""))
    assert checks_.source(unfounded, step) == "ungrounded"
    assert checks_.outputs(read) == ["a.py\nb.py\n", ""]
