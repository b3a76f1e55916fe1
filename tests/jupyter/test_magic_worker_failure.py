"""An isolated task in the notebook whose worker fails: the task's result is kept and
the cell says what failed in one line.  In-process IPython shell, scripted model; the
worker is a real sandbox, killed for real, whose restart is made to fail (its
``_start`` replaced after the first start)."""

from __future__ import annotations

import os
import signal

import pytest
from IPython.core.error import UsageError

from rlm_kernel.executors.isolated import WorkerError
from rlm_kernel.jupyter.session import NotebookSession
from tests.jupyter.scripted_magic import magics, quiet_shell, script
from tests.replies import block

NO_RESTART = "the isolated REPL process did not start (test: no sandbox can be built now)"


@pytest.fixture()
def shell(ip):
    yield from quiet_shell(ip, ("rlm_answer", "rows", "big", "made"))


def test_a_worker_lost_after_the_run_keeps_the_answer(shell, monkeypatch, capsys):
    """The run ends with FINAL; then the worker dies and cannot start again, so the
    ``--results`` it holds cannot be copied back: the answer is the cell's, the loss is
    one line on stderr, and the next task runs."""
    real_run = NotebookSession.run

    def run_then_lose_the_worker(self, rlm, question, plan, **kwargs):
        result = real_run(self, rlm, question, plan, **kwargs)
        os.kill(plan.executor.pid, signal.SIGKILL)
        plan.executor._child.proc.wait(10)

        def refuse() -> None:
            raise WorkerError(NO_RESTART)

        monkeypatch.setattr(plan.executor, "_start", refuse)
        return result

    monkeypatch.setattr(NotebookSession, "run", run_then_lose_the_worker)
    script(monkeypatch, [block("made = [r * 2 for r in rows]\nFINAL(sum(made))")])
    shell.user_ns["rows"] = [1, 2, 3]
    shell.run_cell("%%rlm --isolated --results made\nDouble the rows and add them up.")
    assert shell.user_ns["rlm_answer"] == 12
    assert "made" not in shell.user_ns
    err = capsys.readouterr().err
    assert f"RLM: --results: nothing copied back: {NO_RESTART}" in err
    assert "Traceback" not in err
    monkeypatch.setattr(NotebookSession, "run", real_run)
    script(monkeypatch, [block("FINAL(len(rows))")])
    shell.run_cell("%%rlm --isolated --new\nHow many rows?")
    assert shell.user_ns["rlm_answer"] == 3


def test_an_input_too_large_for_the_workers_memory_is_one_usage_error(shell, monkeypatch):
    script(monkeypatch, [block("FINAL(len(big))")])
    shell.user_ns["big"] = "x" * (40 << 20)  # loading it takes about twice that, > 64 MiB
    with pytest.raises(UsageError, match=r"%rlm --isolated: the variable 'big' is .* too "
                                         r"large .* Raise the limit"):
        magics(shell).rlm("--isolated --memory-limit 67108864 --context big -- How long?")
