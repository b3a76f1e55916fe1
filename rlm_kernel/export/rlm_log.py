"""A run as alexzhang13/rlm's trajectory log (JSON lines), which its visualizer opens.

The format is the one of that project's ``rlm/logger/rlm_logger.py`` and its
visualizer's ``src/lib/types.ts``: a first line ``{"type": "metadata", ...}``
(``RLMConfigMetadata``: ``root_model``, ``max_depth``, ``max_iterations``, ``backend``,
``backend_kwargs``, ``environment_type``, ``environment_kwargs``, ``other_backends``;
and ``candidates``, ``RLMResult.candidates``, after a candidates run, whose iterations
are the chosen candidate's), then one ``{"type": "iteration", ...}`` line
per root-model call (``RLMIteration``:
``iteration`` from 1, ``timestamp``, ``prompt`` (the chat messages sent), ``response``,
``code_blocks`` = ``[{code, result: {stdout, stderr, locals, execution_time,
rlm_calls}}]``, ``final_answer``, ``iteration_time``).  ``rlm_calls`` are the step's
sub-calls (``RLMChatCompletion``: ``prompt``, ``response``, ``prompt_tokens``,
``completion_tokens``, ``execution_time``).

A root call whose reply ran no code (a reply without a code block, or the first of a
resampled pair) is an iteration with no code blocks.  ``stderr`` holds the output
from a traceback on; ``locals`` is empty (the values live in the kernel).
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine.frontends import TRACEBACK_LINE
from ..redaction import redact_data
from .notebook import write_atomic

if TYPE_CHECKING:
    from ..engine import RLMResult

__all__ = ["export_rlm_log", "rlm_log_lines"]



def rlm_log_lines(result: RLMResult, *, max_iterations: int | None = None,
                  max_depth: int | None = None) -> list[dict[str, Any]]:
    """The log's lines (dicts, in file order) of one run, every text in them with the
    secrets the process knows redacted (:func:`rlm_kernel.redaction.redact_data`).

    Args:
        result: an :class:`~rlm_kernel.engine.result.RLMResult` of this session (its
            ``root_prompts`` hold the messages of each root call).
        max_iterations: the run's step limit, for the metadata line.
        max_depth: the run's recursion limit, for the metadata line.
    """
    meta: dict[str, Any] = {
            "type": "metadata", "timestamp": _now(), "root_model": result.model or None,
            "max_depth": max_depth, "max_iterations": max_iterations,
            "backend": "litellm", "backend_kwargs": {"model_name": result.model},
            "environment_type": "rlm-kernel", "environment_kwargs": {},
            "other_backends": [result.sub_model] if result.sub_model and
            result.sub_model != result.model else None}
    if getattr(result, "candidates", None):  # the iterations below are the chosen one's
        meta["candidates"] = [dict(c) for c in result.candidates]
    lines: list[dict[str, Any]] = [meta]
    roots = [(i, e) for i, e in enumerate(result.exchanges)
             if e.get("role") in ("root", "final") and not e.get("depth")]
    prompts = list(getattr(result, "root_prompts", []))
    entries = list(result.history)
    children = list(getattr(result, "children", None) or ())
    for n, (_, exchange) in enumerate(roots):
        step = int(exchange.get("step") or 0)
        last_of_step = n + 1 == len(roots) or roots[n + 1][1].get("step") != step
        entry = entries[step - 1] if last_of_step and 0 < step <= len(entries) else None
        lines.append({
            "type": "iteration", "iteration": n + 1,
            "timestamp": entry.timestamp if entry is not None else _now(),
            "prompt": prompts[n] if n < len(prompts) else [],
            "response": exchange.get("response", ""),
            "code_blocks": [_code_block(entry, step, "", children)]
            if entry is not None and entry.code else [],
            "final_answer": None,
            "iteration_time": entry.execution_time if entry is not None else None,
        })
    if len(lines) > 1 and result.answer is not None:
        lines[-1]["final_answer"] = str(result.answer)
    # as JSON data first (what the file will hold), then redacted
    return redact_data(json.loads(json.dumps(lines, default=str)))


def _code_block(entry: Any, step: int, run: str, children: list[Any]) -> dict[str, Any]:
    """Step ``step``'s code block of the run ``run`` (a child's id, ``""``: the top
    level); its ``rlm_calls`` are its sub-calls, then the sub-agent runs its code started
    (of ``children``, the result's flat list), each with its own steps and sub-agents
    under ``child`` (:func:`_child_call`)."""
    at = entry.output.find(TRACEBACK_LINE)
    stdout, stderr = (entry.output, "") if at < 0 else (entry.output[:at], entry.output[at:])
    calls = [{"prompt": c.get("prompt", ""), "response": c.get("response", ""),
              "prompt_tokens": int(c.get("prompt_tokens", 0) or 0),
              "completion_tokens": int(c.get("completion_tokens", 0) or 0),
              "execution_time": float(c.get("seconds", 0.0) or 0.0)}
             for c in entry.llm_calls]
    calls += [_child_call(child, children) for child in children
              if child.parent == run and child.parent_step == step]
    return {"code": entry.code, "result": {"stdout": stdout, "stderr": stderr, "locals": {},
                                           "execution_time": entry.execution_time,
                                           "rlm_calls": calls}}


def _child_call(child: Any, children: list[Any]) -> dict[str, Any]:
    """A sub-agent's run as one of its parent step's ``rlm_calls``
    (``RLMChatCompletion``'s keys: its question as ``prompt``, its answer as
    ``response``; tokens are counted on the run's calls, not here: 0), with ``child``:
    its id, depth, parent step, conversation (``messages``), stop reason and steps (each
    a code block)."""
    return {"prompt": child.question, "response": "" if child.answer is None
            else str(child.answer), "prompt_tokens": 0, "completion_tokens": 0,
            "execution_time": float(child.seconds),
            "child": {"id": child.id, "parent": child.parent, "depth": child.depth,
                      "parent_step": child.parent_step, "stopped_by": child.stopped_by,
                      "messages": [dict(m) for m in child.messages],
                      "code_blocks": [_code_block(e, n, child.id, children)
                                      for n, e in enumerate(child.history, start=1)
                                      if e.code]}}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def export_rlm_log(result: RLMResult, path: str | os.PathLike[str], **limits: Any) -> Path:
    """Write :func:`rlm_log_lines` to ``path`` (one JSON object a line, atomically).

    Raises:
        ValueError: ``path`` does not end with ``.jsonl``.
        OSError: the file cannot be written.
    """
    target = Path(path).expanduser()
    if target.suffix != ".jsonl":
        raise ValueError(f"an rlm log path must end with .jsonl: {os.fspath(path)!r}")
    text = "".join(json.dumps(line, default=str) + "\n"
                   for line in rlm_log_lines(result, **limits))
    write_atomic(target, text)
    return target
