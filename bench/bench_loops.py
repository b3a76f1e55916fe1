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

``--scripted`` runs, instead, loops and real work of known shapes on a scripted model
(no model, a second or so; the engine's own reaction is measured, not a model's):

    .venv/bin/python bench/bench_loops.py --scripted [--baseline DIR]

- loops: ``exact`` (the walk's search, the same every step), ``counter`` (fault case
  y10: the same probe with a counter in its code and output), ``attempt`` (an attempt
  number in a string and a name), ``failing`` (the same failing lookup with a counter),
  ``alternate`` (two probes taken in turn, each with a counter);
- real work: ``slices`` (the data read slice by slice), ``counts`` (counting one thing,
  then another), ``again`` (the question of an earlier task asked again, its first step
  the same), ``again-3`` (the same with ``candidates=3``).

A loop holds when it ends ``stuck`` at most 3 steps after its first repetition (the
first step the run's detector told the model of); real work holds when it ends with
``FINAL``, no step was noted as a repetition and the model was never told it repeated
itself (``told``: the model calls whose last message says so, the reply sampled again
before it ran included).  ``--baseline DIR``: the same
scenarios on the tree in DIR (e.g. ``git worktree add DIR COMMIT``; its own engine, this
file's scenarios), side by side.
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
ROOT = Path(os.environ.get("RLM_BENCH_ROOT") or Path(__file__).resolve().parents[1])
sys.path.insert(0, str(ROOT))  # rlm_kernel of this tree (--baseline: of that tree)

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


# -- scripted shapes ----------------------------------------------------------------------
def _block(code: str) -> str:
    return f"Next step.\n```repl\n{code}\n```"


_PROBE = "n = len(context) + {}\nprint('probing the data once more, attempt', n, 'of many')"
_SOURCE = {f"json/{p.name}": p.read_text()
           for p in sorted(Path(json.__file__).parent.glob("*.py"))}


def _counts() -> list[str]:
    return [_block(f"for name, src in context.items():\n    print(name, src.count({t!r}))")
            for t in ("class ", "def ", "import ", "return ", "raise ")]


SHAPES: dict[str, tuple[str, list[str]]] = {
    "exact": ("loop", [_block('hits = [f for f in context if "class " in context[f]]\n'
                              "print(hits)")] * 40),
    "counter": ("loop", [_block(_PROBE.format(i)) for i in range(40)]),
    "attempt": ("loop", [_block(f"attempt_{i} = sorted(context)\n"
                                f"print('attempt {i}: the files are', attempt_{i})")
                         for i in range(40)]),
    "failing": ("loop", [_block(f"print(context['json/part_{i}.py'])") for i in range(40)]),
    "alternate": ("loop", [_block(_PROBE.format(i // 2) if i % 2 else
                                  f"m = {i} * 2\nprint('checking the data set again, pass', m)")
                           for i in range(40)]),
    "slices": ("work", [_block(f"print(context['json/decoder.py'][{i}:{i + 1500}])")
                        for i in range(0, 9000, 1500)] + [_block("FINAL(3)")]),
    "counts": ("work", [*_counts(), _block("FINAL(5)")]),
    "again": ("work", [_block("n = len(context)\nprint(n)"), _block("FINAL(n)")]),
    "again-3": ("work", [_block("n = len(context)\nprint(n)"), _block("FINAL(n)")] * 3),
}
"""name -> (``loop`` or ``work``, the scripted root model's replies)."""


def run_shape(name: str, max_iterations: int = 12) -> dict[str, Any]:
    """One scripted scenario (:data:`SHAPES`) with the default settings; its figures."""
    from rlm_kernel.engine.session.conversation import Conversation
    from rlm_kernel.models.scripted import ScriptedModel

    kind, replies = SHAPES[name]
    notices: list[tuple[int, str]] = []
    models: list[ScriptedModel] = []

    def observe(event: Any) -> None:
        if event.kind == "step_notice" and event.depth == 0:
            notices.append((event.step, event.reason))

    def rlm(script: list[str], **settings: Any) -> Any:
        lm = ScriptedModel(script)
        models.append(lm)
        config = RLMConfig().replace(max_iterations=max_iterations, verify_answer=False,
                                     ground_answer=False, **settings)
        return RLM(config=config, root_client=lm, sub_client=lm, observer=observe)

    executor = new_executor("in-process")
    kwargs: dict[str, Any] = {}
    question, settings = "How many files does this code base have?", {}
    if name.startswith("again"):  # the first task, then the same question again
        history = Conversation()
        first = rlm(replies[:2]).run(question, context=_SOURCE, executor=executor)
        history.record(first, executor.namespace)
        notices.clear()
        models.clear()
        kwargs["history"] = history
        if name == "again-3":
            settings = {"candidates": 3, "candidates_early_stop": False}
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        res = rlm(replies, **settings).run(question, context=_SOURCE, executor=executor,
                                           **kwargs)
    seconds = time.perf_counter() - start
    repeated = [step for step, why in notices if why == "repeated"]
    first_rep = min(repeated) if repeated else None
    after = None if first_rep is None else res.steps - first_rep
    # the model told of a repetition: a call whose last message says so
    told = sum("Your step repeats" in call[-1]["content"] for lm in models for call in lm.calls)
    held = (res.stopped_by == "stuck" and after is not None and after <= 3) \
        if kind == "loop" else (res.stopped_by == "final" and not notices and not told)
    return {"scenario": name, "kind": kind, "steps": res.steps, "seconds": round(seconds, 2),
            "stopped_by": res.stopped_by, "first_repetition": first_rep,
            "steps_after": after, "told": told, "held": held, "notices": notices}


def _shape_rows(root: Path | None, max_iterations: int) -> list[dict[str, Any]]:
    """The scripted scenarios' rows, here or (``root``) on another tree's engine."""
    if root is None:
        return [run_shape(name, max_iterations) for name in SHAPES]
    import subprocess

    out = subprocess.run([sys.executable, __file__, "--scripted", "--json",
                          "--max-iterations", str(max_iterations)],
                         env={**os.environ, "RLM_BENCH_ROOT": str(root.resolve())},
                         capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def scripted_table(max_iterations: int, baseline: Path | None, as_json: bool) -> None:
    """Print the scripted scenarios' table (with ``baseline``'s, side by side)."""
    rows = _shape_rows(None, max_iterations)
    if as_json:
        for row in rows:
            print(json.dumps(row), flush=True)
        return
    before = {r["scenario"]: r for r in _shape_rows(baseline, max_iterations)} \
        if baseline else {}

    def cell(row: dict[str, Any] | None) -> str:
        if row is None:
            return f"{'-':>5} {'-':>9} {'-':>5} {'-':>4}  {'-':<14} {'-':<4}"
        return (f"{row['steps']:>5} {str(row['first_repetition']):>9} "
                f"{str(row['steps_after']):>5} {row['told']:>4}  {row['stopped_by']:<14} "
                f"{'yes' if row['held'] else 'NO':<4}")

    head = f"{'steps':>5} {'first rep':>9} {'after':>5} {'told':>4}  {'stopped_by':<14} " \
           f"{'held':<4}"
    print(f"{'scenario':<10} {'kind':<5} " + (f"{head} | " if baseline else "") + head)
    if baseline:
        print(f"{'':<17}{'baseline ' + str(baseline):<50}| this tree")
    for row in rows:
        print(f"{row['scenario']:<10} {row['kind']:<5} "
              + (f"{cell(before.get(row['scenario']))} | " if baseline else "") + cell(row))
    held = sum(r["held"] for r in rows)
    line = f"held: {held} of {len(rows)}"
    if baseline:
        line += f" (baseline: {sum(r['held'] for r in before.values())} of {len(before)})"
    print(line)


def main(argv: list[str] | None = None) -> int:
    """Run the scenarios and print their figures; exit status 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(SCENARIOS))
    parser.add_argument("--max-iterations", type=int, default=12)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="an RLMConfig field (value read as JSON, else text)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--scripted", action="store_true",
                        help="loops and real work of known shapes on a scripted model")
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="with --scripted: also on the tree in DIR, side by side")
    args = parser.parse_args(argv)
    if args.scripted:
        scripted_table(args.max_iterations, args.baseline, args.json)
        return 0
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
