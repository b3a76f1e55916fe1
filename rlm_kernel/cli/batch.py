"""``rlm batch``: many tasks, each an independent RLM run, on a Dask cluster.

    rlm batch tasks.jsonl --out results.jsonl [--cluster local:N | tcp://host:8786]
              [--export DIR] [--max-cost USD] [setting flags of rlm run]

Exit codes: 0 every task answered, 1 some failed (or were not run: ``--max-cost``),
2 bad input (the tasks file, a flag, the cluster address, an ``--out`` that is the tasks
file or an existing file that is not a results file: nothing is written then).
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import sys
from typing import Any

from ..engine.frontends import add_setting_options, config_overrides
from ..redaction import redact_text

__all__ = ["add_batch_parser", "batch_command"]

log = logging.getLogger(__name__)


def _usd(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be more than 0 USD")
    return value


def add_batch_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``batch`` sub-command to the ``rlm`` parser's sub-parsers ``sub``."""
    batch = sub.add_parser(
        "batch", help="run many tasks (a JSON Lines file) on a Dask cluster",
        conflict_handler="resolve",  # --max-cost is the whole batch's here
        description="Run each task of TASKS (one JSON object per line: id, question, "
        "context = a file, a folder or an fsspec URL read on the worker, optional returns "
        "and limits) as an independent run; one JSON line per finished task goes to --out "
        "and a re-run skips the ids already there.")
    batch.add_argument("tasks", metavar="TASKS.jsonl", help="the tasks file")
    batch.add_argument("--out", required=True, metavar="RESULTS.jsonl",
                       help="the results file (appended to; ids already in it are "
                       "skipped); a file that exists must be a results file (never the "
                       "tasks file)")
    batch.add_argument("--cluster", default="local", metavar="SPEC",
                       help="local (one worker process per CPU), local:N (N worker "
                       "processes) or a Dask scheduler address (tcp://host:8786); "
                       "default: local")
    batch.add_argument("--export", metavar="DIR",
                       help="write each task's trajectory as DIR/<id>.ipynb (an id other "
                       "than lower-case letters, digits, '.', '-', '_': "
                       "DIR/<id's letters>~<16 hex digits of its SHA-256>.ipynb, so no two "
                       "ids share a notebook)")
    add_setting_options(batch)  # --model, --max-iterations ... as rlm run has them
    batch.add_argument("--max-cost", type=_usd, metavar="USD", dest="batch_max_cost",
                       help="the whole batch's budget: once the finished tasks cost this "
                       "much, no new task starts; running ones finish")
    batch.add_argument("--task-max-cost", type=_usd, metavar="USD", dest="max_cost_usd",
                       help="each task's cost limit (a row's max_cost_usd overrides it)")
    batch.add_argument("--retries", type=int, default=1, metavar="N",
                       help="Dask retries of a task whose run raised (default 1); a task "
                       "whose worker died is rescheduled by Dask anyway")
    batch.add_argument("--rollouts", type=int, metavar="K",
                       help="rollouts for training: run each task K times, each attempt in "
                       "its own copy of the task's workdir, scored after its loop by the "
                       "task's reward (held-back tests); one line per attempt, id "
                       "<task id>#<k> (docs: Rollouts for training)")
    batch.add_argument("--keep-copies", action="store_true",
                       help="with --rollouts: keep each attempt's copy of the folder "
                       "(its path is in the line); by default each is removed")
    batch.add_argument("--no-progress", action="store_true", help="no progress bar")
    return batch


def _err(message: str) -> None:
    """``message`` on stderr as ``rlm batch: ...``, secrets redacted."""
    print(f"rlm batch: {redact_text(message)}", file=sys.stderr, flush=True)


