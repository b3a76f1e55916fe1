"""``bench/bench_executors.py`` in a quick mode: both executors and the baseline commit's
isolated executor measured, the table printed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_executors.py"


def _load():
    spec = importlib.util.spec_from_file_location("bench_executors", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(sys.platform != "linux", reason="the isolated executor is Linux-only")
def test_the_bench_prints_both_executors_and_the_baseline_side_by_side(capsys):
    """The table's shape and that every figure was measured; the figures themselves are
    the bench's to report (no timed assertion here)."""
    bench = _load()
    rows = bench.main(["--steps", "5", "--starts", "1", "--baseline", "20e5271"])
    out = capsys.readouterr().out
    assert "in-process" in out and "isolated now" in out and "20e5271" in out
    labels = [row[0] for row in rows]
    assert labels == ["start-up (s)", "per step (ms, median)", "10 MB context (ms)"]
    for _, plain, baseline, now, _ in rows:
        assert plain > 0 and now > 0
        assert baseline is None or baseline > 0
