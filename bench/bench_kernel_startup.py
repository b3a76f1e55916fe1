"""Benchmark: start-up time of the ``rlm`` kernel vs the plain ``python3`` (ipykernel) kernel.

Run by hand (about 30 seconds):

    .venv/bin/python bench/bench_kernel_startup.py [--runs 8] [--rlm rlm] [--python python3]

One sample is what a notebook server does when a notebook opens: from
``KernelManager.start_kernel()`` (spawn the process from the kernelspec) through
``client.start_channels()`` and ``client.wait_for_ready()`` (the kernel answered a
``kernel_info_request``).  Shut-down is not timed.  The two kernels alternate,
and which goes first swaps every round, so both see the same machine load; one
warm-up start of each (not counted) fills the OS file cache.  The table gives the
median, 90th percentile, min and max, and the ratio rlm / python3 of the median
and of the p90 (target: <= 1.3).  The ``python3`` kernelspec is installed into
this Python's prefix if it is missing (``python -m ipykernel install --sys-prefix``),
and so is ``rlm`` (``python -m rlm_kernel install --sys-prefix``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

TARGET_RATIO = 1.3


def ensure_kernelspecs(rlm_name: str, python_name: str) -> None:
    """Install the two kernelspecs in sys.prefix when Jupyter cannot find them."""
    specs = KernelSpecManager().find_kernel_specs()
    if python_name not in specs:
        print(f"installing the {python_name!r} kernelspec (--sys-prefix)")
        subprocess.run([sys.executable, "-m", "ipykernel", "install", "--sys-prefix",
                        "--name", python_name], check=True)
    if rlm_name not in specs:
        print(f"installing the {rlm_name!r} kernelspec (--sys-prefix)")
        subprocess.run([sys.executable, "-m", "rlm_kernel", "install", "--sys-prefix",
                        "--name", rlm_name, "--display-name", "RLM (Python)"], check=True)


def time_startup(kernel_name: str, timeout: float = 60.0) -> float:
    """Seconds from start_kernel() to wait_for_ready() returning; the kernel is then stopped."""
    km = KernelManager(kernel_name=kernel_name)
    t0 = time.perf_counter()
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=timeout)
        return time.perf_counter() - t0
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def p90(samples: list[float]) -> float:
    """90th percentile, linear interpolation between the closest ranks."""
    xs = sorted(samples)
    if len(xs) == 1:
        return xs[0]
    pos = 0.9 * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table; exit status 1 when the median ratio misses the target."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8, help="starts per kernel (default 8)")
    parser.add_argument("--rlm", default="rlm", help="the RLM kernelspec name")
    parser.add_argument("--python", default="python3", help="the ipykernel kernelspec name")
    args = parser.parse_args(argv)

    ensure_kernelspecs(args.rlm, args.python)
    names = [args.python, args.rlm]
    for name in names:  # warm-up, not counted
        time_startup(name)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for i in range(args.runs):
        order = names if i % 2 == 0 else names[::-1]
        for name in order:
            samples[name].append(time_startup(name))

    print(f"\nKernel start-up: start_kernel() -> wait_for_ready(), {args.runs} starts each, "
          "alternating\n")
    header = f"{'kernel':<10} {'n':>3} {'median s':>9} {'p90 s':>7} {'min s':>7} {'max s':>7}"
    print(header)
    print("-" * len(header))
    for name in names:
        xs = samples[name]
        print(f"{name:<10} {len(xs):>3} {statistics.median(xs):>9.3f} {p90(xs):>7.3f} "
              f"{min(xs):>7.3f} {max(xs):>7.3f}")
    med_ratio = statistics.median(samples[args.rlm]) / statistics.median(samples[args.python])
    p90_ratio = p90(samples[args.rlm]) / p90(samples[args.python])
    verdict = "ok" if med_ratio <= TARGET_RATIO else "MISSED"
    print(f"\nratio {args.rlm}/{args.python}: median {med_ratio:.2f}, p90 {p90_ratio:.2f} "
          f"(target median <= {TARGET_RATIO}: {verdict})")
    return 0 if med_ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
