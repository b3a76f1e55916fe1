"""A process's CPU time from ``/proc`` (Linux): what a model server spends, read from
outside it.  Used by ``bench_streaming.py`` and the tests of a stop that stops the
model; imported as a sibling module by the benches and as ``bench.proc_cpu`` by tests."""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["cpu_seconds", "cpu_until_idle"]

TICK = os.sysconf("SC_CLK_TCK")  # clock ticks a second, the unit of /proc/PID/stat's times


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (``/proc/PID/stat`` fields 14, 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def cpu_until_idle(pid: int, since: float, limit: float = 60.0) -> tuple[float, float]:
    """CPU seconds ``pid`` spends from now until it is idle (no CPU for 0.5 s), and the
    seconds that took; ``since``: its CPU seconds at the stop."""
    start = time.monotonic()
    last, quiet_from = cpu_seconds(pid), time.monotonic()
    while time.monotonic() - start < limit:
        time.sleep(0.1)
        now = cpu_seconds(pid)
        if now > last:
            last, quiet_from = now, time.monotonic()
        elif time.monotonic() - quiet_from >= 0.5:
            break
    return last - since, quiet_from - start
