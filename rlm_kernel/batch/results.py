"""A batch's results file: one JSON line per finished task, written and flushed as each
task finishes, so a killed batch keeps what it finished and a re-run skips those ids.

    {"id": "q1", "answer": "Melville", "answer_value": null, "steps": 3, "llm_calls": 4,
     "prompt_tokens": 5120, "completion_tokens": 310, "cost_usd": 0.0021,
     "seconds": 12.4, "stopped_by": "final", "error": null,
     "worker": "tcp://127.0.0.1:40123", "question": "Who wrote it?"}

A results file is recognised by its lines: each is a JSON object holding every key of
:data:`RESULT_KEYS`, keys a task row never has (a row with an unknown key is refused), so
a tasks file or some other JSON Lines file given as ``--out`` by a slip is refused before
anything is written to it (:class:`ResultsFileError`), and so is the tasks file itself
(the same file by any path, symlink or hard link).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import IO, Any

from ..engine import RLMResult
from ..redaction import redact_data

__all__ = ["RESULT_KEYS", "ResultsFile", "ResultsFileError", "result_line", "same_file"]

log = logging.getLogger(__name__)

RESULT_KEYS = frozenset({"id", "answer", "answer_value", "steps", "llm_calls",
                         "prompt_tokens", "completion_tokens", "cost_usd", "seconds",
                         "stopped_by", "error", "worker", "question"})
"""The keys every line of a results file holds (:func:`result_line`)."""

_LINE_START = '{"id": '  # how every line this module writes begins (json.dumps' order)
_AFTER_ID = ', "answer": '  # and what follows the id's string


class ResultsFileError(ValueError):
    """``--out`` may not be written: it is the tasks file (or another file the batch
    reads), or an existing file that is not a results file.  Nothing was written."""


def result_line(task_id: str, result: RLMResult, worker: str | None) -> dict[str, Any]:
    """The results file's record of one task.

    Args:
        task_id: the task's id.
        result: its run's result.
        worker: who ran it (None: unknown, e.g. its worker died).

    Returns:
        ``id``, ``answer`` (text or None), ``answer_value`` (the typed value as JSON
        data when the task asked for ``returns``, else None), ``steps``,
        ``llm_calls``, ``prompt_tokens``, ``completion_tokens``, ``cost_usd``,
        ``seconds``, ``stopped_by``, ``error``, ``worker``, ``question``
        (:data:`RESULT_KEYS`, in this order).
    """
    summary = result.summary()
    return {
        "id": task_id,
        "answer": summary["answer"],
        "answer_value": summary.get("answer_value"),
        "steps": summary["steps"],
        "llm_calls": summary["llm_calls"],
        "prompt_tokens": summary["prompt_tokens"],
        "completion_tokens": summary["completion_tokens"],
        "cost_usd": summary["cost_usd"],
        "seconds": summary["seconds"],
        "stopped_by": summary["stopped_by"],
        "error": summary["error"],
        "worker": worker,
        "question": result.question,
    }


def _result_id(text: str) -> str | None:
    """The id of a result line's text, or None if ``text`` is not one (not JSON, not an
    object, a key of :data:`RESULT_KEYS` missing, an id or ``stopped_by`` that is not
    text)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or not RESULT_KEYS <= data.keys():
        return None
    if not isinstance(data["id"], str) or not isinstance(data["stopped_by"], str):
        return None
    return data["id"]


def _cut_result_line(tail: str, has_results: bool) -> bool:
    """Whether ``tail``, a last line with no newline that is not a whole result line,
    is the start of one this module wrote (a batch killed mid-write): it begins with
    ``{"id": "<id>", "answer": `` or a cut of it (cut before the id's end: only in a
    file that holds result lines)."""
    if _LINE_START.startswith(tail):  # cut before the id
        return has_results
    if not tail.startswith(_LINE_START):
        return False
    try:
        _, end = json.JSONDecoder().raw_decode(tail, len(_LINE_START))
    except ValueError:  # cut inside the id's string
        return has_results
    rest = tail[end:]
    return rest.startswith(_AFTER_ID) or _AFTER_ID.startswith(rest)


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are one file (same device and inode: by any spelling, through a
    symlink, or hard links); False when either does not exist."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


