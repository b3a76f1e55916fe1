"""PlainExecutor: model code run with ``exec`` in a dict that persists between steps,
its output captured, FINAL turned into ``final_output``, errors given back as text."""

from __future__ import annotations

import builtins

import pytest

from rlm_kernel.executors import PlainExecutor, combined_output
from rlm_kernel.executors.host_state import builtins_note
from rlm_kernel.executors.timeouts import timeout_message
from rlm_kernel.repl_types import REPLResult
from rlm_kernel.termination import FINAL, FINAL_VAR
from rlm_kernel.text import cut_marker


def test_the_namespace_persists_between_steps_and_is_the_one_given():
    namespace = {"context": "abc"}
    ex = PlainExecutor(namespace)
    ex.execute("n = len(context)")
    res = ex.execute("n += 1\nprint(n)")
    assert res.success and res.stdout == "4\n" and res.stderr == ""
    assert ex.namespace is namespace and namespace["n"] == 4
    assert namespace["__name__"] == "__rlm__"
    assert res.locals is namespace  # a reference, not a copy


def test_a_trailing_expression_is_shown_and_bound_to_underscore():
    ex = PlainExecutor()
    res = ex.execute("x = [1, 2]\nx + [3]")
    assert res.stdout == "[1, 2, 3]\n" and ex.namespace["_"] == [1, 2, 3]
    assert ex.execute("None").stdout == ""  # None is not shown
    assert ex.execute("'text'").stdout == "'text'\n"  # repr, as IPython shows it


@pytest.mark.parametrize("kind", ["in-process", "isolated"])
def test_model_code_compiles_without_the_executors_future_imports(kind):
    """Model code is compiled with no ``from __future__`` statement of the executor's own
    module: a ``@dataclass`` of model code works (with ``annotations`` inherited its types
    were strings that dataclasses looked up in a module not in ``sys.modules``)."""
    from rlm_kernel.executors.isolated import IsolatedExecutor

    code = ("from dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\n"
            "print(P(3), P.__annotations__)")
    ex = PlainExecutor() if kind == "in-process" else IsolatedExecutor(max_processes=8)
    try:
        res = ex.execute(code)
    finally:
        getattr(ex, "close", lambda: None)()
    assert res.success and res.stdout == "P(x=3) {'x': <class 'int'>}\n", res.stderr


def test_show_last_expr_off_shows_nothing():
    ex = PlainExecutor(show_last_expr=False)
    res = ex.execute("1 + 1")
    assert res.success and res.stdout == "" and "_" not in ex.namespace


def test_an_error_is_text_for_the_model_starting_at_its_own_code():
    ex = PlainExecutor()
    res = ex.execute("def f():\n    return 1 / 0\n\nx = 1\nf()")
    assert not res.success and res.final_output is None
    assert "ZeroDivisionError: division by zero" in res.stderr
    assert "return 1 / 0" in res.stderr  # the step's own source line, via linecache
    assert "<rlm-step-1>" in res.stderr
    assert "plain.py" not in res.stderr  # no frame of the executor itself
    assert ex.namespace["x"] == 1  # what ran before the error is kept


def test_a_syntax_error_is_one_short_message():
    res = PlainExecutor().execute("x = (1,")
    assert not res.success
    assert "SyntaxError" in res.stderr and "Traceback" not in res.stderr


def test_each_step_gets_its_own_file_name():
    ex = PlainExecutor()
    ex.execute("1")
    res = ex.execute("raise ValueError('second')")
    assert "<rlm-step-2>" in res.stderr and "ValueError: second" in res.stderr


def test_final_and_final_var_become_final_output():
    ex = PlainExecutor({"FINAL": FINAL, "FINAL_VAR": FINAL_VAR})
    res = ex.execute("print('before')\nFINAL(42)\nprint('after')")
    assert res.success and res.final_output == {"answer": 42, "type": "direct"}
    assert res.stdout == "before\n"
    res = ex.execute("answer = 'x'\ntry:\n    FINAL_VAR('answer')\nexcept Exception:\n    pass")
    assert res.final_output == {"var": "answer", "type": "variable"}


def test_exit_is_refused_and_the_executor_goes_on():
    ex = PlainExecutor()
    res = ex.execute("import sys\nsys.exit(3)")
    assert not res.success
    assert "SystemExit(3) ignored" in res.stderr
    assert ex.execute("print('still here')").stdout == "still here\n"


def test_a_step_over_its_time_limit_is_stopped_with_the_timeout_line():
    ex = PlainExecutor()
    res = ex.execute("x = 1\nwhile True:\n    pass", timeout=0.3)
    assert not res.success
    assert res.stderr.endswith(timeout_message(0.3))
    assert res.execution_time < 3
    assert ex.namespace["x"] == 1


def test_the_users_interrupt_reaches_the_caller():
    ex = PlainExecutor()
    with pytest.raises(KeyboardInterrupt):  # SIGINT, as Ctrl-C or a kernel interrupt sends it
        ex.execute("import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(5)")
    assert ex.execute("print(1)").success  # and the executor still works


def test_a_keyboard_interrupt_raised_by_model_code_is_a_model_error():
    ex = PlainExecutor()
    res = ex.execute("print('before')\nraise KeyboardInterrupt")
    assert not res.success and "KeyboardInterrupt" in res.stderr and res.stdout == "before\n"


def test_output_is_streamed_by_name_and_capped_at_max_output_chars():
    chunks = []
    ex = PlainExecutor(max_output_chars=100)
    res = ex.execute("import sys\nprint('x' * 400)\nn = sys.stderr.write('oops')",
                     on_output=lambda stream, text: chunks.append((stream, text)))
    assert res.stdout == "x" * 66 + "\n" + cut_marker(301) + "\n" + "x" * 33 + "\n"
    assert ("stderr", "oops") in chunks
    live = "".join(text for stream, text in chunks if stream == "stdout")
    assert live.startswith("x" * 100) and "not shown live" in live


def test_changed_builtins_are_undone_and_told_to_the_model():
    original = builtins.len
    res = PlainExecutor().execute("import builtins\nbuiltins.len = lambda x: 0")
    assert builtins.len is original
    assert res.stderr == builtins_note(["len"])


def test_secret_environment_values_are_redacted(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-0123456789")
    res = PlainExecutor().execute(
        "import os, sys\nprint(os.environ['MY_SERVICE_TOKEN'])\n"
        "n = sys.stderr.write(os.environ['MY_SERVICE_TOKEN'])")
    assert res.stdout == "[redacted MY_SERVICE_TOKEN]\n"
    assert res.stderr == "[redacted MY_SERVICE_TOKEN]"


@pytest.mark.parametrize(("stdout", "stderr", "combined"), [
    ("out\n", "err", "out\nerr"),
    ("out", "err", "out\nerr"),
    ("out\n", "", "out\n"),
    ("", "err", "err"),
    ("", "", ""),
])
def test_combined_output_is_stdout_then_stderr_on_a_new_line(stdout, stderr, combined):
    result = REPLResult(stdout=stdout, stderr=stderr, locals={}, execution_time=0.0)
    assert combined_output(result) == combined
