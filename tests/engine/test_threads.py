"""Runs started from several threads of one process (a user's thread pool, RLM.map on a
ThreadPoolExecutor, a Dask worker with several threads): every run answers on its own
budget, each step's output is its own (in-process steps take turns: they share
sys.stdout), and the process's sys.stdout is left as it was."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.replies import block
from tests.scripted import scripted_rlm


def _task(i: int):
    rlm, _ = scripted_rlm([
        block(f"import time\ntime.sleep(0.05)\nprint('mark-{i}')\nnote = llm_query('q{i}')"),
        block(f"FINAL('answer-{i}')"),
    ], sub_replies=[f"sub-{i}"], executor="in-process")
    return rlm.run(f"task {i}")


@pytest.mark.parametrize("workers", [4])
def test_in_process_runs_from_a_thread_pool_each_answer_with_their_own_output(workers):
    before = sys.stdout, sys.stderr
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(_task, range(8)))
    # A pool thread that started while another thread's run was in a step is not taken
    # for a thread that step left running: its run's calls are not refused, its output kept.
    assert [r.stopped_by for r in results] == ["final"] * 8
    assert [r.answer for r in results] == [f"answer-{i}" for i in range(8)]
    for i, r in enumerate(results):
        output = r.history.entries[0].output
        assert f"mark-{i}" in output
        assert "mark-" not in output.replace(f"mark-{i}", "")  # no other run's print
    # Concurrent steps swapping sys.stdout would leave one step's stream in place: every
    # later print of the process lost.
    assert (sys.stdout, sys.stderr) == before
