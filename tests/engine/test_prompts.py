"""Every text the model reads is built in engine/prompts.py: the host's words about a
FINAL, a restored name and a failed sub-call read as they did where they were built
before, and no other engine module builds them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rlm_kernel.engine import prompts
from rlm_kernel.engine.repetition import Repetition

ENGINE = Path(prompts.__file__).parent


def test_the_hosts_words_about_a_final():
    assert prompts.final_var_failed("no x") == "FINAL_VAR failed: no x"
    assert prompts.answer_type_line("int") == (
        "The answer must be of type int: call FINAL with a Python value of that type.")
    assert prompts.answer_type_line("Pkg", '{"type":"object"}').endswith(
        'that type (JSON Schema: {"type":"object"}).')
    assert prompts.answer_type_refusal("expected int: bad", "int") == (
        "Your FINAL was not accepted: expected int: bad. Call FINAL with a value of type int.")
    assert prompts.answer_type_refusal("p", "int", ["a", "b"]).endswith(
        " Your variables of that type: a, b (e.g. FINAL_VAR('a') answers with the first).")
    assert prompts.answer_type_notice("p") == "FINAL not accepted: p"
    assert prompts.ungrounded_answer("'x'") == (
        "The answer 'x' does not appear in any output of your code or in any variable.")
    assert prompts.ungrounded_answer("['x', 'y']", "'y'") == (
        "The answer ['x', 'y'] has 'y', which does not appear in any output of your code "
        "or in any variable.")
    assert prompts.question_with_type("How many?", "int") == "How many? (answer type: int)"
    assert prompts.question_with_type("How many?", None) == "How many?"


def test_the_warnings_about_restored_names():
    assert prompts.restored_note([], [], []) is None
    assert prompts.restored_note(["FINAL"], ["context", "data"], ["lookup"]) == (
        "Warning: FINAL is reserved; the original was restored.\n"
        "Warning: context, data are the task's input and read-only; the original was "
        "restored. Store results under a new name.\n"
        "Warning: lookup is a tool of the user's and read-only (its code, defaults and the "
        "globals it reads); the original was restored.")


def test_what_a_failed_sub_call_returns():
    assert prompts.sub_call_error("boom") == "Error: boom"
    assert prompts.sub_run_failed("stuck", "step 3 repeats step 2") == (
        "Error: the sub-run ended without an answer (stuck: step 3 repeats step 2)")
    assert prompts.sub_call_prompt("Sum it.") == "Sum it."
    assert prompts.sub_call_prompt("Sum it.", [1, 2]) == "Sum it.\n\n[1, 2]"


def test_what_a_repeated_step_repeats():
    rep = Repetition(2, ("code", "error"), "NameError: name 'x' is not defined")
    assert prompts.repeated_step(rep) == (
        "step 2 (same code, same error: NameError: name 'x' is not defined)")
    near = Repetition(1, ("near",))
    assert prompts.repeated_step(near) == "step 1 (same code and output but for their numbers)"
    assert prompts.repeated_step(Repetition(4, ("near",), "KeyError: 'k7'")) == (
        "step 4 (same code and error but for their numbers: KeyError: 'k7')")
    assert "use a loop in one step" in prompts.repetition_message(near)
    assert "use a loop" not in prompts.repetition_message(rep)
    cut = prompts.repeated_step(Repetition(3, ("error",), "E" * 300), error_chars=10)
    assert cut == "step 3 (same error: EEEEEEE...)"
    assert prompts.repetition_message(rep).startswith(
        "Your step repeats step 2 (same code, same error: NameError: ")
    assert prompts.stuck_message(rep).startswith("Your step repeats step 2 (same code, ")


def string_literals(path: Path) -> list[str]:
    """The string constants of a module's code (f-strings' text parts included), its
    docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                       ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings]


@pytest.mark.parametrize("words", [
    "Your FINAL was not accepted", "FINAL not accepted", "FINAL_VAR failed",
    "The answer must be of type", "does not appear in any output", "(answer type:",
    "the original was restored", "the sub-run ended without an answer",
    "same error: ",
])
def test_no_other_engine_module_builds_the_models_texts(words):
    assert any(words in text for text in string_literals(ENGINE / "prompts.py"))
    builders = [path.relative_to(ENGINE).as_posix() for path in sorted(ENGINE.rglob("*.py"))
                if path.name != "prompts.py"
                and any(words in text for text in string_literals(path))]
    assert builders == []
