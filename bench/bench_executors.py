"""Benchmark: the isolated executor's cost next to the in-process one and next to an
earlier commit's isolated executor (the baseline), side by side in one run.

Run by hand (about a minute; no model):

    .venv/bin/python bench/bench_executors.py [--steps 200] [--starts 5] [--big]
        [--baseline 20e5271 | --baseline none]

For each executor it measures

* start-up: constructing the executor and running a first trivial step (median of
  ``--starts``; for the isolated one this is the sandbox and its worker starting);
* per step: the median wall time of ``--steps`` trivial steps (``x = 1``), and the
  isolated minus in-process difference (the added overhead);
* moving a context in: binding a 10 MB ``str`` as ``context`` and running a step that
  reads its length (1 GB too with ``--big``, which needs about 6 GB of free memory);
* where no memory cgroup holds the sandbox (an ordinary user), the CPU the host's memory
  watch used while the steps and contexts above ran, in percent of one core.

The baseline column is the isolated executor of ``--baseline`` (a git revision of this
repository, default ``20e5271``: the hand-made wall before bubblewrap), extracted with
``git archive`` into a temporary folder and measured in a subprocess by this same
script; the ratio column is now / baseline.  Issue 25's targets are printed beside the
figures: start-up at most 0.5 s, at most 20 ms added per step, a 1 GB context at most
twice the baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if "RLM_BENCH_BASELINE" not in os.environ:  # the baseline's run imports its own package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlm_kernel.executors import PlainExecutor, close_executor  # noqa: E402
from rlm_kernel.executors.isolated import IsolatedExecutor  # noqa: E402

STEP_TARGET_MS = 20.0
START_TARGET_S = 0.5
BIG_TARGET_RATIO = 2.0
ROOT = Path(__file__).resolve().parents[1]


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def startup(make: Callable[[], Any], starts: int) -> float:
    """Median seconds to make an executor and run a first step."""
    times = []
    for _ in range(starts):
        ex = None

        def start() -> None:
            nonlocal ex
            ex = make()
            ex.execute("x = 1")

        times.append(_timed(start))
        close_executor(ex)
    return statistics.median(times)


def per_step_ms(ex: Any, steps: int) -> float:
    """Median milliseconds of a trivial step."""
    ex.execute("x = 1")
    return statistics.median(_timed(lambda: ex.execute("x = 1")) for _ in range(steps)) * 1e3


def context_ms(ex: Any, size: int) -> float:
    """Milliseconds to bind a ``size``-character context and read its length in a step."""
    text = "x" * size

    def move() -> None:
        ex.namespace["context"] = text
        res = ex.execute("n = len(context)")
        assert res.success, res.stderr

    ms = _timed(move) * 1e3
    del ex.namespace["context"]
    return ms


def measure_isolated(steps: int, starts: int, big: bool) -> dict[str, float]:
    """The isolated executor's figures (this checkout's, or the baseline's when this
    script runs with the baseline's package first on ``sys.path``)."""
    memory = (8 << 30) if big else (4 << 30)
    figures = {"start-up (s)": startup(lambda: IsolatedExecutor(memory_limit=memory), starts)}
    isolated = IsolatedExecutor(memory_limit=memory)
    started = time.perf_counter()
    try:
        figures["per step (ms, median)"] = per_step_ms(isolated, steps)
        figures["10 MB context (ms)"] = context_ms(isolated, 10_000_000)
        if big:
            figures["1 GB context (ms)"] = context_ms(isolated, 1_000_000_000)
        watch = getattr(isolated, "_watch", None)  # the memory watch (no memory cgroup)
        if watch is not None:
            figures["memory watch (% of a core)"] = \
                100 * watch.cpu_seconds / (time.perf_counter() - started)
    finally:
        isolated.close()
    return figures


