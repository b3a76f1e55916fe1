"""A failed helper call's traceback ends at the model's own line, in both executors: the
framework's frames (engine/repl_functions.py, context/helpers.py, the worker's host-function
stubs ...) are hidden, the error type and message are kept; model code's own frames and
those of libraries it called itself stay.  Scripted runs (the loop's mechanics), real
isolated workers."""

from __future__ import annotations

import sys

import pytest

from rlm_kernel import RLM
from rlm_kernel.executors import PlainExecutor, new_executor
from rlm_kernel.executors.tracebacks import (
    PACKAGE_DIR,
    format_model_traceback,
    is_framework_file,
)
from rlm_kernel.models.scripted import ScriptedModel
from tests.replies import block

EXECUTORS = ["in-process"] + (["isolated"] if sys.platform == "linux" else [])

FAILING_CALLS = {  # a helper call -> what the model must still read of its error
    "hits = search('(', regex=True)": "missing ), unterminated subpattern",
    "SHOW_VARS(1)": "TypeError: show_vars() takes 0 positional arguments but 1 was given",
    "parts = split_documents(42, header=5)": "TypeError: split_documents: header is the "
                                             "header line as a regular expression",
    "outline = code_outline(None, header=3)": "TypeError: code_outline: header is",
    "llm_query('q', model=3)": "TypeError: llm_query: model is a model name such as",
    "answers = llm_query_batched(5)": "TypeError: llm_query_batched takes a list of prompts",
    "FINAL_VAR(42)": "TypeError: FINAL_VAR takes the variable's NAME as a string",
}


def run_steps(kind: str, codes: list[str]) -> list[str]:
    """The output of each step of a scripted run over ``codes`` (then FINAL)."""
    lm = ScriptedModel([block(c) for c in codes] + [block("FINAL('done')")] * 3)
    executor = new_executor(kind)
    try:
        res = RLM(root_client=lm, sub_client=lm, verify_answer=False, max_iterations=10,
                  ground_answer=False).run("What?", context="alpha\nbeta\n", executor=executor)
    finally:
        close = getattr(executor, "close", None)
        if close:
            close()
    return [e.output for e in res.history.entries]


@pytest.mark.parametrize("kind", EXECUTORS)
def test_a_failed_helper_call_ends_at_the_models_line(kind):
    codes = [f"x = 1\n{call}" for call in FAILING_CALLS]
    outputs = run_steps(kind, codes)
    for code, output, kept in zip(codes, outputs, FAILING_CALLS.values(), strict=False):
        assert "Traceback (most recent call last)" in output, (code, output)
        assert PACKAGE_DIR not in output and "rlm_kernel/" not in output, (code, output)
        assert "During handling" not in output, output
        lines = output.rstrip("\n").splitlines()
        assert lines[1].startswith('  File "<rlm-step-') and ", line 2, in <module>" in lines[1]
        assert lines[2].strip() == code.splitlines()[1]  # the model's own line, last frame
        assert not any(line.startswith("  File ") for line in lines[3:]), output
        assert kept in output  # the error's type and message stay


@pytest.mark.parametrize("kind", EXECUTORS)
def test_model_frames_and_libraries_it_called_stay(kind):
    outputs = run_steps(kind, ["def parse(s):\n    import json\n    return json.loads(s)\n"
                               "parse('{')"])
    text = outputs[0]
    assert text.count('File "<rlm-step-1>"') == 2  # the module line and parse()
    assert "json/__init__.py" in text and "json/decoder.py" in text  # called by the model
    assert "JSONDecodeError: Expecting property name" in text


def test_a_frame_of_the_package_is_the_frameworks():
    assert is_framework_file(PACKAGE_DIR + "engine/repl_functions.py")
    assert not is_framework_file("<rlm-step-3>")
    assert not is_framework_file(sys.modules["json"].__file__)


def test_a_context_raised_inside_the_framework_is_not_shown():
    """An error the framework raised while handling its own (``raise ... from``, or in an
    ``except``) shows as the model's line and the last error, nothing of the first."""
    source = ("def probe(*args):\n"
              "    try:\n"
              "        {}['missing']\n"
              "    except KeyError:\n"
              "        raise ValueError('no such record')\n")
    space: dict = {}
    exec(compile(source, PACKAGE_DIR + "context/helpers.py", "exec"), space)  # its frames
    ex = PlainExecutor({"probe": space["probe"]})
    res = ex.execute("probe('loud')")
    assert not res.success
    assert "KeyError" not in res.stderr and "During handling" not in res.stderr
    assert res.stderr.rstrip().endswith("ValueError: no such record")
    # the model's own chain (its try/except around a helper) is kept
    res = ex.execute("try:\n    probe('x')\nexcept ValueError:\n    raise RuntimeError('mine')")
    assert "During handling" in res.stderr and "ValueError: no such record" in res.stderr
    assert "RuntimeError: mine" in res.stderr and PACKAGE_DIR not in res.stderr


def test_a_syntax_error_is_its_message_and_caret():
    try:
        compile("x = (", "<rlm-step-9>", "exec")
    except SyntaxError as exc:
        text = format_model_traceback(exc, "<rlm-step-9>")
    assert text.startswith('  File "<rlm-step-9>", line 1') and "SyntaxError" in text
