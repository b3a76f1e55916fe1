"""``python -m evals [--list]``: a summary of both splits (and optionally every task)."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter

from .tasks import load_split


def _size(n: float) -> str:
    for unit, scale in (("MB", 1_000_000), ("KB", 1_000)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def _counts(title: str, counter: Counter[str]) -> str:
    return f"  {title:<8} " + ", ".join(f"{k} {v}" for k, v in sorted(counter.items()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m evals", description=__doc__)
    parser.add_argument("--list", action="store_true", help="also print every task")
    args = parser.parse_args(argv)
    for split in ("dev", "test"):
        t0 = time.perf_counter()
        tasks = load_split(split)
        secs = time.perf_counter() - t0
        sizes = [t.context_chars for t in tasks]
        print(f"{split}: {len(tasks)} tasks, built in {secs:.1f} s")
        print(_counts("kind", Counter(t.kind for t in tasks)))
        print(_counts("source", Counter(t.source.split(":")[0] if t.source != "stdlib:all"
                                        else "stdlib:all" for t in tasks)))
        print(_counts("stdlib", Counter(t.source.split(":")[1] for t in tasks
                                        if t.source.startswith("stdlib:"))))
        print(_counts("form", Counter(t.context_form for t in tasks)))
        print(_counts("answer", Counter(t.answer_form for t in tasks)))
        print(f"  context  min {_size(min(sizes))}, median {_size(statistics.median(sizes))}, "
              f"max {_size(max(sizes))}")
        if args.list:
            for t in tasks:
                q = " ".join(t.question.split())
                print(f"    {t.id:<20} {t.phrasing:<14} {t.context_form:<4} "
                      f"{_size(t.context_chars):>8}  {q[:90]!r} -> {t.expected!r}")
        print()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