def measure_plain(steps: int, starts: int, big: bool) -> dict[str, float]:
    """The in-process executor's figures."""
    figures = {"start-up (s)": startup(PlainExecutor, starts)}
    plain = PlainExecutor()
    figures["per step (ms, median)"] = per_step_ms(plain, steps)
    figures["10 MB context (ms)"] = context_ms(plain, 10_000_000)
    if big:
        figures["1 GB context (ms)"] = context_ms(plain, 1_000_000_000)
    return figures


def measure_baseline(revision: str, steps: int, starts: int, big: bool
                     ) -> dict[str, float] | None:
    """The isolated figures of ``revision``'s package, measured in a subprocess; None
    when the revision cannot be extracted (not a git checkout)."""
    with tempfile.TemporaryDirectory(prefix="rlm-baseline-") as folder:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "rlm_kernel"],
                                 capture_output=True)
        if archive.returncode != 0:
            print(f"baseline {revision}: {archive.stderr.decode(errors='replace').strip()}",
                  file=sys.stderr)
            return None
        tar = Path(folder) / "baseline.tar"
        tar.write_bytes(archive.stdout)
        with tarfile.open(tar) as t:
            t.extractall(folder, filter="data")
        env = {**os.environ, "PYTHONPATH": folder, "RLM_BENCH_BASELINE": revision}
        done = subprocess.run(
            [sys.executable, __file__, "--isolated-only", "--steps", str(steps),
             "--starts", str(starts), *(["--big"] if big else [])],
            capture_output=True, text=True, env=env, cwd=folder)
        if done.returncode != 0:
            print(f"baseline {revision} failed: {done.stderr[-2000:]}", file=sys.stderr)
            return None
        return json.loads(done.stdout.strip().splitlines()[-1])


def measure(steps: int, starts: int, big: bool, baseline: str | None = None
            ) -> list[tuple[str, float, float | None, float, str]]:
    """Rows of (what, in-process, baseline isolated or None, isolated, target)."""
    plain = measure_plain(steps, starts, big)
    now = measure_isolated(steps, starts, big)
    before = measure_baseline(baseline, steps, starts, big) if baseline else None
    targets = {"start-up (s)": f"<= {START_TARGET_S} s",
               "per step (ms, median)": f"+{now['per step (ms, median)'] - plain['per step (ms, median)']:.2f} "
                                        f"ms, <= +{STEP_TARGET_MS} ms",
               "1 GB context (ms)": f"<= {BIG_TARGET_RATIO}x the baseline"}
    return [(label, plain.get(label, float("nan")), (before or {}).get(label), now[label],
             targets.get(label, "")) for label in now]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="trivial steps timed")
    parser.add_argument("--starts", type=int, default=5, help="start-ups timed")
    parser.add_argument("--big", action="store_true", help="also move a 1 GB context")
    parser.add_argument("--baseline", default="20e5271",
                        help="git revision whose isolated executor is measured beside "
                             "(none: no baseline)")
    parser.add_argument("--isolated-only", action="store_true",
                        help="print the isolated figures as JSON (the baseline's run)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None
         ) -> list[tuple[str, float, float | None, float, str]]:
    """Measure and print the table; returns its rows."""
    args = parse_args(argv)
    if args.isolated_only:
        print(json.dumps(measure_isolated(args.steps, args.starts, args.big)))
        return []
    baseline = None if args.baseline.lower() == "none" else args.baseline
    rows = measure(args.steps, args.starts, args.big, baseline)
    print(f"{'':24} {'in-process':>12} {'isolated ' + (baseline or '-'):>18} "
          f"{'isolated now':>13} {'now/base':>9}  target")
    for label, p, b, i, target in rows:
        base = f"{b:18.3f}" if b is not None else f"{'-':>18}"
        ratio = f"{i / b:9.2f}" if b else f"{'-':>9}"
        print(f"{label:24} {p:12.3f} {base} {i:13.3f} {ratio}  {target}")
    return rows


if __name__ == "__main__":
    main()
