"""Rollouts: K attempts at each task of a batch, each in its own fresh copy of the task's
working folder, scored by the host after its loop, one line per attempt in the shape
RL trainers read (``rlm batch tasks.jsonl --rollouts K``; docs: "Rollouts for training").

An attempt is a batch task of its own (id ``<task id>#<k>``, :func:`attempt_id`), so
it is submitted, retried, rescheduled after a lost worker and resumed exactly as a task
is (:func:`~rlm_kernel.batch.runner.run_batch`: one Dask key per attempt, a line
written once it finished, the ids already in ``--out`` skipped).  On its worker
(:func:`run_attempt`):

1. the task's ``workdir`` is copied (:func:`shutil.copytree`, links kept as links) into
   a fresh temporary folder: nothing of one attempt is visible to another;
2. the run works in that copy (``RLMConfig.workdir``);
3. after the loop, outside model code, the copy is scored
   (:func:`~rlm_kernel.batch.rewards.score`: steering files put back, held-back tests
   copied in, the reward command run in a fresh executor);
4. the copy is removed, unless ``keep_copies`` (its path is then in the line).

The line (:func:`rollout_line`) holds the results file's keys
(:data:`~rlm_kernel.batch.results.RESULT_KEYS`) and: ``task_id`` and ``group`` (the task's
id: the attempts of one task are one GRPO group), ``attempt`` (0..K-1), ``messages``
(the root conversation as OpenAI chat messages), ``prompt`` and ``completion`` (the same
split at the first assistant turn: TRL's conversational prompt-completion format),
``children`` (each sub-agent's conversation), ``reward``, ``reward_error``, ``metrics``
(:data:`METRIC_KEYS`), ``restored`` (files the scoring put back), ``diff``, ``answer_source``,
``copy_seconds``, ``score_seconds`` and ``copy``.  Every key has one type across lines,
so Hugging Face ``datasets`` loads the file as it is.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import Executor as FuturesExecutor
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine import RLMConfig, RLMResult
from .cluster import local_executor
from .contexts import ContextRef
from .mapping import run_task
from .results import result_line
from .rewards import Reward, RewardSpec, score
from .worker import TaskOutcome, worker_name

__all__ = ["METRIC_KEYS", "AttemptOutcome", "attempt_id", "map_rollouts", "rollout_line",
           "run_attempt"]

log = logging.getLogger(__name__)


def attempt_id(task_id: str, attempt: int) -> str:
    """The id of a task's attempt in the results file: ``<task id>#<attempt>``."""
    return f"{task_id}#{attempt}"


@dataclass
class AttemptOutcome(TaskOutcome):
    """One finished attempt, as sent back to the client (a :class:`TaskOutcome` with
    its reward).

    Attributes:
        task_id: the task's id (the attempt's group).
        attempt: the attempt's number, from 0.
        reward: its :class:`~rlm_kernel.batch.rewards.Reward`.
        copy: the kept copy's path (``keep_copies``), else None (removed).
        copy_seconds: seconds spent copying the folder.
        score_seconds: seconds spent scoring it.
    """

    task_id: str = ""
    attempt: int = 0
    reward: Reward | None = None
    copy: str | None = None
    copy_seconds: float = 0.0
    score_seconds: float = 0.0


