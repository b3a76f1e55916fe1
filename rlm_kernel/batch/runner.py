"""Run a batch's tasks on a Dask cluster: submit them a few at a time (``client.submit``
with a stable key per id, Dask's retries, ``as_completed``), write each result line as
it arrives, export each trajectory on the client, and stop submitting once the
finished tasks' cost reaches ``max_cost``.  Dask schedules, retries and reschedules the
task of a worker that died; nothing here queues or balances."""

from __future__ import annotations

import hashlib
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine import RLMConfig, RLMResult
from ..models import LLMError, load_fleet
from .progress import BatchProgress
from .results import ResultsFile, result_line, same_file
from .rollouts import AttemptOutcome, attempt_id, rollout_line, run_attempt
from .tasks import TaskRow
from .worker import TaskOutcome, run_row

__all__ = ["BatchReport", "batch_token", "notebook_path", "run_batch", "task_key"]

log = logging.getLogger(__name__)

_PLAIN_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,99}\Z")
_NOT_PLAIN = re.compile(r"[^a-z0-9._-]+")
_DEVICE_NAMES = frozenset({"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)),
                           *(f"lpt{i}" for i in range(10))})
"""Names Windows keeps for devices, whatever their extension (``nul.ipynb``)."""


@dataclass
class BatchReport:
    """What a batch did.

    Attributes:
        total: tasks in the tasks file.
        skipped: tasks already in ``--out`` (not run again).
        answered / failed: tasks run now that have an answer / have none (an error,
            a limit reached, their worker lost too often).
        not_run: tasks not run because ``max_cost`` was reached (a re-run does them).
        cost_usd: the cost of the tasks run now, in USD.
        seconds: wall-clock time of the batch.
        stopped_for_cost: submission stopped at ``max_cost``.
        export_errors: one message per notebook that could not be written.
    """

    total: int = 0
    skipped: int = 0
    answered: int = 0
    failed: int = 0
    not_run: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    stopped_for_cost: bool = False
    export_errors: list[str] = field(default_factory=list)


def task_key(task_id: str, batch: str = "") -> str:
    """The Dask key of a task: ``rlm-task-<id>-<batch>``, stable per id within a batch
    (a rescheduled or retried task keeps it); ``batch`` (:func:`batch_token`) keeps two
    batches with the same ids on one shared cluster apart."""
    return f"rlm-task-{task_id}" + (f"-{batch}" if batch else "")


def batch_token(out: ResultsFile) -> str:
    """A short token of the results file's absolute path: the same for a re-run of the
    same batch, another for another batch."""
    return hashlib.sha1(str(out.path.resolve()).encode()).hexdigest()[:8]