def batch_command(args: argparse.Namespace) -> int:
    """Run ``rlm batch``; returns the exit code (0 all answered, 1 some failed or not
    run, 2 bad input).  Every failure is one readable message on stderr."""
    from ..batch import (
        BatchProgress,
        ClusterMissing,
        ClusterSpecError,
        ResultsFile,
        TaskFileError,
        attempt_id,
        open_cluster,
        parse_cluster,
        read_tasks,
        run_batch,
    )
    from ..engine import RLMConfig
    from ..models import is_embedded

    try:
        tasks = read_tasks(args.tasks)
        parse_cluster(args.cluster)
        if args.retries < 0:
            raise ValueError("--retries must be >= 0")
        if args.rollouts is not None:
            if args.rollouts < 1:
                raise ValueError("--rollouts must be >= 1")
            bare = [t.id for t in tasks if not t.workdir]
            if bare:
                raise ValueError(f"--rollouts: task {bare[0]!r} has no workdir (each "
                                 "attempt works in its own copy of the task's folder)")
        elif args.keep_copies:
            raise ValueError("--keep-copies goes with --rollouts")
        config = RLMConfig().replace(**config_overrides(args))
        model, sub_model = config.models()  # $RLM_MODEL read here, not on each worker
        config = config.replace(model=model, sub_model=sub_model)
        out = ResultsFile(args.out, inputs=(args.tasks,))
    except (TaskFileError, ClusterSpecError, ValueError, TypeError) as exc:
        _err(str(exc))
        return 2
    except OSError as exc:
        _err(f"cannot open --out {args.out}: {exc.strerror or exc}")
        return 2
    with out:
        ids = [t.id for t in tasks] if args.rollouts is None else \
            [attempt_id(t.id, k) for t in tasks for k in range(args.rollouts)]
        todo = [i for i in ids if i not in out.done]
        what = "tasks" if args.rollouts is None else "attempts"
        if not todo:
            print(f"All {len(ids)} {what} already have a line in {args.out}; nothing to run.",
                  file=sys.stderr)
            return 0
        if len(todo) < len(ids):
            print(f"Resuming: {len(ids) - len(todo)} of {len(ids)} {what} already in "
                  f"{args.out}; running the other {len(todo)}.", file=sys.stderr)
        if is_embedded(config.model) and args.cluster.startswith("local"):
            # the weights, once, before any worker of this machine asks for them
            from .model import prepare_with_progress

            try:
                prepare_with_progress(None if not config.model or config.model == "local"
                                      else config.model[6:])
            except Exception as exc:  # noqa: BLE001 - LocalModelError and its subclass
                _err(str(exc))
                return 1
        try:
            with open_cluster(args.cluster) as client:
                _tell_cluster(client, args.cluster)
                progress = BatchProgress(len(todo), slots=sum(client.nthreads().values()),
                                         enabled=not args.no_progress)
                try:
                    report = run_batch(tasks, client, config, out, export_dir=args.export,
                                       max_cost=args.batch_max_cost, retries=args.retries,
                                       progress=progress, rollouts=args.rollouts,
                                       keep_copies=args.keep_copies)
                finally:
                    progress.close()
        except ClusterMissing as exc:
            _err(str(exc))
            return 2
        except OSError as exc:  # no scheduler at the address
            _err(f"cannot reach the cluster {args.cluster}: {exc}")
            return 2
    return _summary(report, args)


def _tell_cluster(client: Any, spec: str) -> None:
    """Where the batch runs: the workers, and Dask's dashboard link (with bokeh)."""
    workers = len(client.nthreads())
    print(f"Dask cluster {spec}: {workers} worker{'s' * (workers != 1)}", file=sys.stderr)
    if importlib.util.find_spec("bokeh") is not None or not spec.startswith("local"):
        print(f"Dashboard: {client.dashboard_link}", file=sys.stderr, flush=True)


def _summary(report: Any, args: argparse.Namespace) -> int:
    """Print what the batch did; the exit code."""
    ran = report.answered + report.failed
    print(f"{report.answered} answered, {report.failed} failed"
          f"{f', {report.skipped} already done' if report.skipped else ''}"
          f"{f', {report.not_run} not run' if report.not_run else ''}; "
          f"${report.cost_usd:.4f}, {report.seconds:.1f} s ({ran} tasks) -> {args.out}",
          file=sys.stderr)
    if report.stopped_for_cost:
        _err(f"--max-cost ${args.batch_max_cost:g} reached (${report.cost_usd:.4f} spent): "
             f"no new task was started; {report.not_run} not run (re-run the same command "
             "to do them)")
    if args.export:
        print(f"Notebooks: {args.export}/<id>.ipynb (other ids than lower-case letters, "
              "digits, . - _: <id>~<hash>.ipynb)", file=sys.stderr)
    for error in report.export_errors:
        _err(error)
    return 0 if report.failed == 0 and report.not_run == 0 and not report.export_errors \
        else 1
