"""Accuracy and cost of our RLM loop on the project's eval set, optionally vs ``rlms`` 0.1.3.

Run by hand (the real model: minutes per task on a small CPU):

    .venv/bin/python bench/bench_accuracy.py [--split dev|test] [--kinds k1,k2]
        [--per-kind N] [--seed S] [--model M] [--max-iterations N (default 8)]
        [--set KEY=VALUE ...] [--typed] [--vs rlms] [--rlms-max-tokens N]
        [--rows] [--save FILE.jsonl]

The tasks come from ``evals.load_split`` (the ``evals/`` package at the
repository root).  Each task is run through ``rlm_kernel.RLM`` (``--model``;
default the embedded local model) at temperature 0 with ``--max-iterations``
steps; ``--set KEY=VALUE`` (repeatable) overrides any ``RLMConfig`` field, the
value read as none/bool/int/float/JSON/str in that order (``--set
verify_answer=false --set max_step_tokens=none``).  ``--kinds`` keeps only the
given kinds; ``--per-kind N`` keeps the first N tasks of each kind (in the
split's own, deterministic order).

``--vs rlms`` (embedded model only; needs ``pip install -e '.[bench]'``) starts
or finds the embedded model server once, runs every task through ours, then
every task through rlms 0.1.3 (``bench/rlms_system.py``: its ``openai`` backend
on the same server, same temperature and max iterations, its own prompts and
defaults otherwise), one system after the other.

Printed on stdout: the settings, then a table with one row per kind and a
TOTAL row: ``correct/total | mean steps | mean seconds | mean tokens | seconds
per correct`` (tokens = prompt + completion over every call of a run, sub-calls
included; seconds per correct = total seconds / correct, ``inf`` if none
correct).  With ``--vs rlms`` the table has two column groups (ours | rlms) and
a last line gives the difference in points (ours - rlms) and the ratio of
seconds per correct (ours / rlms).  Then the number of runs that ended in an
error (on the dev split, also the first distinct error texts).

With ``--set candidates=K --set candidates_early_stop=false`` (every candidate runs),
a second table gives per kind: pass@1 (candidate 1, a single run's answer), pass@K
(any candidate right: the ceiling of selecting among them), and the vote over the
first 3 and over all K candidates with early stop, replayed on the same trajectories
(:func:`replay_vote`), each with seconds per correct answer.

``--typed`` asks every task for a typed answer (``RLM.run(..., output_type=T)``, as
``--returns`` does): ``int`` for a number, ``bool`` for yes/no, ``str`` for a name, file
or text (:data:`ANSWER_TYPES`, from the task's answer form); with or without it, a last
line gives how many answers arrived as that type (the value itself, not its text) and
how many FINALs were refused for their type (each a step of the run).

``--rows`` prints one line per task as it finishes (system, id, ok, steps,
seconds, expected -> answer, stop reason) and ``--save`` writes every outcome
as one JSON line; both are refused on the test split, whose individual results
are never shown: only its per-kind totals are printed, and progress is a bare
``[12/77]`` counter on stderr.  A failing run never stops the bench: it counts
as wrong, with its error text kept.  Ctrl-C stops the bench and prints the
table of the tasks done so far.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # rlm_kernel and evals
sys.path.insert(0, str(Path(__file__).resolve().parent))  # rlms_system (sibling module)

from rlms_system import RLMS_VERSION, rlms_available, run_rlms  # noqa: E402

from rlm_kernel import RLM, RLMConfig  # noqa: E402
from rlm_kernel.models import is_embedded  # noqa: E402

OURS = "ours"
RLMS = "rlms"
LABELS = {OURS: "ours (rlm_kernel)", RLMS: f"rlms {RLMS_VERSION}"}


# -- outcomes ---------------------------------------------------------------------------------
@dataclass
class Outcome:
    """One task run by one system."""

    system: str
    id: str
    kind: str
    correct: bool
    answer: str | None
    expected: str
    steps: int
    seconds: float
    tokens: int
    stopped_by: str
    error: str | None = None
    trace: list[dict[str, str]] | None = None  # our steps (reasoning, code, output): --save only
    # candidates runs: each candidate's answer, correctness, seconds, failed steps
    candidates: list[dict[str, Any]] | None = None
    as_type: bool = False  # the answer value is of the task's ANSWER_TYPES type
    refused: int = 0  # FINALs refused for their type (--typed)


ANSWER_TYPES: dict[str, type] = {"number": int, "line number": int, "index": int,
                                 "yes/no": bool}
"""The answer type of a task by its answer form (``evals``' ``Task.answer_form``); any
other form (file name, name, path, text): ``str``."""


def answer_type(task: Any) -> type:
    """The type a task's answer should have (:data:`ANSWER_TYPES`)."""
    return ANSWER_TYPES.get(str(task.answer_form), str)

def judge(task: Any, answer: str | None) -> bool:
    """``task.check(answer)``; a checker that raises counts as wrong."""
    try:
        return bool(task.check(answer))
    except Exception:  # noqa: BLE001 - a broken checker must not stop the bench
        return False


def make_outcome(task: Any, system: str, answer: Any, steps: int, seconds: float, tokens: int,
                 stopped_by: str, error: str | None) -> Outcome:
    text = None if answer is None else str(answer)
    return Outcome(system=system, id=str(task.id), kind=str(task.kind),
                   correct=judge(task, text), answer=text, expected=str(task.expected),
                   steps=steps, seconds=seconds, tokens=tokens, stopped_by=stopped_by,
                   error=error)


# -- settings ---------------------------------------------------------------------------------
def parse_value(text: str) -> Any:
    """``none``/``null`` -> None, ``true``/``false`` -> bool, then int, float, JSON, str."""
    low = text.strip().lower()
    if low in ("none", "null"):
        return None
    if low in ("true", "false"):
        return low == "true"
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    if text.strip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text


def parse_settings(pairs: Sequence[str]) -> dict[str, Any]:
    """``["key=value", ...]`` -> ``{key: parsed value}``; names must be RLMConfig fields."""
    names = {f.name for f in dataclasses.fields(RLMConfig)}
    settings: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--set wants KEY=VALUE, got {pair!r}")
        if key not in names:
            raise ValueError(f"--set {key}: not an RLMConfig setting "
                             f"(known: {', '.join(sorted(names))})")
        settings[key] = parse_value(value)
    return settings


def our_config(args: argparse.Namespace) -> RLMConfig:
    """Temperature 0 and ``--max-iterations``, then the ``--set`` overrides (None allowed)."""
    base = RLMConfig().replace(max_iterations=args.max_iterations, temperature=0.0)
    return dataclasses.replace(base, **args.settings)


# -- the two systems --------------------------------------------------------------------------
def run_ours(task: Any, args: argparse.Namespace) -> Outcome:
    """One task through ``rlm_kernel.RLM`` with the bench's settings; never raises (but Ctrl-C)."""
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            res = RLM(args.model, config=args.config).run(
                task.question, context=task.context,
                output_type=answer_type(task) if args.typed else None)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - recorded as a wrong answer
        return make_outcome(task, OURS, None, 0, time.perf_counter() - start, 0, "error",
                            f"{type(exc).__name__}: {exc}")
    if res.stopped_by == "interrupt":  # the engine ends a run cleanly on Ctrl-C
        raise KeyboardInterrupt
    outcome = make_outcome(task, OURS, res.answer, res.steps, time.perf_counter() - start,
                           res.prompt_tokens + res.completion_tokens, res.stopped_by, res.error)
    outcome.trace = [{"reasoning": e.reasoning, "code": e.code, "output": e.output[:1500]}
                     for e in res.history]
    outcome.as_type = res.answer is not None and type(res.answer_value) is answer_type(task)
    outcome.refused = sum("FINAL not accepted: expected" in e.output for e in res.history)
    if res.candidates:
        outcome.candidates = [{"answer": c["answer"], "correct": judge(task, c["answer"]),
                               "seconds": c["seconds"], "failed_steps": c["failed_steps"],
                               "confidence": c["confidence"]} for c in res.candidates]
    return outcome


def run_theirs(task: Any, args: argparse.Namespace) -> Outcome:
    """One task through rlms 0.1.3 on the embedded model server; never raises (but Ctrl-C)."""
    got = run_rlms(task, args.server.api_base, args.server.model, args.config.max_iterations,
                   temperature=args.config.temperature, max_tokens=args.rlms_max_tokens)
    return make_outcome(task, RLMS, got.answer, got.steps, got.seconds, got.tokens,
                        got.stopped_by, got.error)


# -- tasks ------------------------------------------------------------------------------------
def load_tasks(split: str, seed: int | None, kinds: list[str] | None,
               per_kind: int | None) -> tuple[list[Any], list[str]]:
    """The split's tasks after ``--kinds`` / ``--per-kind``, and the kinds in table order."""
    import evals

    tasks = list(evals.load_split(split) if seed is None else evals.load_split(split, seed))
    known = list(evals.KINDS)
    if kinds:
        unknown = [k for k in kinds if k not in known]
        if unknown:
            raise ValueError(f"unknown kind(s) {', '.join(unknown)}; known: {', '.join(known)}")
        tasks = [t for t in tasks if t.kind in kinds]
    if per_kind is not None:
        seen: dict[str, int] = {}
        kept = []
        for task in tasks:
            if seen.get(task.kind, 0) < per_kind:
                seen[task.kind] = seen.get(task.kind, 0) + 1
                kept.append(task)
        tasks = kept
    order = [k for k in known if any(t.kind == k for t in tasks)]
    order += sorted({t.kind for t in tasks} - set(order))
    return tasks, order


# -- running ----------------------------------------------------------------------------------
def one_line(text: Any, width: int) -> str:
    return ("-" if text is None else str(text)).replace("\n", " ")[:width]


def print_row(o: Outcome) -> None:
    line = (f"{o.system:<4} {one_line(o.id, 28):<28} {'yes' if o.correct else 'NO':<3} "
            f"{o.steps:>5} {o.seconds:>7.1f}  {one_line(o.expected, 40)} -> "
            f"{one_line(o.answer, 60)} [{o.stopped_by}]")
    if o.error:
        line += f" error: {one_line(o.error, 120)}"
    print(line, flush=True)


def run_all(system: str, runner: Callable[[Any, argparse.Namespace], Outcome], tasks: list[Any],
            args: argparse.Namespace, save: IO[str] | None) -> tuple[list[Outcome], bool]:
    """Run ``tasks`` one by one; (outcomes, interrupted by Ctrl-C)."""
    outcomes: list[Outcome] = []
    tty = sys.stderr.isatty()
    for n, task in enumerate(tasks, 1):
        try:
            outcome = runner(task, args)
        except KeyboardInterrupt:
            if tty:
                print(file=sys.stderr)
            return outcomes, True
        outcomes.append(outcome)
        if save is not None:
            save.write(json.dumps(asdict(outcome), default=str) + "\n")
            save.flush()
        if args.rows:
            print_row(outcome)
        else:
            print(f"[{n}/{len(tasks)}] {system}", file=sys.stderr, end="\r" if tty else "\n",
                  flush=True)
    if tty and not args.rows:
        print(file=sys.stderr)
    return outcomes, False


# -- the table --------------------------------------------------------------------------------
@dataclass
class Stats:
    correct: int
    total: int
    steps: float
    seconds: float
    tokens: float
    seconds_per_correct: float

    @classmethod
    def of(cls, outcomes: list[Outcome]) -> Stats:
        if not outcomes:
            return cls(0, 0, 0.0, 0.0, 0.0, float("inf"))
        correct = sum(o.correct for o in outcomes)
        total_seconds = sum(o.seconds for o in outcomes)
        return cls(correct, len(outcomes), statistics.mean(o.steps for o in outcomes),
                   statistics.mean(o.seconds for o in outcomes),
                   statistics.mean(o.tokens for o in outcomes),
                   total_seconds / correct if correct else float("inf"))

    @property
    def rate(self) -> float:
        return self.correct / self.total if self.total else 0.0

    def cells(self) -> str:
        if not self.total:
            return f"{'-':>9} {'-':>6} {'-':>7} {'-':>7} {'-':>9}"
        spc = "inf" if self.seconds_per_correct == float("inf") \
            else f"{self.seconds_per_correct:.1f}"
        return (f"{f'{self.correct}/{self.total}':>9} {self.steps:>6.2f} {self.seconds:>7.1f} "
                f"{self.tokens:>7.0f} {spc:>9}")


GROUP = f"{'correct':>9} {'steps':>6} {'secs':>7} {'tokens':>7} {'s/correct':>9}"


def print_table(kinds: list[str], results: dict[str, list[Outcome]]) -> None:
    systems = list(results)
    width = max([len("TOTAL")] + [len(k) for k in kinds])
    if len(systems) > 1:
        print(f"{'':<{width}} | " + " | ".join(f"{LABELS[s]:^{len(GROUP)}}" for s in systems))
    header = f"{'kind':<{width}} | " + " | ".join(GROUP for _ in systems)
    print(header)
    print("-" * len(header))
    for kind in kinds:
        cells = [Stats.of([o for o in results[s] if o.kind == kind]).cells() for s in systems]
        print(f"{kind:<{width}} | " + " | ".join(cells))
    print("-" * len(header))
    print(f"{'TOTAL':<{width}} | " + " | ".join(Stats.of(results[s]).cells() for s in systems))


def print_comparison(results: dict[str, list[Outcome]]) -> None:
    ours, theirs = Stats.of(results[OURS]), Stats.of(results[RLMS])
    points = 100 * (ours.rate - theirs.rate)
    inf = float("inf")
    if ours.seconds_per_correct == inf or theirs.seconds_per_correct == inf:
        ratio = "n/a (" + " and ".join(
            LABELS[s] for s, st in ((OURS, ours), (RLMS, theirs))
            if st.seconds_per_correct == inf) + " answered none correctly)"
    else:
        ratio = f"{ours.seconds_per_correct / theirs.seconds_per_correct:.2f}x"
    print(f"ours - rlms: {points:+.1f} points ({100 * ours.rate:.1f}% vs "
          f"{100 * theirs.rate:.1f}%); seconds per correct ours / rlms: {ratio}")


def print_errors(results: dict[str, list[Outcome]], detail: bool) -> None:
    for system, outcomes in results.items():
        errors = [o.error or "" for o in outcomes if o.stopped_by == "error"]
        if not errors:
            continue
        print(f"{LABELS[system]}: {len(errors)} of {len(outcomes)} runs ended with an error")
        if detail:
            for text in list(dict.fromkeys(one_line(e, 200) for e in errors))[:3]:
                print(f"  {text}")


# -- candidates: the ceiling and what a vote gets from it ------------------------------------
def replay_vote(cands: list[dict[str, Any]], k: int, early_stop: bool) -> tuple[bool, float]:
    """The vote over the first ``k`` of a task's candidates, as a ``--candidates k`` run
    would have cast it on the same trajectories (answers keyed from their text): whether
    the chosen answer is right, and the seconds of the candidates it would have run."""
    from rlm_kernel.engine.answer.vote import Ballot, answer_key, tally

    ballots: list[Any] = []
    seconds = 0.0
    for i, c in enumerate(cands[:k], 1):
        key = None if c["answer"] is None else answer_key(c["answer"], c["answer"])
        ballots.append(Ballot(i, key, c["failed_steps"], c["confidence"]))
        seconds += c["seconds"]
        if early_stop and tally(ballots).decided(k):
            break
    chosen = tally(ballots).chosen
    right = chosen is not None and bool(cands[chosen - 1]["correct"])
    return right, seconds


def print_ceiling(kinds: list[str], outcomes: list[Outcome]) -> None:
    """pass@1 (candidate 1), pass@k (any candidate right) and the vote over the first 3
    and all k candidates, with early stop, per kind, with seconds per correct answer."""
    runs = [o for o in outcomes if o.candidates]
    if not runs:
        return
    k = min(len(o.candidates or []) for o in runs)
    cols = [("pass@1", 1, False, False), (f"pass@{k}", k, False, True),
            ("vote@3", min(3, k), True, False), (f"vote@{k}", k, True, False)]
    width = max([len("TOTAL")] + [len(x) for x in kinds])
    head = f"{'kind':<{width}} | " + " | ".join(f"{name:>8} {'s/corr':>7}"
                                                for name, *_ in cols)
    print(f"\ncandidates of each task (k = {k}; votes replayed on the same trajectories)")
    print(head)
    print("-" * len(head))

    def row(label: str, group: list[Outcome]) -> None:
        cells = []
        for _, n, early, any_right in cols:
            right, seconds = 0, 0.0
            for o in group:
                cands = (o.candidates or [])[:n]
                if any_right:
                    right += any(c["correct"] for c in cands)
                    seconds += sum(c["seconds"] for c in cands)
                elif n == 1:
                    right += bool(cands[0]["correct"])
                    seconds += cands[0]["seconds"]
                else:
                    ok, secs = replay_vote(o.candidates or [], n, early)
                    right, seconds = right + ok, seconds + secs
            spc = f"{seconds / right:.0f}" if right else "inf"
            cells.append(f"{f'{right}/{len(group)}':>8} {spc:>7}")
        print(f"{label:<{width}} | " + " | ".join(cells))

    for kind in kinds:
        group = [o for o in runs if o.kind == kind]
        if group:
            row(kind, group)
    print("-" * len(head))
    row("TOTAL", runs)


# -- main -------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--split", choices=["dev", "test"], default="dev")
    parser.add_argument("--kinds", default=None, help="comma-separated kinds to keep")
    parser.add_argument("--per-kind", type=int, default=None, metavar="N",
                        help="keep the first N tasks of each kind")
    parser.add_argument("--seed", type=int, default=None, help="split seed (default evals.SEED)")
    parser.add_argument("--model", default=None, help="litellm model (default: embedded)")
    parser.add_argument("--max-iterations", type=int, default=8)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="RLMConfig override for our runs (repeatable)")
    parser.add_argument("--vs", choices=[RLMS], default=None,
                        help="also run every task through rlms 0.1.3 (embedded model only)")
    parser.add_argument("--only-rlms", action="store_true",
                        help="with --vs rlms: run rlms alone (ours measured in another run)")
    parser.add_argument("--rlms-max-tokens", type=int, default=None, metavar="N",
                        help="cap rlms's completions at N tokens (default: none, as shipped)")
    parser.add_argument("--typed", action="store_true",
                        help="ask each task for a typed answer (int, bool or str)")
    parser.add_argument("--rows", action="store_true", help="print one line per task (dev only)")
    parser.add_argument("--save", default=None, metavar="FILE.jsonl",
                        help="write per-task outcomes as JSON lines (dev only)")
    args = parser.parse_args(argv)
    if args.split == "test" and (args.rows or args.save):
        parser.error("--rows and --save are refused on the test split: its individual results "
                     "must not be read; only per-kind totals are printed")
    if args.only_rlms and args.vs != RLMS:
        parser.error("--only-rlms needs --vs rlms")
    if args.per_kind is not None and args.per_kind < 1:
        parser.error("--per-kind must be at least 1")
    if args.vs == RLMS:
        if not is_embedded(args.model):
            parser.error(f"--vs rlms runs both systems on the embedded model server; "
                         f"it is not supported with --model {args.model}")
        reason = rlms_available()
        if reason:
            parser.error(reason)
    try:
        args.settings = parse_settings(args.sets)
        args.config = our_config(args)
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    args.kind_list = [k.strip() for k in args.kinds.split(",") if k.strip()] \
        if args.kinds else None
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        tasks, kinds = load_tasks(args.split, args.seed, args.kind_list, args.per_kind)
    except ValueError as exc:
        print(f"bench_accuracy: {exc}", file=sys.stderr)
        return 2
    if not tasks:
        print("bench_accuracy: no tasks selected", file=sys.stderr)
        return 2

    args.server = None
    model_name = args.model or "embedded"
    if is_embedded(args.model):
        from rlm_kernel.models.local.server import ensure_server

        name = args.model.split("/", 1)[1] if args.model and "/" in args.model else None
        args.server = ensure_server(name)  # started once, before any timing
        model_name = f"embedded {args.server.model} at {args.server.api_base} " \
                     f"(n_ctx {args.server.n_ctx})"

    cfg = args.config
    counts = ", ".join(f"{k} {sum(t.kind == k for t in tasks)}" for k in kinds)
    print(f"split {args.split}: {len(tasks)} tasks ({counts})")
    print(f"model: {model_name}; temperature {cfg.temperature:g}; "
          f"max iterations {cfg.max_iterations}")
    if args.settings:
        print("our settings: " + ", ".join(f"{k}={v!r}" for k, v in args.settings.items()))
    if args.vs == RLMS:
        cap = args.rlms_max_tokens
        print(f"rlms {RLMS_VERSION}: openai backend on the same server, environment=local, "
              f"its default prompt, max_depth=1, "
              f"{'no max_tokens' if cap is None else f'max_tokens {cap}'}")
    print(flush=True)

    save = open(args.save, "w", encoding="utf-8") if args.save else None
    results: dict[str, list[Outcome]] = {}
    interrupted = False
    try:
        systems: list[tuple[str, Callable[[Any, argparse.Namespace], Outcome]]] = \
            [] if args.only_rlms else [(OURS, run_ours)]
        if args.vs == RLMS:
            systems.append((RLMS, run_theirs))
        for system, runner in systems:
            results[system], interrupted = run_all(system, runner, tasks, args, save)
            if interrupted:
                break
    finally:
        if save is not None:
            save.close()
    for system, _ in systems:
        results.setdefault(system, [])

    if args.rows:
        print()
    print_table(kinds, results)
    print_ceiling(kinds, results.get(OURS, []))
    if args.vs == RLMS and results.get(OURS):
        print_comparison(results)
    print_errors(results, detail=args.split != "test")
    ours = results.get(OURS, [])
    if ours:
        print(f"answers of the asked type (int for numbers, bool for yes/no, str else; "
              f"{'asked with --typed' if args.typed else 'not asked'}): "
              f"{sum(o.as_type for o in ours)}/{len(ours)}; FINALs refused for their type: "
              f"{sum(o.refused for o in ours)} in {sum(o.refused > 0 for o in ours)} tasks")
    if interrupted:
        done = ", ".join(f"{LABELS[s]} {len(o)}/{len(tasks)}" for s, o in results.items())
        print(f"interrupted: tasks done {done}")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
