"""One task of ``rlm mcp serve``, in a process of its own: ``python -m
rlm_kernel.cli.mcp_task PROGRESS_FD RESULT_FD`` reads the task as one JSON object on
stdin, runs it, writes a JSON line per finished step of the top run to ``PROGRESS_FD``
and the outcome as one JSON object to ``RESULT_FD``.

The task is a process, not a thread of the server, so that cancelling it is what
stopping ``rlm run`` is: ``SIGINT`` ends the run where it is (the model's request is
closed, and the embedded model's server stops computing; the isolated REPL is closed).
Its stdout and stderr are not read for results: what model code prints cannot pass for
one.

The task (stdin)::

    {"question": str, "context": path | folder | fsspec URL | null,
     "context_text": str | null, "settings": {RLMConfig field: value}}

The outcome (``RESULT_FD``): ``{"summary": RLMResult.summary(), "trajectory":
RLMResult.to_dict()}``, or ``{"error": str, "stopped_by": "error" | "interrupt"}``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from ..engine import RunObserver
from ..engine.frontends import StepFinished
from ..redaction import redact_data

__all__ = ["ProgressLines", "main", "run_task"]


class ProgressLines(RunObserver):
    """Writes one JSON line per finished step of the top run to a file descriptor:
    ``{"step", "max_steps", "seconds", "llm_calls", "prompt_tokens", "completion_tokens",
    "cost_usd"}`` (seconds since the run started; cost in US dollars).

    Args:
        fd: the file descriptor (a pipe's writing end).
        max_steps: the run's ``max_iterations``.
    """

    def __init__(self, fd: int, max_steps: int) -> None:
        self.fd, self.max_steps = fd, max_steps

    def on_step_finished(self, event: StepFinished) -> None:
        """Write the step's line (a child run's steps are not counted)."""
        if event.depth:
            return
        line = {"step": event.step, "max_steps": self.max_steps,
                "seconds": round(event.elapsed, 3), **dict(event.totals or {})}
        try:
            os.write(self.fd, (json.dumps(line) + "\n").encode())
        except OSError:  # the server is gone: the run goes on to its end
            pass


def _context(task: dict[str, Any]) -> Any:
    """The task's context: its text, or what its path, folder or URL holds.

    Raises:
        ContextError / ValueError / OSError: it cannot be read."""
    if task.get("context_text") is not None:
        return str(task["context_text"])
    where = task.get("context")
    if not where:
        return None
    if "://" in str(where):
        from ..batch import load_context

        return load_context(str(where))
    from ..context import load_contexts

    return load_contexts([str(where)])


def run_task(task: dict[str, Any], progress_fd: int) -> dict[str, Any]:
    """Run ``task`` (the module docstring's object); the outcome to write.

    Raises:
        KeyboardInterrupt: the server cancelled the task (``SIGINT``).
    """
    from ..engine import RLM
    from ..models import LLMError

    try:
        settings = dict(task.get("settings") or {})
        rlm = RLM(**settings)
        context = _context(task)
        rlm.observer = ProgressLines(progress_fd, rlm.config.max_iterations)
        result = rlm.run(str(task["question"]), context=context)
    except (LLMError, ValueError, TypeError, OSError) as exc:
        return {"error": str(exc), "stopped_by": "error"}
    except Exception as exc:  # noqa: BLE001 - one readable line for the client
        return {"error": f"{type(exc).__name__}: {exc}", "stopped_by": "error"}
    return {"summary": result.summary(), "trajectory": redact_data(result.to_dict())}


def main(argv: list[str] | None = None) -> int:
    """Entry point (see the module docstring); the exit code: 0 a result was written,
    130 cancelled."""
    args = sys.argv[1:] if argv is None else argv
    progress_fd, result_fd = int(args[0]), int(args[1])
    task = json.loads(sys.stdin.read())
    try:
        outcome = run_task(task, progress_fd)
        code = 0
    except KeyboardInterrupt:
        outcome, code = {"error": "cancelled", "stopped_by": "interrupt"}, 130
    data = json.dumps(outcome, default=str).encode()
    with os.fdopen(result_fd, "wb") as out:
        out.write(data)
    return code


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # threads model code left running must not hold the exit
