"""``%%rlm --isolated``: a task whose model code runs in a child process, with the
notebook's variables copied in and only the answer (and ``--results``) copied back.
In-process IPython shell, scripted model (the magic's mechanics); the child is a real
worker process (:mod:`rlm_kernel.executors.isolated`).  The last tests run a real kernel
(jupyter_client): isolated steps look like in-process ones, execution counts and rich
tracebacks."""

from __future__ import annotations

import os
import re

import pytest
from IPython.core.error import UsageError

from tests.jupyter.scripted_magic import magics, quiet_shell, script
from tests.kernel_client import announce_frontend, execute, script_model, start, stop
from tests.replies import block


@pytest.fixture()
def shell(ip):
    yield from quiet_shell(ip, ("context", "rows", "rlm_answer", "big", "pid", "shout", "rlm_history"))


def test_an_isolated_task_runs_elsewhere_and_copies_back_only_what_is_asked(
        shell, monkeypatch, capsys):
    script(monkeypatch, [block("import os\npid = os.getpid()\nbig = [r * 2 for r in rows]\n"
                               "context = 'clobbered'\nprint(pid)\nFINAL(sum(big))")])
    shell.user_ns["rows"] = [1, 2, 3]
    shell.user_ns["context"] = "the user's"
    shell.run_cell("%%rlm --isolated --results big\nDouble the rows and add them up.")
    assert shell.user_ns["rlm_answer"] == 12
    assert shell.user_ns["big"] == [2, 4, 6]  # asked for with --results
    assert "pid" not in shell.user_ns  # not asked for: stays in the child
    assert shell.user_ns["context"] == "the user's"  # the notebook's own is untouched
    run = list(magics(shell).runs.values())[-1]
    printed = run.result.history.entries[0].output.split()[0]
    assert int(printed) != os.getpid()  # the step ran in another process
    # the step cell got the child's output as it was written
    assert any(o.get("name") == "stdout" and printed in o.get("text", "")
               for o in run.step_outputs[0])


def test_the_trait_runs_every_task_isolated(shell, monkeypatch):
    script(monkeypatch, [block("import os\nFINAL(os.getpid())")])
    shell.run_line_magic("config", "RLM.executor = 'isolated'")
    shell.run_cell("%rlm Which process are you?")
    assert shell.user_ns["rlm_answer"] != os.getpid()


def test_a_tool_is_served_from_the_notebook(shell, monkeypatch):
    calls = []

    def shout(text: str) -> str:
        """Upper-case text."""
        calls.append(os.getpid())
        return text.upper()

    shell.user_ns["shout"] = shout
    shell.run_line_magic("rlm", "tools add shout")
    script(monkeypatch, [block("FINAL(shout('hi'))")])
    shell.run_cell("%rlm --isolated Shout hi.")
    assert shell.user_ns["rlm_answer"] == "HI"
    assert calls == [os.getpid()]  # the tool ran in the notebook's process


def test_results_without_isolated_is_a_usage_error(shell, monkeypatch):
    script(monkeypatch, [block("FINAL(1)")])
    with pytest.raises(UsageError, match="--results copies names out of an --isolated"):
        magics(shell).rlm("--results x -- What?")


def test_a_result_the_task_did_not_leave_is_named(shell, monkeypatch, capsys):
    script(monkeypatch, [block("FINAL(1)")])
    shell.run_cell("%rlm --isolated --results nothing_here -- One?")
    assert shell.user_ns["rlm_answer"] == 1
    assert "the task left no nothing_here" in capsys.readouterr().err


def test_workdir_runs_the_task_walled_in_the_folder(shell, monkeypatch, tmp_path):
    (tmp_path / "data.txt").write_text("one\ntwo\n")
    script(monkeypatch, [block("import os\nFINAL([os.getpid(), os.getcwd(), read('data.txt')])")])
    shell.run_cell(f"%rlm --workdir {tmp_path} -- What is in data.txt?")
    pid, cwd, text = shell.user_ns["rlm_answer"]
    assert pid != os.getpid()  # --workdir implies --isolated: the kernel's folder stays
    assert cwd == str(tmp_path.resolve()) and "one" in text
    assert os.getcwd() != str(tmp_path.resolve())


