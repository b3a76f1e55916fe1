"""Benchmark: comms a run opens and leaves open in the kernel (issue 10's target: at most
2 widget comms + 1 run comm per run).

Run by hand (one to three minutes on 2 cores; the embedded model answers):

    .venv/bin/python bench/bench_comms.py [--runs 3]

Starts an ``rlm`` kernel with jupyter_client, announces a frontend as the JupyterLab
extension does, and runs the same task cell ``--runs`` times (same cell id, as when a
user re-runs it).  For each run it counts, from the kernel's IOPub messages, the
``comm_open`` messages by target (``jupyter.widget`` = ipywidgets, ``rlm_kernel.run`` =
the run's protocol comm) and the ``comm_close`` messages, and prints one row per run
plus the comms still open at the end (opened minus closed, over the session).  The
shared ``Layout``/``HTMLStyle`` of every view are opened once per kernel (the first
run's two extra widget comms).

One run (2 cores, Qwen2.5-Coder 1.5B, 3 runs of one cell)::

    run | widget comms opened | run comms opened | comms closed
      1 |                   4 |                1 |            1
      2 |                   2 |                1 |            3
      3 |                   2 |                1 |            3
    open at the end: 4 (opened 11, closed 7)

A run opens 2 widget comms (the progress and variables views: one ``ipywidgets.HTML``
each) and 1 run comm.  The table above was measured when the views stayed open until
their cell was re-run; since then both views close when their run ends (their displays
become static HTML and text), so each run's row closes 3 comms and only the shared
``Layout`` and ``HTMLStyle`` stay open (2 comms per kernel, opened by the first run).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlm_kernel.models.local.server import ensure_server  # noqa: E402
from tests.kernel_client import announce_frontend, execute, start, stop  # noqa: E402

TASK = ("%%rlm\nHow many lines of the text in `context` start with the word import? "
        "Answer with the number.")
SETUP = ("import sysconfig, pathlib\n"
         "context = (pathlib.Path(sysconfig.get_paths()['stdlib']) / 'json' / "
         "'__init__.py').read_text()\n"
         "%config RLM.max_iterations = 4")


def count(messages: list[dict]) -> Counter:
    """comm_open by target, and comm_close, among one cell's IOPub messages."""
    c: Counter = Counter()
    for m in messages:
        if m["msg_type"] == "comm_open":
            c[m["content"].get("target_name", "?")] += 1
        elif m["msg_type"] == "comm_close":
            c["closed"] += 1
    return c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    ensure_server()
    km, kc = start("rlm")
    try:
        announce_frontend(kc)
        execute(kc, SETUP, timeout=60)
        rows, total = [], Counter()
        for i in range(1, args.runs + 1):
            _, messages = execute(kc, TASK, cell_id="task-cell", timeout=900)
            c = count(messages)
            total += c
            rows.append((i, c["jupyter.widget"], c["rlm_kernel.run"], c["closed"]))
    finally:
        stop(km, kc)
    print(f"{'run':>3} | {'widget comms opened':>19} | {'run comms opened':>16} | "
          f"{'comms closed':>12}")
    print("-" * 62)
    for i, widgets, runs, closed in rows:
        print(f"{i:>3} | {widgets:>19} | {runs:>16} | {closed:>12}")
    opened = total["jupyter.widget"] + total["rlm_kernel.run"]
    print(f"open at the end: {opened - total['closed']} "
          f"(opened {opened}, closed {total['closed']}; target per run: <= 2 widget + 1 run)")


if __name__ == "__main__":
    main()
