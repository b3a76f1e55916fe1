"""A run's result is never lost to a failing executor: once the run has begun, a worker
that dies and cannot be started again (``WorkerError``), in a step, between steps or in
the clean-up after the run (past its deadline too), or an ``OSError`` of the executor,
ends the run with ``stopped_by`` ``"error"``, one readable ``error`` and the steps so
far; nothing is raised.  Real isolated workers (bubblewrap), killed for real; their
restart is made to fail by replacing the executor's ``_start`` after its first start
(what a sandbox that can no longer be built, or a machine out of processes, does).
Scripted model (the loop's mechanics)."""

from __future__ import annotations

import errno
import logging
import os
import signal
import time

import pytest

from rlm_kernel.engine import RLM
from rlm_kernel.executors import PlainExecutor
from rlm_kernel.executors.isolated import IsolatedExecutor, WorkerError
from rlm_kernel.models.scripted import ScriptedModel
from tests.replies import block
from tests.scripted import SCRIPTED_SETTINGS, scripted_rlm

NO_RESTART = "the isolated REPL process did not start (test: no sandbox can be built now)"


@pytest.fixture()
def ex():
    executor = IsolatedExecutor(memory_limit=1 << 30)
    try:
        yield executor
    finally:
        executor.close()


def no_restart(executor: IsolatedExecutor, monkeypatch) -> list[float]:
    """From now on the executor's worker cannot be started again; returns the list of
    the times a start was tried."""
    tried: list[float] = []

    def refuse() -> None:
        tried.append(time.monotonic())
        raise WorkerError(NO_RESTART)

    monkeypatch.setattr(executor, "_start", refuse)
    return tried


def kill_worker(executor: IsolatedExecutor) -> None:
    """SIGKILL the worker from the host and wait until it is gone."""
    pid = executor.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    executor._child.proc.wait(10)  # bubblewrap ends with the worker (its init)


def test_a_worker_that_dies_in_a_step_and_cannot_restart_ends_the_run(ex, monkeypatch):
    tried = no_restart(ex, monkeypatch)
    rlm, _ = scripted_rlm([block("rows = [1, 2, 3]\nprint('kept', len(rows))"),
                           block("import os, signal\nprint('going')\n"
                                 "os.kill(os.getpid(), signal.SIGKILL)"),
                           block("FINAL('never')")])
    res = rlm.run("Count the rows.", context="data", executor=ex)
    assert res.stopped_by == "error"
    assert res.error == NO_RESTART  # one readable line, not "internal error: ..."
    assert res.traceback is None
    first, second = res.history.entries
    assert "kept 3" in first.output
    assert "os.kill" in second.code and second.output.endswith(NO_RESTART)
    assert res.answer is None and res.new_variables == []
    assert len(tried) == 1  # the clean-up does not try a gone worker again


def test_a_worker_lost_after_final_past_the_deadline_keeps_the_result(ex, monkeypatch):
    """The clean-up after the run: the worker dies once the step has finished, the run's
    time budget runs out, and every restart fails (reading the variables the run made
    asks the worker twice at most)."""
    tried: list[list[float]] = []

    def observer(event) -> None:
        if event.kind == "step_finished" and event.step == 1:
            kill_worker(ex)
            tried.append(no_restart(ex, monkeypatch))
            time.sleep(1.5)  # past max_seconds: the next model call ends the run

    lm = ScriptedModel([block("made = [1, 2]\nprint(len(made))"), block("FINAL('late')")])
    rlm = RLM(root_client=lm, sub_client=lm, observer=observer, max_seconds=1.0,
              **SCRIPTED_SETTINGS)
    start = time.monotonic()
    res = rlm.run("Make a list.", context="data", executor=ex)
    assert time.monotonic() - start < 15  # the failed restarts wait no longer
    assert res.stopped_by == "error"
    assert res.error == (f"time budget of 1 s used up; after the run, {NO_RESTART} (the "
                         "variables it made are not listed)")
    assert len(res.history.entries) == 1 and res.history.entries[0].output.strip() == "2"
    assert res.new_variables == []
    assert 1 <= len(tried[0]) <= 2


