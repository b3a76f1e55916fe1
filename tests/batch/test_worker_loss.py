"""A worker process killed (SIGKILL) in the middle of a batch: Dask reschedules its task
on a worker that lives, and the batch ends with every id written once.  Its own module,
so its LocalCluster (whose nanny restarts the killed worker) is its alone."""

from __future__ import annotations

import os
import signal
import threading
import time

from rlm_kernel.batch import ResultsFile, batch_token, task_key
from tests.batch.fleet import batch, read_lines, worker_pids, write_tasks


def test_a_worker_killed_mid_batch_loses_no_task_and_writes_none_twice(client, tmp_path,
                                                                        capsys):
    texts = {f"t{i}": f"1.0:w{i}" for i in range(6)}
    tasks = write_tasks(tmp_path, texts)
    out = tmp_path / "results.jsonl"
    pids = worker_pids(client)
    ended: dict[str, int] = {}
    runner = threading.Thread(target=lambda: ended.setdefault("code", batch(client, tasks, out)))
    runner.start()
    deadline = time.monotonic() + 60
    busy: list[tuple[str, tuple[str, ...]]] = []
    while not busy and time.monotonic() < deadline:
        busy = [(w, tuple(keys)) for w, keys in client.processing().items() if keys]
        time.sleep(0.05)
    assert busy, "no task started"
    time.sleep(0.4)  # inside the task's 1 s of work
    victim, keys = busy[0]
    os.kill(pids[victim], signal.SIGKILL)
    runner.join(180)
    assert not runner.is_alive()
    assert ended["code"] == 0
    lines = read_lines(out)
    ids = [line["id"] for line in lines]
    assert sorted(ids) == sorted(texts)  # none lost, none twice
    assert all(line["answer"] == texts[line["id"]][4:].upper() for line in lines)
    with ResultsFile(out) as results:
        token = batch_token(results)
    killed = next(line for line in lines if task_key(line["id"], token) == keys[0])
    assert killed["worker"] != victim and killed["stopped_by"] == "final"
    assert "6 answered, 0 failed" in capsys.readouterr().err
