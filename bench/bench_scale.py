"""Benchmark: scale-out (issue 28), one table: Dask workers, Router deployments, the
overhead of ``rlm batch``, and the embedded model on this machine.

Run by hand (no network beyond 127.0.0.1; about 5 minutes on a quiet 2-core machine;
``--embedded`` adds about 7 minutes of the real embedded model, much more when the
machine is busy):

    .venv/bin/python bench/bench_scale.py [--quick] [--embedded] [--latency 0.5]

The model is a stub (``bench/stub_server.py``): an OpenAI-compatible server in its own
process answering after a fixed ``--latency`` with a bounded number of slots, whose root
reply is one ```` ```repl ```` block (a bit of work on ``context``, one ``llm_query``,
``FINAL``) and whose sub-call reply is a short text.  So a task is one root step and one
sub-call: about ``2 x latency`` of waiting, the rest is our overhead.

1. **tasks per minute for 1, 2 and 4 Dask workers**: ``RLM(...).map(questions, contexts,
   executor=...)`` on one Dask ``LocalCluster`` of 4 worker processes (1 thread each),
   the executor restricted to the first N workers (``client.get_executor(workers=...)``);
   every worker has imported the package before the clock starts.  The stub has 8 slots,
   so it is not the limit.  Target: N workers >= 0.8 x N x (1 worker).
2. **llm_query_batched of 16 prompts over 1 vs 2 deployments** (1 slot each, one process
   each) through the fleet's litellm Router (``RLM(router=fleet)``): seconds spent in the
   call, timed inside the step (median of ``--repeats``).  Target: speed-up >= 1.8x.
3. **the overhead of ``rlm batch`` per task**: the wall time of ``rlm batch tasks.jsonl
   --out results.jsonl --cluster local:1`` against a plain loop of ``RLM().run()`` over
   the same tasks and stub (a Python process each, both cold: imports, the cluster's
   start-up included), divided by the number of tasks.  Target: <= 0.3 s per task.
4. ``--embedded``: the embedded model (no stub) on a few small tasks, ``rlm batch
   --cluster local:1`` vs ``local:2``, both against one embedded server: tasks per
   minute.  The CPU (2 cores here) is the limit, not the number of workers.

``--quick`` runs a small smoke version (latency 0.05 s, 4 tasks per setting, 1 repeat)
for tests: the table's shape, not its figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before litellm is imported
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # rlm_kernel
sys.path.insert(0, str(Path(__file__).resolve().parent))  # stub_server (sibling module)

from stub_server import StubDeployment  # noqa: E402

from rlm_kernel import RLM  # noqa: E402

logger = logging.getLogger(__name__)

LINEAR_SHARE = 0.8  # measure 1: N workers give at least this share of N x one worker
TARGET_BATCHED = 1.8  # measure 2: speed-up of 2 deployments over 1
TARGET_OVERHEAD_S = 0.3  # measure 3: seconds per task of rlm batch over a plain loop
STUB_SLOTS = 8  # measure 1's stub: more slots than workers
BATCHED_PROMPTS = 16
# measure 2's routing strategies: litellm's default (a weighted random pick per call)
# and the one that sends a call to the deployment with the fewest calls in flight
STRATEGIES = ("simple-shuffle", "least-busy")
MODEL_NAME = "stub"  # the fleet's model_name
# the run settings of every stub task: one root step, no answer check
RUN_SETTINGS: dict[str, Any] = {"max_iterations": 3}


@dataclasses.dataclass
class Row:
    """One line of the table.

    Attributes:
        measure: what is measured (``tasks/min``, ``seconds`` ...).
        setting: the setting of this line (``2 workers``).
        figure: the measured value, in ``unit``.
        unit: the figure's unit (``tasks/min``, ``s``).
        ratio: the figure against the measure's baseline line, as printed
            (``1.00x`` for the baseline itself, ``+0.12 s`` for a difference).
        target: the target, as printed, or ``""`` for a baseline or an informative line.
        met: whether the target is met, or None (no target).
    """

    measure: str
    setting: str
    figure: float
    unit: str
    ratio: str
    target: str = ""
    met: bool | None = None


# -- the model: one fleet of stub deployments ----------------------------------------------
def fleet(bases: Sequence[str], strategy: str = "simple-shuffle") -> dict[str, Any]:
    """A litellm Router fleet (the litellm proxy's ``model_list`` + ``router_settings``)
    of the stub deployments at ``bases`` (their ``api_base`` URLs), all named
    :data:`MODEL_NAME`."""
    return {"model_list": [{"model_name": MODEL_NAME,
                            "litellm_params": {"model": "openai/stub", "api_base": base,
                                               "api_key": "bench"}} for base in bases],
            "router_settings": {"routing_strategy": strategy, "num_retries": 0}}


def stub_rlm(base: str, **settings: Any) -> RLM:
    """An RLM whose root model and sub-calls go to the stub at ``base``, through a fleet
    of one deployment."""
    return RLM(MODEL_NAME, router=fleet([base]), **{**RUN_SETTINGS, **settings})


def tasks(n: int, offset: int = 0) -> tuple[list[str], list[str]]:
    """``n`` small tasks: (questions, contexts); each context has a different length."""
    questions = [f"Task {offset + i}: how many words are in the text?" for i in range(n)]
    contexts = [" ".join(["word"] * (50 + offset + i)) for i in range(n)]
    return questions, contexts


def check_answers(results: Sequence[Any], contexts: Sequence[str], what: str) -> None:
    """Raise RuntimeError unless every result is a final answer with its context's count."""
    for result, context in zip(results, contexts, strict=True):
        answer = getattr(result, "answer", None)
        if isinstance(result, dict):
            answer = result.get("answer")
        if not str(answer).startswith(f"{len(context.split())} words"):
            error = getattr(result, "error", None) or (
                result.get("error") if isinstance(result, dict) else None)
            raise RuntimeError(f"{what}: answer {answer!r} (error {error!r})")


# -- 1. Dask workers ---------------------------------------------------------------------------
def _warm_worker() -> str:
    """Run on every worker before the clock starts: the imports a first task pays."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm  # noqa: F401

    import rlm_kernel  # noqa: F401

    return str(os.getpid())


def measure_workers(stub: StubDeployment, counts: Sequence[int], n_tasks: int) -> list[Row]:
    """Measure 1: tasks per minute on 1, 2, 4 ... Dask worker processes.

    Raises:
        RuntimeError: a task's answer is wrong, or a task made other calls than one
            root step and one sub-call.
    """
    from distributed import Client, LocalCluster

    rlm = stub_rlm(stub.base_url)
    latency = stub.latency
    rows: list[Row] = []
    with LocalCluster(n_workers=max(counts), threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.wait_for_workers(max(counts))
        client.run(_warm_worker)
        addresses = sorted(client.scheduler_info()["workers"])
        warm_q, warm_c = tasks(max(counts), offset=1000)
        check_answers(rlm.map(warm_q, warm_c, executor=client.get_executor()), warm_c, "warm-up")
        first = 0.0
        for count in counts:
            executor = client.get_executor(workers=addresses[:count],
                                           allow_other_workers=False)
            questions, contexts = tasks(n_tasks, offset=count * 100)
            stub.reset()
            start = time.perf_counter()
            results = rlm.map(questions, contexts, executor=executor)
            seconds = time.perf_counter() - start
            check_answers(results, contexts, f"{count} workers")
            calls = stub.stats()
            if (calls["root"], calls["sub"]) != (n_tasks, n_tasks):
                raise RuntimeError(f"{count} workers: {calls['root']} root steps and "
                                   f"{calls['sub']} sub-calls for {n_tasks} tasks")
            per_minute = n_tasks * 60 / seconds
            if not rows:
                first = per_minute
                rows.append(Row("tasks/min, Dask workers", f"{count} worker (baseline)",
                                per_minute, "tasks/min", "1.00x",
                                f"ideal {60 / (2 * latency):.0f} (2 calls x {latency:g} s)"))
                continue
            share = LINEAR_SHARE * count
            rows.append(Row("tasks/min, Dask workers", f"{count} workers", per_minute,
                            "tasks/min", f"{per_minute / first:.2f}x",
                            f">= {share:.1f}x ({LINEAR_SHARE:g} x linear)",
                            per_minute / first >= share))
    return rows


# -- 2. llm_query_batched over deployments -------------------------------------------------
def _batched_seconds(rlm: RLM) -> float:
    """One run whose one step calls llm_query_batched; the seconds it took (timed in
    the step)."""
    tag = uuid.uuid4().hex[:12]  # new prompts each run: no cache answers them
    result = rlm.run(f"Ask all parts at once. [batched:{BATCHED_PROMPTS}:{tag}]",
                     context="x")
    output = result.history.entries[0].output if result.history.entries else ""
    ok = f"{BATCHED_PROMPTS} of {BATCHED_PROMPTS} ok"
    if result.stopped_by != "final" or str(result.answer) != ok:
        raise RuntimeError(f"batched run: {result.stopped_by} {result.answer!r} "
                           f"{result.error!r}: {output[:300]}")
    return float(output.split(" in ", 1)[1].split(" s", 1)[0])


def measure_deployments(latency: float, repeats: int,
                        strategies: Sequence[str]) -> list[Row]:
    """Measure 2: llm_query_batched of 16 prompts over 1 one-slot deployment, then over
    2 with each routing strategy of ``strategies`` (litellm's names)."""
    measure = f"llm_query_batched({BATCHED_PROMPTS}), s"
    rows: list[Row] = []
    with StubDeployment(latency, 1) as one, StubDeployment(latency, 1) as two:
        plans = [([one], strategies[0])] + [([one, two], s) for s in strategies]
        for stubs, strategy in plans:
            bases = [stub.base_url for stub in stubs]
            rlm = RLM(MODEL_NAME, router=fleet(bases, strategy), **RUN_SETTINGS)
            _batched_seconds(rlm)  # warm-up: imports, connections
            for stub in stubs:
                stub.reset()
            samples = [_batched_seconds(rlm) for _ in range(repeats)]
            seconds = statistics.median(samples)
            split = "/".join(str(stub.stats()["sub"]) for stub in stubs)
            if len(stubs) == 1:
                rows.append(Row(measure, "1 deployment x 1 slot (baseline)", seconds, "s",
                                "1.00x", f"ideal {BATCHED_PROMPTS * latency:.1f} s"))
                continue
            speedup = rows[0].figure / seconds
            rows.append(Row(measure, f"2 deployments x 1 slot, {strategy} (sub-calls "
                            f"{split} in {repeats} runs)", seconds, "s", f"{speedup:.2f}x",
                            f">= {TARGET_BATCHED:g}x", speedup >= TARGET_BATCHED))
    return rows


# -- 3. rlm batch vs a plain loop --------------------------------------------------------------
LOOP_SCRIPT = """\
import json, os, sys
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, {bench!r})
from bench_scale import stub_rlm
rlm = stub_rlm({base!r})
with open({out!r}, "w") as out:
    for line in open({tasks!r}):
        task = json.loads(line)
        result = rlm.run(task["question"], context=open(task["context"]).read())
        out.write(json.dumps({{"id": task["id"], "answer": result.answer,
                              "error": result.error}}) + "\\n")
"""


def write_tasks(folder: Path, n: int) -> tuple[Path, list[str]]:
    """A tasks file (one JSON line per task: ``id``, ``question``, ``context`` a path)
    and the contexts' texts, in order."""
    questions, contexts = tasks(n, offset=500)
    lines = []
    for i, (question, context) in enumerate(zip(questions, contexts, strict=True)):
        path = folder / f"context_{i}.txt"
        path.write_text(context)
        lines.append(json.dumps({"id": f"t{i}", "question": question, "context": str(path)}))
    tasks_file = folder / "tasks.jsonl"
    tasks_file.write_text("\n".join(lines) + "\n")
    return tasks_file, contexts


def _timed(cmd: list[str], env: dict[str, str], timeout: float,
           ok: tuple[int, ...] = (0,)) -> float:
    """Wall seconds of a command; RuntimeError with its stderr's tail if its exit code
    is not in ``ok``."""
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)
    seconds = time.perf_counter() - start
    if done.returncode not in ok:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... exited {done.returncode}: "
                           f"{done.stderr.strip()[-800:]}")
    return seconds