def run_attempt(config: RLMConfig, row: dict[str, Any], attempt: int,
                keep_copy: bool = False, context: Any = None) -> AttemptOutcome:
    """Run and score one attempt at a task on this worker (see the module docstring).

    Args:
        config: the batch's settings.
        row: the task's :class:`~rlm_kernel.batch.tasks.TaskRow` as a dict; its
            ``workdir`` is required.
        attempt: the attempt's number (from 0).
        keep_copy: keep the attempt's copy of the folder (its path in the outcome).
        context: the value bound to ``context`` (:meth:`RLM.map`'s); None: the row's
            ``context`` location, read here, if any.

    Returns:
        The :class:`AttemptOutcome`; a failure (the folder cannot be copied, the run or
        the scoring failed) is in its result or reward, never raised.
    """
    from .tasks import LIMITS

    uid = attempt_id(row["id"], attempt)
    workdir = row.get("workdir")
    outcome = AttemptOutcome(id=uid, result=RLMResult(question=row["question"]),
                             worker=worker_name(), task_id=row["id"], attempt=attempt)
    if not workdir:
        outcome.result.error = "a rollout task needs a workdir (the folder each attempt copies)"
        outcome.reward = Reward(0.0, error="no workdir")
        return outcome
    start = time.perf_counter()
    top = tempfile.mkdtemp(prefix="rlm-rollout-")
    os.chmod(top, 0o711)  # the sandbox's uid passes through to the copy; nobody lists it
    copy = Path(top) / Path(workdir).name
    try:
        shutil.copytree(workdir, copy, symlinks=True)
    except OSError as exc:
        shutil.rmtree(top, ignore_errors=True)
        outcome.result.error = f"cannot copy the task's folder {workdir}: {exc}"
        outcome.reward = Reward(0.0, error="no copy")
        return outcome
    outcome.copy_seconds = time.perf_counter() - start
    try:
        limits = {name: row[name] for name in LIMITS if row.get(name) is not None}
        test_command = row.get("test_command") or config.test_command
        if context is None and row.get("context"):
            context = ContextRef(row["context"])
        try:
            task_config = config.replace(workdir=str(copy), test_command=test_command,
                                         **limits)
        except (TypeError, ValueError) as exc:
            outcome.result = RLMResult(question=row["question"], stopped_by="error",
                                       error=str(exc))
        else:
            outcome.result = run_task(task_config, row["question"], context,
                                      row.get("returns"))
        start = time.perf_counter()
        try:
            spec = RewardSpec(command=row.get("reward"), held_back=row.get("held_back"),
                              timeout=config.test_timeout)
            outcome.reward = score(copy, spec, pristine=workdir)
        except Exception as exc:  # noqa: BLE001 - an attempt's scoring failure is its own
            log.warning("attempt %s could not be scored: %s", uid, exc)
            outcome.reward = Reward(0.0, error=f"scoring failed: {type(exc).__name__}: {exc}")
        outcome.score_seconds = time.perf_counter() - start
    finally:
        if keep_copy:
            outcome.copy = str(copy)
        else:
            shutil.rmtree(top, ignore_errors=True)
    log.info("attempt %s: %s, reward %.3f", uid, outcome.result.stopped_by,
             outcome.reward.value if outcome.reward else 0.0)
    return outcome


def _split(messages: list[dict[str, str]]) -> tuple[list[dict[str, str]],
                                                    list[dict[str, str]]]:
    """``(prompt, completion)``: the messages before the first assistant turn, and the
    rest (TRL's conversational prompt-completion format)."""
    for i, message in enumerate(messages):
        if message.get("role") == "assistant":
            return messages[:i], messages[i:]
    return list(messages), []


METRIC_KEYS = ("passed", "failed", "errors", "skipped", "total", "exit_code", "timed_out",
               "seconds", "prepare_seconds", "walled")
"""The keys of a line's ``metrics`` (:attr:`~rlm_kernel.batch.rewards.Reward.metrics`),
every one in every line (None where the scoring did not get that far), so each is one
column of one type for ``datasets``."""


def _metric(value: Any) -> Any:
    """A metric as a column value: counts and flags as they are, seconds rounded."""
    return round(value, 3) if isinstance(value, float) else value


def rollout_line(outcome: AttemptOutcome) -> dict[str, Any]:
    """The results file's line of one attempt (see the module docstring for its keys)."""
    result = outcome.result
    line = result_line(outcome.id, result, outcome.worker)
    messages = [dict(m) for m in result.messages]
    prompt, completion = _split(messages)
    reward = outcome.reward or Reward(0.0, error="not scored")
    metrics = reward.metrics
    line.update({
        "task_id": outcome.task_id, "group": outcome.task_id, "attempt": outcome.attempt,
        "messages": messages, "prompt": prompt, "completion": completion,
        "children": [{"id": c.id, "parent": c.parent, "depth": c.depth,
                      "parent_step": c.parent_step, "question": c.question,
                      "messages": [dict(m) for m in c.messages], "answer": c.answer,
                      "stopped_by": c.stopped_by, "steps": c.steps,
                      "seconds": round(c.seconds, 3)} for c in result.children],
        "reward": float(reward.value), "reward_error": reward.error,
        "metrics": {k: _metric(metrics.get(k)) for k in METRIC_KEYS},
        "restored": [str(p) for p in metrics.get("restored") or []],
        "diff": result.diff, "answer_source": result.answer_source,
        "copy_seconds": round(outcome.copy_seconds, 3),
        "score_seconds": round(outcome.score_seconds, 3), "copy": outcome.copy,
    })
    return line



