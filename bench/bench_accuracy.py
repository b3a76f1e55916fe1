"""Accuracy of the embedded local model on the project's question set.

Run by hand: ``.venv/bin/python bench/bench_accuracy.py [--seed N] [--model M]``.
Prints one row per question and a total: correct / total, mean steps, mean seconds.
"""

from __future__ import annotations

import argparse
import statistics
import time

from rlm_kernel import RLM
from rlm_kernel.evals import question_set


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default=None, help="litellm model (default: embedded)")
    parser.add_argument("--max-iterations", type=int, default=8)
    args = parser.parse_args()
    questions = question_set(args.seed)
    rows = []
    print(f"{'kind':<17} {'ok':<3} {'steps':>5} {'secs':>6}  expected -> answer")
    for q in questions:
        t0 = time.perf_counter()
        res = RLM(args.model, max_iterations=args.max_iterations).run(q.text, context=q.context)
        secs = time.perf_counter() - t0
        ok = q.check(res.answer)
        rows.append((ok, res.steps, secs))
        answer = (res.answer or "").replace("\n", " ")[:50]
        print(f"{q.kind:<17} {'yes' if ok else 'NO':<3} {res.steps:>5} {secs:>6.1f}  "
              f"{q.expected[:40]} -> {answer} [{res.stopped_by}]", flush=True)
    correct = sum(r[0] for r in rows)
    print(f"\ncorrect {correct}/{len(rows)}  mean steps {statistics.mean(r[1] for r in rows):.2f}"
          f"  mean seconds {statistics.mean(r[2] for r in rows):.1f}")


if __name__ == "__main__":
    main()
