"""Benchmark: the per-step cost of recording executed reads of the user's inputs
(:mod:`rlm_kernel.executors.reads`), next to the same step unrecorded and next to the
alternative that was weighed, a ``sys.settrace`` tracer.

Run by hand (about half a minute; no model):

    .venv/bin/python bench/bench_reads.py [--n 1000000] [--repeat 5]

Each row is one in-process step (:class:`~rlm_kernel.executors.PlainExecutor`), the
median wall time of ``--repeat`` runs:

* ``loop``: ``for i in range(n): x = i`` (reads no input);
* ``loop reading context``: ``for i in range(n): x = len(context)`` (a read per turn);

under three settings: ``off`` (no record), ``recorded`` (the run's watch: the input's
loads instrumented) and ``settrace`` (a tracer that returns None for every frame, the
least a line tracer costs: while one is set, every instruction goes through the
interpreter's tracing path).  The isolated executor runs its steps with the same
``PlainExecutor`` code in its worker: the same figures apply there.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from rlm_kernel.executors import PlainExecutor

STEPS = {"loop": "for i in range({n}):\n    x = i",
         "loop reading context": "for i in range({n}):\n    x = len(context)"}


def _time(code: str, *, watch: bool, trace: bool, repeat: int) -> float:
    ex = PlainExecutor(namespace={"context": "hello world"})
    ex.read_watch = (frozenset({"context"}), frozenset()) if watch else None
    times = []
    for _ in range(repeat):
        if trace:
            sys.settrace(lambda frame, event, arg: None)
        try:
            start = time.perf_counter()
            res = ex.execute(code)
            times.append(time.perf_counter() - start)
        finally:
            sys.settrace(None)
        assert res.success, res.stderr
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10**6, help="loop turns per step")
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (median)")
    args = parser.parse_args(argv)
    print(f"one step, median of {args.repeat} (seconds), n = {args.n:,}")
    print(f"{'step':<24}| {'off':>8} | {'recorded':>8} | {'+%':>6} | {'settrace':>8} | {'+%':>6}")
    print(f"{'-' * 24}|{'-' * 10}|{'-' * 10}|{'-' * 8}|{'-' * 10}|{'-' * 8}")
    for name, template in STEPS.items():
        code = template.format(n=args.n)
        off = _time(code, watch=False, trace=False, repeat=args.repeat)
        on = _time(code, watch=True, trace=False, repeat=args.repeat)
        traced = _time(code, watch=False, trace=True, repeat=args.repeat)
        print(f"{name:<24}| {off:8.3f} | {on:8.3f} | {100 * (on / off - 1):+5.0f}% "
              f"| {traced:8.3f} | {100 * (traced / off - 1):+5.0f}%")


if __name__ == "__main__":
    main()