def _read_results(path: Path, contexts: list[str], what: str) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    by_id = {row["id"]: row for row in rows}
    if len(rows) != len(contexts) or len(by_id) != len(contexts):
        raise RuntimeError(f"{what}: {len(rows)} result lines for {len(contexts)} tasks")
    check_answers([by_id[f"t{i}"] for i in range(len(contexts))], contexts, what)


def batch_command(tasks_file: Path, out: Path, cluster: str,
                  model_args: Sequence[str]) -> list[str]:
    """The ``rlm batch`` command line of a run over ``tasks_file``."""
    return [str(Path(sys.executable).with_name("rlm")), "batch", str(tasks_file),
            "--out", str(out), "--cluster", cluster, *model_args]


def measure_batch_overhead(base: str, n_tasks: int, timeout: float) -> list[Row]:
    """Measure 3: seconds per task of ``rlm batch --cluster local:1`` vs a plain loop."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp:
        folder = Path(tmp)
        tasks_file, contexts = write_tasks(folder, n_tasks)
        loop_out = folder / "loop.jsonl"
        script = LOOP_SCRIPT.format(bench=str(Path(__file__).resolve().parent), base=base,
                                    out=str(loop_out), tasks=str(tasks_file))
        loop_s = _timed([sys.executable, "-c", script], env, timeout)
        _read_results(loop_out, contexts, "plain loop")
        batch_out = folder / "results.jsonl"
        fleet_file = folder / "fleet.json"  # JSON is YAML
        fleet_file.write_text(json.dumps(fleet([base])))
        model_args = ["--router", str(fleet_file), "--model", MODEL_NAME,
                      "--max-iterations", str(RUN_SETTINGS["max_iterations"])]
        batch_s = _timed(batch_command(tasks_file, batch_out, "local:1", model_args), env,
                         timeout)
        _read_results(batch_out, contexts, "rlm batch")
    loop_per, batch_per = loop_s / n_tasks, batch_s / n_tasks
    diff = batch_per - loop_per
    measure = "s per task, cold start incl."
    return [Row(measure, f"plain loop of RLM().run(), {n_tasks} tasks (baseline)", loop_per,
                "s", "-"),
            Row(measure, f"rlm batch --cluster local:1, {n_tasks} tasks", batch_per, "s",
                f"{diff:+.2f} s", f"<= +{TARGET_OVERHEAD_S:g} s", diff <= TARGET_OVERHEAD_S)]


# -- 4. the embedded model ---------------------------------------------------------------------
SOME_FAILED = (0, 1)  # rlm batch's exit codes: all answered, some tasks failed
EMBEDDED_QUESTIONS = [
    "How many lines does the text have?",
    "What is the largest number in the text?",
    "How many lines contain the word 'apple'?",
    "What is the first word of the last line?",
]


def embedded_tasks(folder: Path, n: int) -> Path:
    """A tasks file of ``n`` small tasks for the embedded model (12-line contexts)."""
    lines = []
    for i in range(n):
        path = folder / f"c{i}.txt"
        path.write_text("\n".join(
            f"line {j}: {'apple' if (i + j) % 3 == 0 else 'pear'} {j * 7 + i}"
            for j in range(12)) + "\n")
        lines.append(json.dumps({"id": f"e{i}", "context": str(path),
                                 "question": EMBEDDED_QUESTIONS[i % len(EMBEDDED_QUESTIONS)]}))
    tasks_file = folder / "tasks.jsonl"
    tasks_file.write_text("\n".join(lines) + "\n")
    return tasks_file


@contextmanager
def served_replicas(count: int, folder: Path, timeout: float) -> Iterator[Path]:
    """``rlm model serve --replicas count --fleet-file F`` in a process of its own; yields
    the fleet file once the servers are ready and stops them all (Ctrl-C) at the end.

    Raises:
        RuntimeError: the servers were not ready within ``timeout`` seconds.
    """
    fleet_file = folder / "fleet.yaml"
    proc = subprocess.Popen([str(Path(sys.executable).with_name("rlm")), "model", "serve",
                             "--replicas", str(count), "--fleet-file", str(fleet_file)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + timeout
        assert proc.stderr is not None
        for line in proc.stderr:  # "Serving N replica(s) ..." once they answer
            if line.startswith("Serving") or time.monotonic() > deadline:
                break
        if not fleet_file.exists() or proc.poll() is not None:
            raise RuntimeError(f"rlm model serve --replicas {count} did not start")
        yield fleet_file
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def _embedded_row(rows: list[Row], setting: str, n_tasks: int, seconds: float,
                  out: Path) -> Row:
    results = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
    answered = sum(1 for r in results if not r.get("error") and r.get("answer") is not None)
    steps = sum(int(r.get("steps") or 0) for r in results)
    per_minute = n_tasks * 60 / seconds
    done = f"{setting}, {answered}/{n_tasks} answered in {steps} steps"
    if not rows:
        return Row("tasks/min, embedded model", f"{done} (baseline)", per_minute,
                   "tasks/min", "1.00x")
    return Row("tasks/min, embedded model", done, per_minute, "tasks/min", f"{per_minute / rows[0].figure:.2f}x",
               "none: 2 CPU cores are the limit")


def measure_embedded(n_tasks: int, timeout: float) -> list[Row]:
    """Measure 4: the embedded model, ``rlm batch --cluster local:1`` vs ``local:2``
    against one embedded server (started before, found by the workers), then
    ``local:2`` against two replicas (``rlm model serve --replicas 2``, the fleet file
    through ``--router``)."""
    from rlm_kernel.models import ensure_server, stop_server

    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    settings = ["--max-iterations", "6", "--no-progress"]
    rows: list[Row] = []
    ensure_server(None)
    try:
        for workers in (1, 2):
            with tempfile.TemporaryDirectory(prefix="bench_scale_emb_") as tmp:
                tasks_file = embedded_tasks(Path(tmp), n_tasks)
                out = Path(tmp) / "results.jsonl"
                seconds = _timed(batch_command(tasks_file, out, f"local:{workers}", settings),
                                 env, timeout, ok=SOME_FAILED)
                rows.append(_embedded_row(rows, f"rlm batch --cluster local:{workers}, "
                                          "1 server", n_tasks, seconds, out))
    finally:
        stop_server(None)
    with tempfile.TemporaryDirectory(prefix="bench_scale_emb_") as tmp:
        tasks_file = embedded_tasks(Path(tmp), n_tasks)
        out = Path(tmp) / "results.jsonl"
        with served_replicas(2, Path(tmp), timeout) as fleet_file:
            seconds = _timed(batch_command(
                tasks_file, out, "local:2",
                ["--router", str(fleet_file), "--model", "local-fleet", *settings]),
                env, timeout, ok=SOME_FAILED)
        rows.append(_embedded_row(rows, "rlm batch --cluster local:2, 2 replicas "
                                  "(rlm model serve --replicas 2)", n_tasks, seconds, out))
    return rows


# -- the table ---------------------------------------------------------------------------------
def render(rows: Sequence[Row]) -> str:
    """The table as text (one header, one line per row)."""
    header = ("measure", "setting", "figure", "ratio vs baseline", "target", "met?")
    cells = [header] + [(r.measure, r.setting, f"{r.figure:.2f} {r.unit}", r.ratio, r.target,
                         "-" if r.met is None else ("yes" if r.met else "NO")) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(cell, widths, strict=True)).rstrip()
             for cell in cells]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="a small smoke run (latency 0.05 s, 4 tasks, 1 repeat)")
    parser.add_argument("--embedded", action="store_true",
                        help="also measure the embedded model (slow: minutes)")
    parser.add_argument("--latency", type=float, default=None,
                        help="stub latency in seconds (default 0.5; --quick 0.05)")
    parser.add_argument("--tasks", type=int, default=None,
                        help="tasks per worker setting (default 32; --quick 4)")
    parser.add_argument("--repeats", type=int, default=None,
                        help="runs per deployment setting (median; default 3; --quick 1)")
    parser.add_argument("--embedded-tasks", type=int, default=4,
                        help="tasks per setting with the embedded model")
    parser.add_argument("--only", default="1,2,3",
                        help="measures to run, comma-separated (default 1,2,3; "
                        "--embedded adds 4)")
    args = parser.parse_args(argv)
    args.latency = args.latency if args.latency is not None else (0.05 if args.quick else 0.5)
    args.tasks = args.tasks or (4 if args.quick else 32)
    args.repeats = args.repeats or (1 if args.quick else 3)
    if args.latency < 0 or args.tasks < 1 or args.repeats < 1:
        parser.error("--latency must be >= 0, --tasks and --repeats >= 1")
    try:
        args.only = {int(x) for x in args.only.split(",") if x.strip()}
    except ValueError:
        args.only = set()
    if not args.only or not args.only <= {1, 2, 3, 4}:
        parser.error("--only takes measure numbers among 1,2,3,4")
    if args.embedded:
        args.only.add(4)
    return args


@contextmanager
def _quiet_logs() -> Iterator[None]:
    """Dask's and litellm's info lines off while measuring (they would interleave)."""
    names = ("distributed", "litellm", "LiteLLM", "LiteLLM Router")
    levels = {n: logging.getLogger(n).level for n in names}
    for n in names:
        logging.getLogger(n).setLevel(logging.WARNING)
    try:
        yield
    finally:
        for n, level in levels.items():
            logging.getLogger(n).setLevel(level)


def main(argv: Sequence[str] | None = None) -> list[Row]:
    """Measure, print the table and return its rows.

    Raises:
        RuntimeError: a run did not give the expected answer, or a command failed.
    """
    args = parse_args(argv)
    timeout = 3600.0 if 4 in args.only else 600.0
    rows: list[Row] = []
    load = os.getloadavg()[0]  # others' work on this machine shows in the figures

    def workers(stack: ExitStack) -> list[Row]:
        stub = stack.enter_context(StubDeployment(args.latency, STUB_SLOTS))
        return measure_workers(stub, (1, 2, 4), args.tasks)

    def deployments(stack: ExitStack) -> list[Row]:
        return measure_deployments(args.latency, args.repeats, STRATEGIES)

    def overhead(stack: ExitStack) -> list[Row]:
        stub = stack.enter_context(StubDeployment(args.latency, STUB_SLOTS))
        return measure_batch_overhead(stub.base_url, args.tasks, timeout)

    steps: list[tuple[int, Callable[[ExitStack], list[Row]]]] = [(1, workers), (2, deployments), (3, overhead)]
    with _quiet_logs():
        for number, step in steps:
            if number in args.only:
                logger.info("measure %d", number)
                with ExitStack() as stack:
                    rows += step(stack)
        if 4 in args.only:
            rows += measure_embedded(args.embedded_tasks, timeout)
    stub = (f"; stub model latency {args.latency:g} s per call, {args.tasks} tasks per "
            f"worker setting, median of {args.repeats} for llm_query_batched"
            if args.only & {1, 2, 3} else "")
    embedded = (f"; embedded model: {args.embedded_tasks} tasks per setting"
                 if 4 in args.only else "")
    print(f"Scale-out on {os.cpu_count()} CPUs{stub}{embedded}; load average "
          f"{load:.1f} before, {os.getloadavg()[0]:.1f} after")
    print()
    print(render(rows))
    return rows


if __name__ == "__main__":
    main()
