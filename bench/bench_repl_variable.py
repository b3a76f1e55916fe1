"""Benchmark: REPLVariable.from_value on huge values, ours vs the spec's full serialisation.

Run by hand (needs about 4 GB of free memory):

    .venv/bin/python bench/bench_repl_variable.py

For each value it prints the median time of our ``REPLVariable.from_value`` (``timeit``,
several repeats) next to the method the RLM REPL-types spec describes: build the whole
text (the ``str`` itself; ``json.dumps(value, indent=2, default=str)`` for a dict or a
list; ``str(value)`` otherwise), then take its length and slice the preview. The spec
method is slow on containers, so there it is timed only once or twice. For a ``str`` the
spec already just slices, so that row shows parity, not a speed-up.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
import timeit
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlm_kernel.repl_types import REPLVariable  # noqa: E402

PREVIEW = REPLVariable.PREVIEW_LENGTH


def spec_method(value: Any, preview_length: int = PREVIEW) -> REPLVariable:
    """The spec's way: serialise everything, then measure and slice."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, (dict, list)):
        text = json.dumps(value, indent=2, default=str)
    else:
        text = str(value)
    preview = text[:preview_length] + ("..." if len(text) > preview_length else "")
    return REPLVariable("v", type(value).__name__, total_length=len(text), preview=preview)


def ours_median_ms(value: Any, repeat: int = 9, number: int = 200) -> float:
    timer = timeit.Timer(lambda: REPLVariable.from_value("v", value))
    return statistics.median(t / number for t in timer.repeat(repeat=repeat, number=number)) * 1e3


def spec_median_ms(value: Any, runs: int) -> float:
    """Median of ``runs`` timed calls; fast cases (under 10 ms) are re-timed with timeit."""
    times = []
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        spec_method(value)
        times.append(time.perf_counter() - start)
    if max(times) < 0.01:
        timer = timeit.Timer(lambda: spec_method(value))
        return statistics.median(t / 200 for t in timer.repeat(repeat=9, number=200)) * 1e3
    return statistics.median(times) * 1e3


def fmt_ms(ms: float) -> str:
    return f"{ms:,.1f}" if ms >= 10 else f"{ms:.4f}"


def main() -> None:
    cases: list[tuple[str, Any, int]] = [
        ("str, 1 GiB", "x" * (1 << 30), 5),
        ("list, 10M ints", list(range(10_000_000)), 1),
        ("dict, 1M keys", {f"key{i}": i for i in range(1_000_000)}, 2),
    ]
    header = (f"{'value':<16} {'ours median ms':>15} {'spec method ms':>15} {'speed-up':>10}"
              f"  {'reported length'}")
    print(f"Python {sys.version.split()[0]}, preview_length={PREVIEW}")
    print(header)
    print("-" * len(header))
    for label, value, spec_runs in cases:
        ours = ours_median_ms(value)
        spec = spec_median_ms(value, spec_runs)
        var = REPLVariable.from_value("v", value)
        assert len(var.preview) <= PREVIEW + 3
        length = f"{var.total_length:,} {var.length_unit}"
        print(f"{label:<16} {fmt_ms(ours):>15} {fmt_ms(spec):>15} {spec / ours:>9,.{0 if spec / ours >= 10 else 1}f}x  {length}")
        del value, var
        gc.collect()


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    main()
