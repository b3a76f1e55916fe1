"""Seconds from Shift+Enter to the first step cell in a fresh RLM kernel: warm start on/off.

Run by hand (the real embedded model; about 3 minutes):

    .venv/bin/python bench/bench_first_step.py [--rounds 2] [--think 0,20]

Each sample is a user opening a notebook on the ``rlm`` kernel with no model server
running: the kernel starts (``KernelManager``, as a notebook server does), the client
announces itself as a frontend (a ``comm_open`` on ``rlm_kernel.frontend``, as the
JupyterLab extension does), runs a cell that loads the ``json`` package's files as
``context``, waits ``--think`` seconds (the user typing the task; 0 = the task is sent
at once), then sends a ``%%rlm`` task cell.  Timed: from that execute request to the
first ``step_added`` message of the run comm (the moment JupyterLab inserts the step
cell).  The kernel (and with it the server it started) is shut down after each sample,
so every sample starts cold.  ``--RLM.warm_start=False`` and ``True`` alternate and
swap order each round.

Prints one row per (warm start, think time): samples, median and max seconds, and
the ratio of the medians (off / on).  Target: on, with a think time of 20 s, <= 10 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from queue import Empty

from jupyter_client.manager import KernelManager

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlm_kernel.models.local.server import find_running  # noqa: E402

TARGET_S = 10.0
LOAD = ("import sys; sys.path.insert(0, {root!r})\n"
        "from rlm_kernel.context.files import load_folder\n"
        "from evals.questions import stdlib_dir\n"
        "context = {{k: v for k, v in load_folder(stdlib_dir() / 'json').items() "
        "if k.endswith('.py')}}")
TASK = "%%rlm --max-iterations 1\nWhich file in context defines the function py_scanstring?"


def stop_servers() -> None:
    """Kill an embedded model server left running, so the sample starts cold."""
    info = find_running()
    if info is not None:
        os.kill(info.pid, 9)
        time.sleep(0.5)


def wait_reply(kc, msg_id: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reply = kc.get_shell_msg(timeout=timeout)
        if reply["parent_header"].get("msg_id") == msg_id:
            return
    raise TimeoutError("no execute_reply")


def sample(warm: bool, think: float, timeout: float = 300.0) -> float:
    """One cold start; seconds from the task's execute request to its first step cell."""
    stop_servers()
    km = KernelManager(kernel_name="rlm")
    km.start_kernel(extra_arguments=[f"--RLM.warm_start={warm}"])
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        announce = kc.session.msg("comm_open", {"comm_id": "bench-frontend",
                                                "target_name": "rlm_kernel.frontend",
                                                "data": {"version": 1}})
        kc.shell_channel.send(announce)
        wait_reply(kc, kc.execute(LOAD.format(root=str(ROOT))), timeout)
        time.sleep(think)
        while True:  # drop what came before the task
            try:
                kc.get_iopub_msg(timeout=0.1)
            except Empty:
                break
        start = time.perf_counter()
        msg_id = kc.execute(TASK)
        while True:
            msg = kc.get_iopub_msg(timeout=timeout)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            data = msg["content"].get("data", {}) if msg["msg_type"] == "comm_msg" else {}
            if data.get("type") == "step_added":
                return time.perf_counter() - start
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                raise RuntimeError("the task ended without a step cell")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--think", default="0,20",
                        help="comma-separated seconds between loading the data and the task")
    args = parser.parse_args(argv)
    thinks = [float(t) for t in args.think.split(",")]
    results: dict[tuple[bool, float], list[float]] = {}
    for r in range(args.rounds):
        for think in thinks:
            for warm in ((False, True) if r % 2 == 0 else (True, False)):
                seconds = sample(warm, think)
                results.setdefault((warm, think), []).append(seconds)
                print(f"round {r + 1}: warm_start={warm} think={think:g}s -> {seconds:.1f} s",
                      file=sys.stderr, flush=True)
    stop_servers()
    print(f"{'warm_start':10} {'think s':>7} | {'n':>2} {'median s':>8} {'max s':>6}")
    print("-" * 42)
    for (warm, think), xs in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"{str(warm):10} {think:7g} | {len(xs):2d} {statistics.median(xs):8.1f} "
              f"{max(xs):6.1f}")
    print("-" * 42)
    for think in thinks:
        off, on = results.get((False, think)), results.get((True, think))
        if off and on:
            ratio = statistics.median(off) / statistics.median(on)
            print(f"think {think:g} s: off/on {ratio:.2f}x; warm start median "
                  f"{statistics.median(on):.1f} s (target <= {TARGET_S:g} s: "
                  f"{'met' if statistics.median(on) <= TARGET_S else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