def notebook_path(folder: str | Path, task_id: str) -> Path:
    """Where ``--export`` writes a task's notebook: ``folder/<name>.ipynb``.

    The name is the id itself when the id is plain: ASCII lower-case letters, digits,
    ``.``, ``-``, ``_``, at most 100 characters, starting with a letter or a digit,
    and not a Windows device name (``con``, ``nul`` ...).  Any other id is named
    ``<slug>~<16 hex digits>``: the slug its lower-cased text with other characters
    as ``_`` (at most 60), the digits the start of the SHA-256 of the id's UTF-8.
    So ids that differ never share a notebook, even on a file system that ignores
    case or cannot hold some characters: a plain name never holds ``~`` and is its
    id; two other names differ by their ids' hashes (two ids sharing 64 bits of
    SHA-256 has never been seen).

    Args:
        folder: the export folder.
        task_id: the task's id (any text).

    Returns:
        The notebook's path (``folder`` joined with an ASCII file name of at most
        106 characters).
    """
    if _PLAIN_ID.match(task_id) and task_id.split(".")[0] not in _DEVICE_NAMES:
        return Path(folder) / f"{task_id}.ipynb"
    slug = _NOT_PLAIN.sub("_", task_id.lower())[:60].strip("._-") or "task"
    digest = hashlib.sha256(task_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return Path(folder) / f"{slug}~{digest}.ipynb"


def _export(result: RLMResult, row: TaskRow, folder: str | Path,
            out: ResultsFile) -> str | None:
    """Write one task's trajectory as a notebook; an error message, or None."""
    from ..export import cli_setup_cells, export_run

    path = notebook_path(folder, row.id)
    if any(same_file(path, Path(kept)) for kept in (out.path, *out.inputs)):
        return f"task {row.id}: not written: {path} is a file the batch reads or writes"
    if row.context is None:
        setup: list[str] = []
    elif "://" in row.context:
        setup = ["from rlm_kernel.batch import load_context\n\n"
                 f"context = load_context({row.context!r})"]
    else:
        setup = cli_setup_cells([row.context])
    try:
        export_run(result, path, setup_cells=setup)
    except (OSError, ValueError) as exc:
        return f"task {row.id}: cannot write {path}: {getattr(exc, 'strerror', None) or exc}"
    return None


def run_batch(tasks: list[TaskRow], client: Any, config: RLMConfig, out: ResultsFile, *,
              export_dir: str | Path | None = None, max_cost: float | None = None,
              retries: int = 1, in_flight: int | None = None,
              progress: BatchProgress | None = None, rollouts: int | None = None,
              keep_copies: bool = False) -> BatchReport:
    """Run the tasks not yet in ``out`` on the cluster ``client`` talks to.

    Args:
        tasks: the batch's rows (:func:`~rlm_kernel.batch.tasks.read_tasks`).
        client: a ``distributed.Client``.
        config: every task's settings (a row's limits override them for its task).
        out: the results file; ids in ``out.done`` are skipped.
        export_dir: a folder for each task's ``<id>.ipynb``, written here on the
            client, or None.
        max_cost: stop submitting once the finished tasks cost this many USD; tasks
            already running finish and are written, queued ones are cancelled.
        retries: Dask's ``retries`` of a task whose function raised (a worker that
            dies is Dask's worker loss: it reschedules the task, up to its
            ``distributed.scheduler.allowed-failures``).
        in_flight: tasks submitted at a time (default: the cluster's worker threads,
            asked again as each task finishes, so workers that join get work): no
            task waits in a queue, so ``max_cost`` stops all that has not started.
        progress: the bar to update, or None.
        rollouts: run each task this many times, each attempt in its own copy of the
            task's ``workdir`` and scored after its loop
            (:mod:`~rlm_kernel.batch.rollouts`: one line per attempt, id
            ``<task id>#<k>``); None: each task once, as a plain batch.
        keep_copies: keep each attempt's copy (its path in the line).

    Returns:
        The :class:`BatchReport`.  Every task run has exactly one line in ``out``; a
        task whose worker died too often has one with its error.
    """
    from distributed import as_completed

    t0 = time.monotonic()
    if config.router is not None:  # the fleet's keys are secrets here too (results, errors)
        try:
            load_fleet(config.router)
        except LLMError:
            pass  # each task's run reports it
    # the units of work: each task once, or each attempt of each task (a unit's id is
    # what the results file knows it by)
    units: list[tuple[str, TaskRow, int | None]] = \
        [(row.id, row, None) for row in tasks] if rollouts is None else \
        [(attempt_id(row.id, k), row, k) for row in tasks for k in range(rollouts)]
    report = BatchReport(total=len(units))
    todo = [unit for unit in units if unit[0] not in out.done]
    report.skipped = len(units) - len(todo)

    def slots() -> int:
        return in_flight or max(1, sum(client.nthreads().values()))

    token = batch_token(out)
    queue = iter(todo)
    rows: dict[str, tuple[str, TaskRow, int | None]] = {}  # by Dask key: submitted units
    completed = as_completed()

    def submit_next() -> bool:
        unit = next(queue, None)
        if unit is None:
            return False
        uid, row, attempt = unit
        if attempt is None:
            future = client.submit(run_row, config, row.model_dump(),
                                   key=task_key(uid, token), pure=False, retries=retries)
        else:
            future = client.submit(run_attempt, config, row.model_dump(), attempt,
                                   keep_copies, key=task_key(uid, token), pure=False,
                                   retries=retries)
        rows[future.key] = unit
        completed.add(future)
        if progress is not None:
            progress.submitted()
        return True

    while len(rows) < slots() and submit_next():
        pass
    for future in completed:
        uid, row, attempt = rows.pop(future.key)
        try:
            outcome: TaskOutcome = future.result()
        except Exception as exc:  # noqa: BLE001 - the task's worker failed: its error line
            log.warning("task %s failed on the cluster: %s", uid, exc)
            failed = RLMResult(question=row.question, stopped_by="error",
                               error=f"its worker failed: {type(exc).__name__}: {exc}")
            outcome = TaskOutcome(uid, failed, worker=None) if attempt is None else \
                AttemptOutcome(uid, failed, worker=None, task_id=row.id, attempt=attempt)
        finally:
            future.release()
        result = outcome.result
        answered = result.answer is not None and result.stopped_by != "error"
        report.answered += answered
        report.failed += not answered
        report.cost_usd += result.cost_usd
        if max_cost is not None and report.cost_usd >= max_cost and not report.stopped_for_cost:
            report.stopped_for_cost = True
            log.info("max cost reached: no new task; %d running go on", len(rows))
        while not report.stopped_for_cost and len(rows) < slots() and submit_next():
            pass  # the workers get their next task before this one is written
        out.write(rollout_line(outcome) if isinstance(outcome, AttemptOutcome)
                  else result_line(uid, result, outcome.worker))
        if progress is not None:
            progress.finished(answered=answered, cost_usd=result.cost_usd)
        if export_dir is not None and attempt is None:
            error = _export(result, row, export_dir, out)
            if error:
                report.export_errors.append(error)
    report.not_run = len(todo) - report.answered - report.failed
    report.seconds = time.monotonic() - t0
    return report

