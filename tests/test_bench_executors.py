"""``bench/bench_executors.py`` in a quick mode: both executors measured, the table
printed, and the isolated executor within the issue's targets on this machine."""

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
def test_the_bench_prints_both_executors_within_the_targets(capsys):
    bench = _load()
    rows = bench.main(["--steps", "20", "--starts", "2"])
    out = capsys.readouterr().out
    assert "in-process" in out and "isolated" in out and "10 MB context" in out
    table = {label: (plain, isolated) for label, plain, isolated, _ in rows}
    assert table["start-up (s)"][1] <= bench.START_TARGET_S
    plain, isolated = table["per step (ms, median)"]
    assert isolated - plain <= bench.STEP_TARGET_MS
    assert all(value > 0 for pair in table.values() for value in pair)
