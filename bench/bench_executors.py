"""Benchmark: the isolated executor's cost next to the in-process one, in one run.

Run by hand (a few seconds; no model):

    .venv/bin/python bench/bench_executors.py [--steps 200] [--starts 5] [--big]

For each executor it measures

* start-up: constructing the executor and running a first trivial step (median of
  ``--starts``; for the isolated one this is the worker process starting and setting
  its limits);
* per step: the median wall time of ``--steps`` trivial steps (``x = 1``), and the
  isolated minus in-process difference (the added overhead);
* moving a context in: binding a 10 MB ``str`` as ``context`` and running a step that
  reads its length (1 GB too with ``--big``, which needs about 4 GB of free memory).

The issue's targets are printed beside the figures: at most 50 ms added per step and
at most 1.5 s start-up for the isolated executor.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlm_kernel.executors import PlainExecutor, close_executor  # noqa: E402
from rlm_kernel.executors.isolated import IsolatedExecutor  # noqa: E402

STEP_TARGET_MS = 50.0
START_TARGET_S = 1.5


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


def measure(steps: int, starts: int, big: bool) -> list[tuple[str, float, float, str]]:
    """Rows of (what, in-process, isolated, target)."""
    memory = (8 << 30) if big else (4 << 30)
    rows = [("start-up (s)", startup(PlainExecutor, starts),
             startup(lambda: IsolatedExecutor(memory_limit=memory), starts),
             f"<= {START_TARGET_S} s")]
    plain, isolated = PlainExecutor(), IsolatedExecutor(memory_limit=memory)
    try:
        p, i = per_step_ms(plain, steps), per_step_ms(isolated, steps)
        rows.append(("per step (ms, median)", p, i, f"+{i - p:.2f} ms, <= +{STEP_TARGET_MS} ms"))
        sizes = [("10 MB context (ms)", 10_000_000)]
        if big:
            sizes.append(("1 GB context (ms)", 1_000_000_000))
        for label, size in sizes:
            rows.append((label, context_ms(plain, size), context_ms(isolated, size), ""))
    finally:
        isolated.close()
    return rows


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="trivial steps timed")
    parser.add_argument("--starts", type=int, default=5, help="start-ups timed")
    parser.add_argument("--big", action="store_true", help="also move a 1 GB context")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> list[tuple[str, float, float, str]]:
    """Measure and print the table; returns its rows."""
    args = parse_args(argv)
    rows = measure(args.steps, args.starts, args.big)
    print(f"{'':24} {'in-process':>12} {'isolated':>12}  target")
    for label, p, i, target in rows:
        print(f"{label:24} {p:12.3f} {i:12.3f}  {target}")
    return rows


if __name__ == "__main__":
    main()
