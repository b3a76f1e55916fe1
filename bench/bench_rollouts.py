"""Benchmark: rollouts (``rlm batch --rollouts K``) on the embedded model, on a Dask
LocalCluster of 1 and then 2 worker processes.

Run by hand (no network; about 10 to 30 minutes on 2 CPU cores with the defaults):

    .venv/bin/python bench/bench_rollouts.py [--tasks 2] [--rollouts 2] [--seed 7]
        [--max-iterations 4] [--workers 1,2]

The tasks are real bugs in a real library: ``bench/rollout_tasks.py`` builds them from
the sdist ``make setup`` fetched (a seeded mutation of the library's code that its
shipped tests catch; those tests held back as the reward).  Each cluster size runs the
same tasks file into its own results file through :func:`rlm_kernel.batch.run_batch`,
as ``rlm batch`` does.  The table gives, per cluster size: attempts per minute, the mean
reward, the share of attempts with reward > 0, the median seconds per attempt, and the
host's overhead per attempt beside the model's time: copying the task's folder and
scoring the copy (median seconds; target <= 1 s), with the batch's wall-clock seconds.
The speed-up of 2 workers over 1 is the ratio of their attempts per minute (on a
2-core machine both workers share the cores with the model's server: expect little).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # rlm_kernel, bench

TARGET_OVERHEAD = 1.0  # seconds of copy + scoring per attempt


def run_size(workers: int, tasks_file: Path, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One rollout batch on a LocalCluster of ``workers`` processes; its figures."""
    from distributed import Client, LocalCluster

    from rlm_kernel.batch import ResultsFile, read_tasks, run_batch
    from rlm_kernel.engine import RLMConfig

    tasks = read_tasks(tasks_file)
    config = RLMConfig(max_iterations=args.max_iterations, max_step_tokens=args.step_tokens,
                       test_timeout=120)

    start = time.monotonic()
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client, \
            ResultsFile(out) as results:
        report = run_batch(tasks, client, config, results, rollouts=args.rollouts)
    seconds = time.monotonic() - start
    lines = [json.loads(line) for line in out.read_text().split("\n") if line.strip()]
    rewards = [line["reward"] for line in lines]
    return {
        "workers": workers, "attempts": len(lines), "seconds": seconds,
        "per_minute": 60 * len(lines) / seconds if seconds else 0.0,
        "mean_reward": statistics.fmean(rewards) if rewards else 0.0,
        "share_positive": sum(r > 0 for r in rewards) / len(rewards) if rewards else 0.0,
        "attempt_seconds": statistics.median(line["seconds"] for line in lines),
        "copy_seconds": statistics.median(line["copy_seconds"] for line in lines),
        "score_seconds": statistics.median(line["score_seconds"] for line in lines),
        "failed": report.failed,
    }


def print_table(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(f"\nRollouts: {args.tasks} tasks x {args.rollouts} attempts, embedded model, "
          f"max_iterations {args.max_iterations}")
    head = (f"{'workers':>7} {'attempts':>8} {'per min':>8} {'mean reward':>11} "
            f"{'reward>0':>8} {'s/attempt':>9} {'copy s':>7} {'score s':>7} "
            f"{'overhead':>8} {'batch s':>8}")
    print(head)
    print("-" * len(head))
    for r in rows:
        overhead = r["copy_seconds"] + r["score_seconds"]
        print(f"{r['workers']:>7} {r['attempts']:>8} {r['per_minute']:>8.2f} "
              f"{r['mean_reward']:>11.3f} {r['share_positive']:>8.0%} "
              f"{r['attempt_seconds']:>9.1f} {r['copy_seconds']:>7.3f} "
              f"{r['score_seconds']:>7.3f} {overhead:>8.3f} {r['seconds']:>8.1f}")
    if len(rows) >= 2 and rows[0]["per_minute"]:
        print(f"\n{rows[-1]['workers']} workers vs {rows[0]['workers']}: "
              f"{rows[-1]['per_minute'] / rows[0]['per_minute']:.2f}x attempts per minute")
    worst = max(r["copy_seconds"] + r["score_seconds"] for r in rows)
    print(f"copy + scoring per attempt: {worst:.3f} s (target <= {TARGET_OVERHEAD:g} s): "
          f"{'met' if worst <= TARGET_OVERHEAD else 'NOT met'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--rollouts", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--max-iterations", type=int, default=4)
    parser.add_argument("--step-tokens", type=int, default=512)
    parser.add_argument("--workers", default="1,2")
    args = parser.parse_args()
    from bench.rollout_tasks import build_tasks

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-rollouts-") as tmp:
        root = Path(tmp)
        build_tasks(args.tasks, args.seed, root / "tasks")
        tasks_file = root / "tasks" / "tasks.jsonl"
        for workers in (int(w) for w in args.workers.split(",")):
            rows.append(run_size(workers, tasks_file, root / f"out-{workers}.jsonl", args))
    print_table(rows, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
