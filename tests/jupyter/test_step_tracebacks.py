"""Step errors in the notebook: an in-process step's traceback of a failed helper call
ends at the model's line (the shell executor); an isolated step's error is an
IPython-formatted ``error`` output, not stderr text (its code named as a cell's: its own
count in the RLM kernel, the task cell's in a stock shell).  This process's IPython
shell and a scripted model (the magic's mechanics); isolated steps run in real workers.
The same views in a real kernel: tests/jupyter/test_magic_isolated.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rlm_kernel.executors.tracebacks import PACKAGE_DIR
from rlm_kernel.jupyter.isolated_steps import TracebackHold
from tests.jupyter.scripted_magic import magics, quiet_shell, script
from tests.replies import block

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture()
def shell(ip):
    yield from quiet_shell(ip, ("context", "rlm_answer", "f", "y", "x", "rlm_history"))


def run_task(shell, monkeypatch, codes: list[str], options: str = "") -> object:
    script(monkeypatch, [block(c) for c in codes] + [block("FINAL('done')")])
    shell.user_ns["context"] = "alpha\nbeta\n"
    shell.run_cell(f"%%rlm {options}\nWhat?")
    return list(magics(shell).runs.values())[-1]


def errors_of(run) -> list[dict]:
    return [[o for o in outs if o["output_type"] == "error"] for outs in run.step_outputs]


@pytest.mark.parametrize("options", ["", "--isolated"])
def test_a_failed_helper_call_in_a_step_cell_ends_at_the_models_line(
        shell, monkeypatch, options):
    run = run_task(shell, monkeypatch, ["x = 1\nhits = search('(', regex=True)",
                                        "SHOW_VARS(1)"], options)
    for errors in errors_of(run)[:2]:
        assert len(errors) == 1
        text = ANSI.sub("", "\n".join(errors[0]["traceback"]))
        assert PACKAGE_DIR not in text and "rlm_kernel/" not in text, text
        assert re.search(r"Cell In\[\d+\], line \d", text), text
    first, second = (e[0] for e in errors_of(run)[:2])
    assert first["ename"] == "error" and "unterminated subpattern" in first["evalue"]
    assert second["ename"] == "TypeError" and "takes 0 positional" in second["evalue"]
    # the model read the same, trimmed, as text
    entry = run.result.history.entries[0]
    assert "helpers.py" not in entry.output and "unterminated subpattern" in entry.output


def test_isolated_steps_in_a_stock_shell_take_no_counts_and_show_rich_errors(shell,
                                                                             monkeypatch):
    # a stock shell numbers the task cell from its counter: steps take no count there
    # (shell_executor.numbers_steps; in the RLM kernel they do: test_magic_isolated.py)
    before, history = shell.execution_count, list(shell.user_ns["In"])
    run = run_task(shell, monkeypatch, ["def f(x):\n    return x / 0\nprint('made f')",
                                        "y = 1\nf(y)", "x = (\n"], "--isolated")
    assert run.execution_counts == [None, None, None, None]
    assert shell.execution_count == before and shell.user_ns["In"] == history
    # IPython names the steps' code after the running cell, as an in-process step's
    counts = [before - 1] * 3
    errors = errors_of(run)
    assert errors[0] == []
    division = errors[1][0]
    assert (division["ename"], division["evalue"]) == ("ZeroDivisionError", "division by zero")
    text = ANSI.sub("", "\n".join(division["traceback"]))
    # the step's own cell and the earlier cell that defined f, as IPython names cells
    assert f"Cell In[{counts[1]}], line 2" in text and f"Cell In[{counts[0]}], line 2" in text
    assert "----> 2 f(y)" in text and "return x / 0" in text
    syntax = errors[2][0]
    assert syntax["ename"] == "SyntaxError"
    assert f"Cell In[{counts[2]}], line 1" in ANSI.sub("", "\n".join(syntax["traceback"]))
    # the traceback is not also shown as stderr text; the model still reads it as text
    for outs in run.step_outputs:
        assert not any("Traceback (most recent call last)" in o.get("text", "") for o in outs)
    assert "ZeroDivisionError: division by zero" in run.result.history.entries[1].output


def test_stderr_before_a_traceback_is_shown_as_it_comes():
    hold = TracebackHold()
    assert hold.feed("warning: odd\nTrace") == "warning: odd\n"  # may become a traceback
    assert hold.feed("back (most recent call last):\n  File x\n") == ""
    assert hold.feed("ValueError: v\n") == ""
    assert hold.release() == ("Traceback (most recent call last):\n  File x\n"
                              "ValueError: v\n")
    hold = TracebackHold()
    assert hold.feed("Trace") == ""
    assert hold.feed("s of a run\n") == "Traces of a run\n"  # not one after all
    assert hold.feed("50%\r") == "50%\r" and hold.feed("Traceback") == "Traceback"  # mid-line
    assert hold.release() == ""


def test_a_forged_error_report_reads_no_file_of_the_host(ip):
    """The worker's report is data model code may have forged: a frame naming a file
    outside the Python installation is shown by name only (never read here), a line
    number past any file's is bounded, and the message is the report's."""
    import json
    import time

    from rlm_kernel.jupyter.isolated_steps import error_output

    secret = Path("/etc/hostname")
    report = {"ename": "ValueError", "evalue": "bad", "module": "builtins",
              "sources": {"<rlm-step-1>": "x = 1\nparse(x)\n"},
              "frames": [["<rlm-step-1>", 2, "<module>"], [str(secret), 1, "read"],
                         [json.__file__, 10**12, "loads"], ["<rlm-step-1>", "nan", "f"]]}
    start = time.monotonic()
    with pytest.raises(ValueError):  # a line that is no number: the caller shows the text
        error_output(ip, report, {})
    report["frames"].pop()
    out = error_output(ip, report, {"x = 1\nparse(x)\n": 41})
    assert time.monotonic() - start < 5
    text = ANSI.sub("", "\n".join(out["traceback"]))
    assert (out["ename"], out["evalue"]) == ("ValueError", "bad")
    assert "Cell In[41], line 2" in text and "----> 2 parse(x)" in text
    assert f"<isolated REPL: {secret}>" in text
    if secret.exists() and secret.read_text().strip():
        assert secret.read_text().strip() not in text
    assert "ValueError: bad" in text


def test_in_a_real_kernel_an_in_process_steps_helper_error_ends_at_its_line(kc):
    from tests.kernel_client import announce_frontend, execute, script_model

    script_model(kc, [block("x = 1\nhits = search('(', regex=True)"),
                      block("FINAL('done')")])
    execute(kc, "context = 'alpha beta'")
    announce_frontend(kc)
    reply, messages = execute(kc, "%%rlm\nSearch for a parenthesis.", cell_id="task")
    assert reply["content"]["status"] == "ok", reply["content"]
    errors = [m["content"]["data"]["output"] for m in messages
              if m["msg_type"] == "comm_msg"
              and m["content"]["data"].get("type") == "step_output"
              and m["content"]["data"]["output"]["output_type"] == "error"]
    assert len(errors) == 1 and errors[0]["ename"] == "error", errors
    text = ANSI.sub("", "\n".join(errors[0]["traceback"]))
    assert "----> 2 hits = search('(', regex=True)" in text, text
    assert "rlm_kernel/" not in text and "helpers.py" not in text, text
    assert text.rstrip().endswith("error: missing ), unterminated subpattern at position 0")


def test_a_traceback_the_step_printed_and_went_on_from_is_shown_as_text():
    """traceback.print_exc() in a step that goes on: its text is shown once more output
    comes past the patience, not held to the step's end; a traceback with nothing after
    it stays held (the step's own error)."""
    now = [0.0]
    hold = TracebackHold(patience=1.0, clock=lambda: now[0])
    printed = "Traceback (most recent call last):\n  File x\nKeyError: 'k'\n"
    assert hold.feed(printed) == ""
    now[0] = 0.5
    assert hold.feed("more\n") == "" and hold.stale() == ""  # soon after: still held
    now[0] = 3.0
    assert hold.stale() == printed + "more\n"  # other output, later: the step went on
    assert hold.feed("done\n") == "done\n"
    assert hold.feed(printed) == "" and hold.release() == printed
