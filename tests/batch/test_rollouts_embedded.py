"""``rlm batch --rollouts 3`` on the real embedded model, as a user runs it: two tasks
built from a real library's sdist (a seeded bug its shipped tests catch, those tests
held back; bench/rollout_tasks.py), three attempts each on a LocalCluster of 2 worker
processes.  Whether the model fixes the bug is the bench's question
(bench/bench_rollouts.py), not this test's: here each attempt is scored by its
held-back tests, every copy is removed, and the file loads with ``datasets``."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from bench.rollout_tasks import build_tasks
from tests.batch.fleet import read_lines

pytestmark = pytest.mark.slow


def test_two_tasks_three_attempts_each_on_the_embedded_model(tmp_path: Path) -> None:
    rows = build_tasks(2, 3, tmp_path / "tasks")
    tasks = tmp_path / "tasks" / "tasks.jsonl"
    held = {row["id"]: sorted(p.name for p in Path(str(row["held_back"])).iterdir())
            for row in rows}
    before = set(Path(tempfile.gettempdir()).glob("rlm-rollout-*"))
    out = tmp_path / "rollouts.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "rlm_kernel.cli", "batch", str(tasks), "--out", str(out),
         "--cluster", "local:2", "--rollouts", "3", "--max-iterations", "1",
         "--max-seconds", "40", "--no-progress"],
        capture_output=True, text=True, timeout=1500)
    # 1: an attempt without an answer (one step, 40 s: the model's quality is the bench's)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    lines = read_lines(out)
    assert sorted(line["id"] for line in lines) == sorted(
        f"{row['id']}#{k}" for row in rows for k in range(3))
    for line in lines:
        metrics = line["metrics"]
        # scored by the held-back tests, after the loop, whatever the model did
        assert line["reward_error"] is None, line["reward_error"]
        assert metrics["total"] >= 1 and metrics["walled"] in (True, False)
        assert line["reward"] == pytest.approx(metrics["passed"] / metrics["total"])
        assert held[line["group"]] and line["messages"][-1]["role"] == "assistant"
        assert line["copy"] is None and line["llm_calls"] >= 1
    assert set(Path(tempfile.gettempdir()).glob("rlm-rollout-*")) == before
    import datasets

    ds = datasets.load_dataset("json", data_files=str(out), split="train")
    assert ds.num_rows == 6 and set(ds["group"]) == {row["id"] for row in rows}
    json.dumps(lines)  # plain data