def map_rollouts(config: RLMConfig, questions: Sequence[str], contexts: Any = None, *,
                 rollouts: int, held_back: str | None = None, reward: str | None = None,
                 executor: FuturesExecutor | None = None,
                 keep_copies: bool = False) -> list[dict[str, Any]]:
    """:meth:`RLM.map(..., rollouts=K) <rlm_kernel.engine.RLM.map>`: each question
    ``rollouts`` times, each attempt in its own copy of ``config.workdir``, scored after
    its loop (:func:`run_attempt`), on ``executor``.

    Args:
        config: every attempt's settings; ``workdir`` is the folder each copies.
        questions: the tasks (a str alone is one); task ``i`` has the id ``str(i)``.
        contexts: one context per question, or one for all, or None.
        rollouts: attempts per question (>= 1).
        held_back: a folder of tests copied into each copy after its loop, or None.
        reward: a command that scores a copy instead of pytest on ``held_back``.
        executor: any ``concurrent.futures.Executor``; None: a Dask ``LocalCluster``
            (one worker process per CPU, at most one per attempt), closed at the end.
        keep_copies: keep each attempt's copy (its path in the line's ``copy``).

    Returns:
        One rollout line per attempt (:func:`rollout_line`: the same dicts as ``rlm
        batch --rollouts`` writes; ``datasets.Dataset.from_list`` takes them), in
        question order, then attempt order.

    Raises:
        ValueError: no ``workdir``, ``rollouts`` < 1, no ``held_back`` and no
            ``reward``, or ``contexts`` of another length than ``questions``.
    """
    import os

    from .mapping import _contexts

    questions = [questions] if isinstance(questions, str) else list(questions)
    if not config.workdir:
        raise ValueError("map(rollouts=...): set workdir, the folder each attempt copies")
    if rollouts < 1:
        raise ValueError(f"rollouts must be >= 1, not {rollouts}")
    if held_back is None and reward is None:
        raise ValueError("map(rollouts=...): give held_back (a folder of tests) or reward "
                         "(a command) to score the attempts")
    ctx = _contexts(questions, contexts)
    if executor is None:
        with local_executor(min(len(questions) * rollouts, os.cpu_count() or 1)) as dask:
            return map_rollouts(config, questions, ctx, rollouts=rollouts,
                                held_back=held_back, reward=reward, executor=dask,
                                keep_copies=keep_copies)
    work: list[tuple[dict[str, Any], int, Any]] = []
    for i, (question, context) in enumerate(zip(questions, ctx, strict=True)):
        row: dict[str, Any] = {"id": str(i), "question": question, "workdir": config.workdir,
               "held_back": held_back, "reward": reward}
        for k in range(rollouts):
            work.append((row, k, context))
    futures: list[Future[AttemptOutcome]] = [
        executor.submit(run_attempt, config, row, k, keep_copies, context)
        for row, k, context in work]
    lines = []
    for (row, k, _), future in zip(work, futures, strict=True):
        try:
            outcome = future.result()
        except Exception as exc:  # noqa: BLE001 - the worker's failure is this attempt's
            outcome = AttemptOutcome(
                attempt_id(row["id"], k),
                RLMResult(question=row["question"], stopped_by="error",
                          error=f"its worker failed: {type(exc).__name__}: {exc}"),
                worker=None, task_id=row["id"], attempt=k)
        lines.append(rollout_line(outcome))
    return lines