def test_a_worker_lost_after_an_accepted_answer_keeps_the_answer(ex, monkeypatch):
    def observer(event) -> None:
        if event.kind == "step_finished" and event.step == 1:
            kill_worker(ex)
            no_restart(ex, monkeypatch)

    lm = ScriptedModel([block("made = [1, 2]\nFINAL('two')")])
    rlm = RLM(root_client=lm, sub_client=lm, observer=observer, **SCRIPTED_SETTINGS)
    res = rlm.run("Make a list.", context="data", executor=ex)
    assert res.answer == "two" and len(res.history.entries) == 1
    assert res.stopped_by == "error"
    assert res.error == f"after the run, {NO_RESTART} (the variables it made are not listed)"


def test_a_run_that_makes_its_own_worker_returns_its_result(monkeypatch):
    """``RLM.run`` without an executor: it starts an isolated one and closes it."""
    made: list[IsolatedExecutor] = []
    real_start = IsolatedExecutor._start

    def first_start_only(self) -> None:
        if self in made:
            raise WorkerError(NO_RESTART)
        made.append(self)
        real_start(self)

    monkeypatch.setattr(IsolatedExecutor, "_start", first_start_only)
    rlm, _ = scripted_rlm([block("x = 1\nprint('one')"),
                           block("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")],
                          executor="isolated")
    res = rlm.run("Go.", context="data")
    assert (res.stopped_by, res.error, res.steps) == ("error", NO_RESTART, 2)
    assert made and made[0].pid is None  # closed


def test_candidates_keep_the_vote_of_those_that_ran(ex, monkeypatch):
    """Candidate 1 answers; candidate 2 kills the worker, which cannot start again:
    the result is candidate 1's answer, both candidates are summarised, and the error
    says the variables are gone."""
    replies = [block("a = 1\nFINAL('one')"),
               block("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")]
    rlm, _ = scripted_rlm(replies, candidates=3, candidates_early_stop=False)

    def observer(event) -> None:
        if event.kind == "candidate_started" and event.candidate == 2:
            no_restart(ex, monkeypatch)

    rlm.observer = observer
    res = rlm.run("Answer.", context="data", executor=ex)
    assert res.answer == "one"
    assert [c["stopped_by"] for c in res.candidates] == ["final", "error"]
    assert res.stopped_by == "error" and NO_RESTART in res.error


def test_an_oserror_of_the_in_process_executor_ends_the_run_readably(caplog):
    class OutOfFiles(PlainExecutor):
        """An executor whose second step finds the process out of file descriptors."""

        steps = 0

        def execute(self, code, **kwargs):
            self.steps += 1
            if self.steps == 2:
                raise OSError(errno.EMFILE, "Too many open files")
            return super().execute(code, **kwargs)

    def tool(text: str) -> str:
        """Echo."""
        return text

    rlm, _ = scripted_rlm([block("x = tool('a')\nprint(x)"), block("tool = None\nprint(1)"),
                           block("FINAL(1)")], tools=[tool])
    ex = OutOfFiles()
    with caplog.at_level(logging.WARNING, logger="rlm_kernel.engine.run"):
        res = rlm.run("Go.", context="data", executor=ex)
    assert res.stopped_by == "error"
    assert res.error == "the REPL failed: OSError: [Errno 24] Too many open files"
    assert [e.output.strip() for e in res.history.entries][0] == "a"
    assert res.history.entries[1].output.endswith("Too many open files")
    # the in-process namespace is still there: the clean-up ran (the user's tool back)
    assert ex.namespace["tool"] is tool
    assert [v.name for v in res.new_variables] == ["x"]
    [record] = [r for r in caplog.records if r.name == "rlm_kernel.engine.run"]
    assert record.levelno == logging.WARNING and record.exc_info  # where it came from
