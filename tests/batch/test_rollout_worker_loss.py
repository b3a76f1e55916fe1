"""A worker process killed (SIGKILL) in the middle of a rollout batch: Dask reschedules
the attempt it ran, and the batch ends with every attempt written once, each scored.
Its own module, so its LocalCluster (whose nanny restarts the killed worker) is its
alone."""

from __future__ import annotations

import os
import signal
import threading
import time

from rlm_kernel.batch import ResultsFile, batch_token, task_key
from tests.batch.fleet import read_lines, worker_pids
from tests.batch.test_rollouts import cluster, rollout_batch, rollout_tasks

__all__ = ["cluster"]  # the module's cluster fixture, with the rollouts' provider


def test_a_worker_killed_mid_rollouts_loses_no_attempt_and_writes_none_twice(cluster,
                                                                              tmp_path):
    client, _ = cluster
    tasks = rollout_tasks(tmp_path, slow=True)
    out = tmp_path / "rollouts.jsonl"
    pids = worker_pids(client)
    ended: dict[str, int] = {}
    runner = threading.Thread(target=lambda: ended.setdefault(
        "code", rollout_batch(client, tasks, out, "--rollouts", "3")))
    runner.start()
    deadline = time.monotonic() + 60
    busy: list[tuple[str, tuple[str, ...]]] = []
    while time.monotonic() < deadline:
        busy = [(w, tuple(k for k in keys if "fix" in k))
                for w, keys in client.processing().items()]
        busy = [(w, keys) for w, keys in busy if keys]
        if busy:
            break
        time.sleep(0.05)
    assert busy, "no slow attempt started"
    time.sleep(0.5)  # inside the attempt's second of work
    victim, keys = busy[0]
    os.kill(pids[victim], signal.SIGKILL)
    runner.join(240)
    assert not runner.is_alive()
    assert ended["code"] == 0
    lines = read_lines(out)
    ids = sorted(line["id"] for line in lines)
    assert ids == ["cheat#0", "cheat#1", "cheat#2", "fix#0", "fix#1", "fix#2"]  # once each
    with ResultsFile(out) as results:
        token = batch_token(results)
    killed = next(line for line in lines if task_key(line["id"], token) == keys[0])
    assert killed["worker"] != victim and killed["reward"] == 1.0
    assert all(line["reward"] == (1.0 if line["group"] == "fix" else 0.0) for line in lines)
