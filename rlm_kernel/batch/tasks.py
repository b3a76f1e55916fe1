"""A batch's tasks file: one JSON object per line, each an independent task.

    {"id": "q1", "question": "Who wrote it?", "context": "docs/a.txt"}
    {"id": "q2", "question": "How many rows?", "context": "s3://bucket/t.csv",
     "returns": "int", "max_iterations": 6}

A row is checked with pydantic (:class:`TaskRow`); a bad one stops the batch before
anything runs, with one message naming its line (:class:`TaskFileError`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = ["TaskFileError", "TaskRow", "read_tasks"]

LIMITS = ("max_iterations", "max_seconds", "max_cost_usd", "max_llm_calls", "max_tokens")
"""A row's own limits: the run's setting of the same name, for this task only."""


class TaskFileError(ValueError):
    """The tasks file cannot be read or holds a bad row; the message names the line."""


class TaskRow(BaseModel):
    """One task of a batch.

    Attributes:
        id: unique in the file (a number is taken as its text); names the task's
            result line and its exported notebook.
        question: the task, in natural language (not empty).
        context: None, or where the context is: a file, a folder, or an fsspec URL
            (``file://``, ``s3://``, ``gs://``); read on the worker that runs the task.
            A relative path is relative to the tasks file's folder.
        returns: the answer's type (``int``, ``list[str]`` ...), or None.
        max_iterations / max_seconds / max_cost_usd / max_llm_calls / max_tokens:
            this task's limits, over the batch's settings (None: the batch's).
        workdir: a working folder (relative: to the tasks file's folder); each run of
            the task works in its own fresh copy of it (``rlm batch --rollouts``,
            :mod:`~rlm_kernel.batch.rollouts`), or None.
        reward: the command that scores an attempt in its copy after the loop, or None:
            pytest on the ``held_back`` test files (:mod:`~rlm_kernel.batch.rewards`).
        held_back: a folder of files (tests) copied into an attempt's copy only after
            its loop, for the reward; relative as ``workdir``.
        test_command: the command ``run_tests()`` runs in this task's folder (None: the
            batch's ``test_command``, else found from the folder).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    context: str | None = None
    returns: str | None = None
    max_iterations: int | None = Field(default=None, ge=1)
    max_seconds: float | None = Field(default=None, gt=0)
    max_cost_usd: float | None = Field(default=None, ge=0)
    max_llm_calls: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    workdir: str | None = None
    reward: str | None = None
    held_back: str | None = None
    test_command: str | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _id_text(cls, value: Any) -> Any:
        """A number is accepted as an id, as its text (a bool is not)."""
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the question is blank")
        return value

    def limits(self) -> dict[str, Any]:
        """This task's own limits, as ``RLMConfig`` overrides (only those set)."""
        return {name: getattr(self, name) for name in LIMITS
                if getattr(self, name) is not None}


def _resolve(location: str | None, base: Path) -> str | None:
    """A relative local path made absolute against the tasks file's folder; URLs and
    absolute paths as given."""
    if location is None or "://" in location:
        return location
    path = Path(os.path.expanduser(location))
    return str(path if path.is_absolute() else (base / path).resolve())


def _local(location: str | None, base: Path) -> str | None:
    """A local folder of a row made absolute against the tasks file's folder."""
    if location is None:
        return None
    path = Path(os.path.expanduser(location))
    return str(path if path.is_absolute() else (base / path).resolve())


def _error_text(exc: ValidationError) -> str:
    """pydantic's errors in one line: ``question: Field required; max_iterations: ...``."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "row"
        message = err["msg"]
        if err["type"] == "extra_forbidden":
            message = f"unknown key (known: {', '.join(TaskRow.model_fields)})"
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


def read_tasks(path: str | os.PathLike[str]) -> list[TaskRow]:
    """Read and check a tasks file (JSON Lines; blank lines are skipped).

    Args:
        path: the ``.jsonl`` file.

    Returns:
        The rows in file order, relative context paths made absolute against the
        file's folder.

    Raises:
        TaskFileError: the file cannot be read, holds no task, or a line is not a JSON
            object, misses ``id`` or ``question``, has an unknown key or a bad value,
            or repeats an id; the message names the file and the line (from 1).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskFileError(f"cannot read the tasks file {path}: "
                            f"{getattr(exc, 'strerror', None) or exc}") from None
    base = path.resolve().parent
    rows: list[TaskRow] = []
    seen: dict[str, int] = {}
    # "\n" only: a JSON string may hold U+2028 and the like, which splitlines() splits
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{path}, line {number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskFileError(f"{where}: not JSON ({exc.msg}, column {exc.colno})") from None
        if not isinstance(data, dict):
            raise TaskFileError(f"{where}: a task is a JSON object "
                                '({"id": ..., "question": ...}), got ' + type(data).__name__)
        try:
            row = TaskRow.model_validate(data)
        except ValidationError as exc:
            raise TaskFileError(f"{where}: {_error_text(exc)}") from None
        if row.id in seen:
            raise TaskFileError(f"{where}: id {row.id!r} is already used on line "
                                f"{seen[row.id]}")
        seen[row.id] = number
        rows.append(row.model_copy(update={
            "context": _resolve(row.context, base), "workdir": _local(row.workdir, base),
            "held_back": _local(row.held_back, base)}))
    if not rows:
        raise TaskFileError(f"{path}: no tasks (one JSON object per line)")
    return rows
