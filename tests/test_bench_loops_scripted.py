"""``bench/bench_loops.py --scripted``: loops and real work of known shapes on a
scripted model.  Each loop (the same step, the same probe with a counter, an attempt
number, a failing lookup with a counter, two probes in turn) ends stuck at most 3 steps
after its first repetition; each piece of real work (slices, counts, the question asked
again, alone and with 3 candidates) ends with FINAL and the model is never told it
repeated itself."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_loops.py"


def _load():
    spec = importlib.util.spec_from_file_location("bench_loops", BENCH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_loops"] = mod
    spec.loader.exec_module(mod)
    return mod


bl = _load()


@pytest.mark.parametrize("name", sorted(bl.SHAPES))
def test_each_shape_holds(name):
    row = bl.run_shape(name)
    assert row["held"], row
    if row["kind"] == "loop":
        assert row["stopped_by"] == "stuck" and row["steps_after"] <= 3 and row["told"] >= 1
    else:
        assert row["stopped_by"] == "final" and row["told"] == 0 and row["notices"] == []
