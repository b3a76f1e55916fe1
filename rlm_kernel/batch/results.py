"""A batch's results file: one JSON line per finished task, written and flushed as each
task finishes, so a killed batch keeps what it finished and a re-run skips those ids.

    {"id": "q1", "answer": "Melville", "answer_value": null, "steps": 3, "llm_calls": 4,
     "prompt_tokens": 5120, "completion_tokens": 310, "cost_usd": 0.0021,
     "seconds": 12.4, "stopped_by": "final", "error": null,
     "worker": "tcp://127.0.0.1:40123", "question": "Who wrote it?"}
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import IO, Any

from ..engine import RLMResult

__all__ = ["ResultsFile", "result_line"]

log = logging.getLogger(__name__)


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
        ``seconds``, ``stopped_by``, ``error``, ``worker``, ``question``.
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


class ResultsFile:
    """The ``--out`` file, opened for appending.

    Args:
        path: the ``.jsonl`` file (created with its folder if missing).

    Attributes:
        done: the ids already in the file (read at opening, grown by :meth:`write`).

    Raises:
        OSError: the file cannot be read or opened for writing.

    A last line cut short by a killed batch is removed at opening (its task runs
    again), so the file stays one JSON object per line.  A file this object created
    and wrote nothing to (the cluster was unreachable, every task was refused) is
    removed at :meth:`close`, so a failed batch leaves no empty results file behind.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.done: set[str] = set()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._created = not self.path.exists()
        if not self._created:
            data = self.path.read_bytes()
            if data and not data.endswith(b"\n"):  # a line cut short by a killed batch
                keep = data.rfind(b"\n") + 1
                log.warning("%s: its last line was cut short; removed (its task runs again)",
                            self.path)
                with self.path.open("r+b") as f:
                    f.truncate(keep)
                data = data[:keep]
            for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    task_id = json.loads(line)["id"]
                except (ValueError, KeyError, TypeError):
                    log.warning("%s, line %d: not a result line, ignored", self.path, number)
                    continue
                self.done.add(str(task_id))
        self._file: IO[str] = self.path.open("a", encoding="utf-8")

    def write(self, line: dict[str, Any]) -> bool:
        """Append one result line and flush it to disk.

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
        text = json.dumps(line, default=str, ensure_ascii=False)
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