class ResultsFile:
    """The ``--out`` file, checked, then opened for appending.

    Args:
        path: the ``.jsonl`` file (created with its folder if missing).
        inputs: files the batch reads (the tasks file); ``path`` may be none of them,
            by any spelling, symlink or hard link.

    Attributes:
        done: the ids already in the file (read at opening, grown by :meth:`write`).
        inputs: ``inputs`` as paths (files nothing of the batch may write).

    Raises:
        ResultsFileError: ``path`` is one of ``inputs``, exists and is not a regular
            file, or is an existing file whose lines are not all result lines
            (:data:`RESULT_KEYS`); the message names the first line that is not; the
            file is left as it was.
        OSError: the file cannot be read or opened for writing.

    An existing results file is read whole before anything is written.  Its last line,
    when it has no newline: kept (a newline added) if it is a whole result line;
    removed if it is the start of one cut short by a killed batch (its task runs
    again); anything else there makes it not a results file.  A file this object
    created and wrote nothing to (the cluster was unreachable, every task was refused)
    is removed at :meth:`close`, so a failed batch leaves no empty results file behind.
    """

    def __init__(self, path: str | os.PathLike[str],
                 inputs: tuple[str | os.PathLike[str], ...] = ()) -> None:
        self.path = Path(path)
        self.done: set[str] = set()
        self.inputs = tuple(Path(source) for source in inputs)
        for source in inputs:
            if same_file(self.path, Path(source)):
                raise ResultsFileError(
                    f"--out {path} is the tasks file {source} (the same file); the "
                    "results go to a file of their own, e.g. --out results.jsonl")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._created = not self.path.exists()
        if not self._created and not self.path.is_file():
            raise ResultsFileError(f"--out {path} is not a regular file (a folder, a device "
                                   "or a pipe); the results go to a file of their own")
        if not self._created:
            self._read_existing()
        self._file: IO[str] = self.path.open("a", encoding="utf-8")

    def _refuse(self, number: int, why: str) -> ResultsFileError:
        return ResultsFileError(
            f"--out {self.path} is not a results file of rlm batch: line {number} {why} "
            f"(each line of one is a JSON object with {', '.join(sorted(RESULT_KEYS))}); "
            "nothing was written to it; give --out a new file or a results file")

    def _read_existing(self) -> None:
        """Check the existing file is a results file, then take its ids as done and
        mend its last line (see the class docstring).

        Raises:
            ResultsFileError: it is not a results file.
        """
        data = self.path.read_bytes()
        cut = len(data) if data.endswith(b"\n") else data.rfind(b"\n") + 1
        complete, tail = data[:cut], data[cut:]
        # "\n" only: a JSON string may hold U+2028 and the like, which splitlines() splits
        lines = complete.decode("utf-8", "replace").split("\n")[:-1]
        ids: list[str] = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            task_id = _result_id(line)
            if task_id is None:
                raise self._refuse(number, "is not a result line")
            ids.append(task_id)
        if tail.strip():
            text, number = tail.decode("utf-8", "replace"), len(lines) + 1
            task_id = _result_id(text)
            if task_id is not None:  # a whole line: only its newline is missing
                log.warning("%s: its last line had no newline; added", self.path)
                with self.path.open("ab") as f:
                    f.write(b"\n")
                ids.append(task_id)
            elif _cut_result_line(text, bool(ids)):
                log.warning("%s: its last line was cut short; removed (its task runs again)",
                            self.path)
                with self.path.open("r+b") as f:
                    f.truncate(len(data) - len(tail))
            else:
                raise self._refuse(number, "is not a result line (nor one cut short)")
        self.done.update(ids)

    def write(self, line: dict[str, Any]) -> bool:
        """Append one result line and flush it to disk, every text in it but the id with
        the secrets the process knows redacted (:func:`rlm_kernel.redaction.redact_data`).

        Args:
            line: a :func:`result_line` dict.

        Returns:
            True if written; False if its id is already in the file (never two lines
            for one id).
        """
        task_id = str(line["id"])
        if task_id in self.done:
            log.warning("task %s already has a result line; not written again", task_id)
            return False
        # the file leaves the run: every text redacted but the id, the file's own key
        data = redact_data(json.loads(json.dumps(line, default=str)))
        data["id"] = line["id"]
        text = json.dumps(data, ensure_ascii=False)
        self._file.write(text + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())
        self.done.add(task_id)
        return True

    def close(self) -> None:
        """Close the file; remove it if this object created it and wrote no line."""
        self._file.close()
        if self._created and not self.done:
            self.path.unlink(missing_ok=True)

    def __enter__(self) -> ResultsFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
