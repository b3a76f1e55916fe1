"""The walk's three loops on the real embedded model: how many steps a run takes after
its first repetition, and how it ends.

Run by hand (minutes on 2 cores; the embedded model, temperature 0, default settings):

    .venv/bin/python bench/bench_loops.py [--only NAME ...] [--max-iterations N]
        [--set KEY=VALUE ...] [--json]

Scenarios (each as a user of the notebook would start it):

- ``search``: a code base as ``context`` (the standard library's ``json`` package, a
  dict {file: source}), in-process (the python3 kernel's ``%rlm``); the walk's run
  repeated ``hits = search("class ", context)`` 8 times.
- ``isolated``: the same code base in the isolated executor (``%rlm --isolated``);
  the walk's run repeated one failing step 3 times.
- ``hello``: the prose cell ``hello there`` with no data, in-process; the walk's run
  repeated one failing step 5 times.

For each: steps, seconds, ``stopped_by``, the answer and how it was reached, the first
repeating step (found after the run by :class:`~rlm_kernel.engine.repetition.
RepetitionDetector` over the trajectory, so a commit without repetition handling is
measured the same way: copy ``rlm_kernel/engine/repetition.py`` into its tree), and the
steps after it (the issue's target: at most 3).  ``--json`` prints one JSON object a
scenario instead of the table.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # rlm_kernel of this tree

from rlm_kernel import RLM, RLMConfig  # noqa: E402
from rlm_kernel.engine.repetition import RepetitionDetector, signature  # noqa: E402
from rlm_kernel.executors import new_executor  # noqa: E402


def code_base() -> dict[str, str]:
    """The standard library's ``json`` package as {``json/<file>``: source}."""
    folder = Path(json.__file__).parent
    return {f"json/{p.name}": p.read_text() for p in sorted(folder.glob("*.py"))}


SCENARIOS: dict[str, dict[str, Any]] = {
    "search": {"question": "How many classes are defined in this code base?",
               "context": code_base, "executor": "in-process"},
    "isolated": {"question": "How many top-level functions does json/encoder.py define?",
                 "context": code_base, "executor": "isolated"},
    "hello": {"question": "hello there", "context": None, "executor": "in-process"},
}
"""name -> question, a function giving the context (None: no data), executor kind."""


def first_repetition(result: Any, limit: int = 2) -> int | None:
    """The first step of ``result``'s trajectory that repeats an earlier one (same
    normalised code, output or error), or None."""
    detector = RepetitionDetector(limit)
    for step, entry in enumerate(result.history, start=1):
        failed = "Traceback (most recent call last)" in entry.output
        if detector.observe(step, signature(entry.code, entry.output, not failed)):
            return step
    return None


def run_scenario(name: str, config: RLMConfig) -> dict[str, Any]:
    """One scenario on the embedded model; its figures as a dict."""
    spec = SCENARIOS[name]
    notices: list[tuple[int, str]] = []

    def observe(event: Any) -> None:
        if event.kind == "step_notice" and event.depth == 0:
            notices.append((event.step, event.reason))

    executor = new_executor(spec["executor"])
    context = spec["context"]() if spec["context"] else None
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            res = RLM(config=config, observer=observe).run(spec["question"], context=context,
                                                           executor=executor)
    finally:
        with contextlib.suppress(Exception):
            executor.close()
    seconds = time.perf_counter() - start
    # the first repetition: in the trajectory, or a reply told before it ran
    found = [s for s in (first_repetition(res),
                         next((s for s, why in notices if why == "repeated"), None))
             if s is not None]
    first = min(found) if found else None
    return {"scenario": name, "steps": res.steps, "seconds": round(seconds, 1),
            "stopped_by": res.stopped_by, "answer": res.answer,
            "answer_source": getattr(res, "answer_source", None),
            "first_repetition": first,
            "steps_after": None if first is None else res.steps - first,
            "notices": notices, "codes": [e.code for e in res.history]}


def main(argv: list[str] | None = None) -> int:
    """Run the scenarios and print their figures; exit status 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(SCENARIOS))
    parser.add_argument("--max-iterations", type=int, default=12)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="an RLMConfig field (value read as JSON, else text)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    overrides: dict[str, Any] = {}
    for pair in args.set:
        key, _, text = pair.partition("=")
        try:
            overrides[key] = json.loads(text)
        except json.JSONDecodeError:
            overrides[key] = text
    config = RLMConfig().replace(max_iterations=args.max_iterations, temperature=0.0,
                                 **overrides)
    if not args.json:
        print(f"{'scenario':<9} {'steps':>5} {'seconds':>8} {'first rep':>9} "
              f"{'after':>5}  stopped_by  answer (source)")
    for name in args.only or list(SCENARIOS):
        row = run_scenario(name, config)
        if args.json:
            print(json.dumps(row), flush=True)
            continue
        print(f"{name:<9} {row['steps']:>5} {row['seconds']:>8.1f} "
              f"{str(row['first_repetition']):>9} {str(row['steps_after']):>5}  "
              f"{row['stopped_by']:<10}  {str(row['answer'])[:40]!r} "
              f"({row['answer_source']})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
