"""keep_alive: what the second of two consecutive ``rlm run`` commands saves when the
first leaves the embedded model's server up.

Run by hand (the real model, a cache folder of its own linked to the weights; about 3
minutes on 2 cores):

    .venv/bin/python bench/bench_keep_alive.py [--trials 2]

For each trial, two commands in a row on one small task (a file of three lines and a
question about it), twice: with ``RLM_KEEP_ALIVE=0`` (the baseline: each command starts
its own server and stops it at exit, as before) and with ``RLM_KEEP_ALIVE=120`` (the
first starts it, the second finds it).  Per command: the seconds from its start to its
first request reaching the server (the server's own clock, ``GET /rlm/keep_alive``,
polled each 20 ms; a started server's first request is its start-up's health check,
so for those the time is when the server first answered) and its wall seconds.  A
table prints the means side by side and the ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlm_kernel.models.local.discovery import read_state  # noqa: E402
from rlm_kernel.models.local.keep_alive import read_status  # noqa: E402
from rlm_kernel.models.local.weights import get_spec, weights_path  # noqa: E402

RLM = str(Path(sys.executable).with_name("rlm"))


def own_cache(folder: Path) -> None:
    """A cache folder holding links to the prepared weights (its own server state)."""
    source = weights_path(get_spec())
    (folder / source.name).symlink_to(source)
    shutil.copy(str(source) + ".verified", folder / (source.name + ".verified"))


def command(env: dict[str, str], notes: Path, question: str) -> tuple[float, float]:
    """Run one ``rlm run``; returns (seconds to its first request at the server, wall
    seconds)."""
    spec = get_spec()
    info = read_state(spec)
    before = read_status(info.api_base) if info else None
    seen = before["requests"] if before else 0
    start = time.time()
    proc = subprocess.Popen([RLM, "run", "--context", str(notes), "--max-iterations", "2",
                             question], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    first = None
    while proc.poll() is None and first is None:
        info = read_state(spec)
        clock = read_status(info.api_base, timeout=0.5) if info else None
        if clock is not None and clock["requests"] > (seen if before else 0):
            first = time.time()
        time.sleep(0.02)
    proc.wait()
    return (first or float("nan")) - start, time.time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2)
    args = parser.parse_args()
    rows: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "cache"
        folder.mkdir()
        own_cache(folder)
        os.environ["RLM_CACHE_DIR"] = str(folder)
        notes = Path(tmp) / "notes.txt"
        notes.write_text("alpha 1\nbeta 2\ngamma 3\n")
        for trial in range(args.trials):
            for keep in ("0", "120"):
                env = {**os.environ, "RLM_KEEP_ALIVE": keep}
                for n, question in enumerate(("What number is next to beta?",
                                              "What number is next to gamma?")):
                    rows.setdefault(f"{keep}:{n}", []).append(command(env, notes, question))
                subprocess.run([RLM, "model", "stop"], env=env, capture_output=True)
                print(f"trial {trial + 1}, keep_alive {keep}: "
                      f"{[f'{a:.2f}/{b:.1f}' for a, b in (rows[f'{keep}:0'][-1], rows[f'{keep}:1'][-1])]}",
                      file=sys.stderr)

    def mean(key: str, i: int) -> float:
        return statistics.mean(r[i] for r in rows[key])

    print(f"\nkeep_alive: two `rlm run` in a row, {args.trials} trial(s), 2 cores; seconds\n")
    print("| command | to first request, keep_alive 0 | keep_alive 120 | ratio "
          "| wall, keep_alive 0 | keep_alive 120 | ratio |")
    print("|---|---|---|---|---|---|---|")
    for n, label in ((0, "first"), (1, "second")):
        a0, a1 = mean(f"0:{n}", 0), mean(f"120:{n}", 0)
        w0, w1 = mean(f"0:{n}", 1), mean(f"120:{n}", 1)
        print(f"| {label} | {a0:.2f} | {a1:.2f} | {a1 / a0:.2f} | {w0:.1f} | {w1:.1f} "
              f"| {w1 / w0:.2f} |")


if __name__ == "__main__":
    main()