def test_workdir_that_is_not_a_folder_is_a_usage_error(shell, monkeypatch, tmp_path):
    script(monkeypatch, [block("FINAL(1)")])
    with pytest.raises(UsageError, match="is not a folder"):
        magics(shell).rlm(f"--workdir {tmp_path / 'nope'} -- What?")


# -- a real kernel --------------------------------------------------------------------------
ISOLATED_STEPS = ["def f(x):\n    return x / 0\nprint('made f')", "y = 1\nf(y)",
                  "hits = search('(', regex=True)", "FINAL('done')"]


def _run_messages(messages: list[dict]) -> list[dict]:
    return [m["content"]["data"] for m in messages
            if m["msg_type"] in ("comm_open", "comm_msg")
            and "type" in (m["content"].get("data") or {})]


@pytest.mark.parametrize(("kernel", "task"), [
    ("rlm", "Divide by zero, please."),  # a prose task, the trait runs it isolated
    ("python3", "%%rlm --isolated\nDivide by zero, please."),
])
def test_isolated_steps_have_counts_and_rich_tracebacks_in_a_real_kernel(kernel, task):
    km, kc = start(kernel)
    try:
        if kernel == "python3":
            reply, _ = execute(kc, "%load_ext rlm_kernel")
            assert reply["content"]["status"] == "ok"
        script_model(kc, [block(c) for c in ISOLATED_STEPS])
        if kernel == "rlm":
            reply, _ = execute(kc, '%config RLM.executor = "isolated"')
            assert reply["content"]["status"] == "ok"
        reply, _ = execute(kc, "context = 'alpha beta'")
        before = reply["content"]["execution_count"]
        announce_frontend(kc)
        reply, messages = execute(kc, task, cell_id="task")
        assert reply["content"]["status"] == "ok", reply["content"]
        data = _run_messages(messages)
        finished = [d for d in data if d["type"] == "step_finished"]
        counts = [d["execution_count"] for d in finished]
        if kernel == "rlm":
            assert len(counts) == 4 and all(isinstance(c, int) for c in counts), counts
            assert counts == sorted(set(counts)) and counts[0] > before
        else:  # a stock shell numbers the task cell from its counter: steps take none
            assert counts == [None] * 4, counts  # (shell_executor.numbers_steps)
            assert reply["content"]["execution_count"] == before + 1
            counts = [before + 1] * 4  # their code is named after the task cell's
        outputs: dict[int, list[dict]] = {}
        for d in data:
            if d["type"] == "step_output":
                outputs.setdefault(d["step"], []).append(d["output"])
        steps = [d["step"] for d in finished]
        errors = [[o for o in outputs.get(s, []) if o["output_type"] == "error"] for s in steps]
        assert errors[0] == [] and errors[3] == []
        division, search = errors[1][0], errors[2][0]
        assert (division["ename"], division["evalue"]) == ("ZeroDivisionError", "division by zero")
        assert search["ename"] == "error" and "unterminated subpattern" in search["evalue"]
        for err in (division, search):
            text = "\n".join(err["traceback"])
            assert "\x1b[" in text  # coloured, as IPython colours an in-process step's
            plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
            assert "rlm_kernel/" not in plain and "Traceback (most recent call last)" in plain
        plain = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(division["traceback"]))
        assert f"Cell In[{counts[1]}], line 2" in plain and f"Cell In[{counts[0]}], line 2" in plain
        # no step shows its traceback a second time as stderr text
        for s in steps:
            assert not any("Traceback (most recent call last)" in o.get("text", "")
                           for o in outputs.get(s, []) if o["output_type"] == "stream")
    finally:
        stop(km, kc)
