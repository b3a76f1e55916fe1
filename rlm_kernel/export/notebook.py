"""Trajectory export: one RLM run as a valid nbformat v4 notebook.

The notebook holds, in order: a markdown cell with the task and the run's totals,
after a candidates run a markdown cell that sums up the candidates (answers, votes,
steps, the chosen one: its trajectory is the one below; role ``candidates``), the
setup cells that re-create the inputs (e.g. ``context = ...``), a ``%%rlm recorded``
cell with the replies to the steps' ``llm_query`` calls (so the notebook re-runs with
no model; delete it to ask the model again), one code cell per
step (the model's reasoning as leading ``# `` comments, then its code, with its
outputs), and a markdown cell with the answer and how it was reached
(``RLMResult.answer_source`` in words: computed from the data, reached without reading
it, a vote of k of n ...).  Every cell is tagged
``metadata.rlm = {"run_id", "step", "role"}`` and the notebook's ``metadata.rlm``
holds the run's totals (``answer_source`` and ``votes`` among them) and per-call
records.  The kernelspec is ``rlm``, in which
``llm_query``/``FINAL``... exist outside runs, so the notebook re-runs top to bottom.
Its ``language_info`` is the whole record the kernel reports (:func:`language_info`):
JupyterLab writes the kernel's record into a notebook it opens, and a partial one
there would mark a freshly exported notebook modified.

An exported notebook leaves the process: every text in it (cells, outputs, metadata)
has the secrets the process knows redacted (:func:`rlm_kernel.redaction.redact_data`),
whichever part of the run it came from (the kernel's own step outputs included).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nbformat
from nbformat import v4

from ..engine.frontends import output_digest, run_ending, step_exchanges, step_source
from ..models import model_label
from ..redaction import redact_data
from ..text import middle_cut
from .cells import CellRLM
from .folds import child_markdown
from .folds import fenced as _fenced

if TYPE_CHECKING:
    from ..engine import RLMResult

__all__ = ["CellRLM", "export_run", "cli_setup_cells", "language_info"]



NOTEBOOK_SUFFIX = ".ipynb"


def language_info() -> dict[str, Any]:
    """The ``language_info`` an IPython kernel on this interpreter reports in its
    ``kernel_info_reply`` (ipykernel's ``IPythonKernel.language_info``; the RLM kernel
    is one): name, version, mimetype, file extension, lexer, CodeMirror mode and
    nbconvert exporter."""
    return {
        "codemirror_mode": {"name": "ipython", "version": sys.version_info[0]},
        "file_extension": ".py",
        "mimetype": "text/x-python",
        "name": "python",
        "nbconvert_exporter": "python",
        "pygments_lexer": "ipython3",
        "version": sys.version.split()[0],
    }


def export_run(result: RLMResult, path: str | os.PathLike[str] | None = None, *,
               run_id: str | None = None, setup_cells: Sequence[str] = (),
               step_outputs: Sequence[Sequence[dict[str, Any]] | None] | None = None,
               execution_counts: Sequence[int | None] | None = None,
               kernel_name: str = "rlm",
               display_name: str = "RLM (Python)") -> nbformat.NotebookNode:
    """Build (and optionally write) the notebook of one run.

    Args:
        result: an :class:`rlm_kernel.engine.result.RLMResult`.
        path: where to write the notebook; must end with ``.ipynb``.  Parent
            folders are created.  None: build only.
        run_id: the id put in every cell's ``metadata.rlm``; default a new UUID (hex).
        setup_cells: Python sources that re-create the run's inputs, emitted
            unexecuted before the steps (role ``"setup"``).
        step_outputs: per step (list index 0 = step 1), the nbformat output dicts
            the kernel produced; a missing or None item falls back to one stdout
            stream made from ``entry.output`` (no output when that is empty).
        execution_counts: per step (index 0 = step 1), the kernel's execution
            count; a missing or None item leaves ``execution_count`` None.
        kernel_name: the kernelspec name written into the notebook's metadata.
        display_name: the kernelspec's display name.

    Returns:
        The validated :class:`nbformat.NotebookNode` (format 4), every text in it
        redacted (see the module docstring).  Step cells carry ``metadata.rlm.step``
        numbered from 1, as the engine numbers steps.

    Raises:
        ValueError: ``path`` does not end with ``.ipynb``.
        OSError: the file or its parent folders cannot be written.
        nbformat.ValidationError: a given output dict is not valid nbformat.
    """
    target = _check_path(path) if path is not None else None
    run_id = run_id or uuid.uuid4().hex
    entries = list(result.history)
    cells = [_tag(v4.new_markdown_cell(_task_markdown(result)), run_id, "task")]
    if getattr(result, "candidates", None):
        cells.append(_tag(v4.new_markdown_cell(_candidates_markdown(result.candidates)),
                          run_id, "candidates"))
    cells += [_tag(v4.new_code_cell(src), run_id, "setup") for src in setup_cells]
    cells += _recorded_cells(result, run_id)
    steps = _step_cells(entries, run_id, step_outputs, execution_counts)
    answer = _tag(v4.new_markdown_cell(_answer_markdown(result)), run_id, "answer")
    _attach_record([*steps, answer], entries, list(getattr(result, "exchanges", [])))
    children = list(getattr(result, "children", None) or ())
    for number, cell in enumerate(steps, start=1):
        cells.append(cell)
        cells += [_tag(v4.new_markdown_cell(child_markdown(child, children)), run_id,
                       "children", number)
                  for child in children if not child.parent and child.parent_step == number]
    cells.append(answer)

    nb = v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": kernel_name, "display_name": display_name,
                                 "language": "python"}
    nb.metadata["language_info"] = language_info()
    nb.metadata["rlm"] = _run_metadata(result, run_id, entries)
    nb = nbformat.from_dict(redact_data(json.loads(json.dumps(nb))))  # as plain data
    nbformat.validate(nb)
    if target is not None:
        write_atomic(target, nbformat.writes(nb) + "\n")
    return nb


def _file_mode(path: Path) -> int:
    """The mode the file would get from a plain ``open``: the existing file's, or
    0o666 less the umask (``mkstemp`` makes 0o600)."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a
    rename, so a failure never leaves a partial file.  Lone surrogates (model output
    may hold ``'\\ud800'``) are written as JSON's ``\\ud800`` escape, which reads back
    as the same string.

    Raises:
        OSError: the folder cannot be created or written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8", errors="backslashreplace")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, _file_mode(path))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def cli_setup_cells(paths: Sequence[str]) -> list[str]:
    """The setup cell that re-creates ``context`` for ``rlm run --context PATH ...``.

    Args:
        paths: the ``--context`` paths as given (``~`` is expanded).

    Returns:
        ``[]`` when there are no paths, else one source string that imports
        :func:`rlm_kernel.context.files.load_contexts` and binds ``context``.
        One path is written absolute.  Several paths are kept as typed, since
        they are the keys of ``context`` the model's code used; when any is
        relative the cell first changes to the directory the run started in.
    """
    if not paths:
        return []
    if len(paths) == 1:
        listed = repr(os.path.abspath(os.path.expanduser(paths[0])))
        return ["from rlm_kernel.context import load_contexts\n\n"
                f"context = load_contexts([{listed}])"]
    listed = ", ".join(repr(p) for p in paths)
    chdir = ""
    if any(not os.path.isabs(os.path.expanduser(p)) for p in paths):
        chdir = f"import os\n\nos.chdir({os.getcwd()!r})  # the --context paths are relative\n"
    return [f"{chdir}from rlm_kernel.context import load_contexts\n\n"
            f"context = load_contexts([{listed}])"]


# -- helpers ------------------------------------------------------------------------------
def _check_path(path: str | os.PathLike[str]) -> Path:
    target = Path(path).expanduser()
    if target.suffix != NOTEBOOK_SUFFIX:
        raise ValueError(f"export path must end with {NOTEBOOK_SUFFIX}: {os.fspath(path)!r}")
    return target


def _tag(cell: Any, run_id: str, role: str, step: int | None = None) -> Any:
    """Put ``metadata.rlm = {"run_id", "step", "role"}`` on ``cell``; returns it."""
    cell.metadata["rlm"] = CellRLM(run_id=run_id, step=step, role=role)
    return cell


def _step_cells(entries: list[Any], run_id: str,
                step_outputs: Sequence[Sequence[dict[str, Any]] | None] | None,
                execution_counts: Sequence[int | None] | None) -> list[Any]:
    """One code cell per history entry (see :func:`export_run` for the fallbacks)."""
    cells = []
    for i, entry in enumerate(entries):
        cell = v4.new_code_cell(step_source(entry.reasoning, entry.code),
                                execution_count=_item(execution_counts, i))
        outputs = _item(step_outputs, i)
        if outputs is not None:
            cell.outputs = [nbformat.from_dict(dict(o)) for o in outputs]
        elif entry.output:
            cell.outputs = [v4.new_output("stream", name="stdout", text=entry.output)]
        cells.append(_tag(cell, run_id, "step", i + 1))
    return cells


def _recorded_cells(result: RLMResult, run_id: str) -> list[Any]:
    """The ``%%rlm recorded`` cell (role ``recorded``): the sub-calls and child runs the
    steps' code made, so that re-running the notebook answers them without a model; an
    empty list when the steps asked no model (the cell still marks a re-run of a record:
    its ``FINAL`` keeps the answer without showing it, as the live step showed none)."""
    calls = step_exchanges(list(getattr(result, "exchanges", [])))
    body = ",\n".join(json.dumps(c, ensure_ascii=False) for c in calls)
    source = ("%%rlm recorded\n"
              f"[{body}]")
    cell = v4.new_code_cell(source)
    cell.metadata["jupyter"] = {"source_hidden": True}
    return [_tag(cell, run_id, "recorded")]


def _attach_record(cells: list[Any], entries: list[Any],
                   exchanges: list[dict[str, Any]]) -> None:
    """Put the replay record on the step cells and the answer cell (``cells``: the
    step cells then the answer cell): each exchange goes to the cell of its step, or
    of the next step that has one; the rest to the answer cell."""
    buckets: list[list[dict[str, Any]]] = [[] for _ in cells]
    for exchange in exchanges:
        index = min(max(int(exchange.get("step") or 1), 1), len(cells)) - 1
        buckets[index].append(exchange)
    for cell, bucket in zip(cells, buckets, strict=True):
        cell.metadata["rlm"]["exchanges"] = bucket
    for cell, entry in zip(cells, entries, strict=False):
        cell.metadata["rlm"]["output_sha256"] = output_digest(entry.output)


def _item(values: Sequence[Any] | None, i: int) -> Any:
    return values[i] if values is not None and i < len(values) else None


def _cell_text(value: Any) -> str:
    """A value fit for one markdown table cell: one line, pipes escaped."""
    return " ".join(str(value).split()).replace("|", "\\|")


def _task_markdown(result: RLMResult) -> str:
    quoted = "\n".join(f"> {line}".rstrip() for line in result.question.splitlines()) or ">"
    rows = [
        ("Model", f"`{_cell_text(model_label(result.model or None))}`"),
        ("Sub model", f"`{_cell_text(model_label(result.sub_model or result.model or None))}`"),
        ("Stopped by", f"`{result.stopped_by}`"),
        ("Steps", f"{result.steps}"),
        ("LLM calls", f"{result.llm_calls}"),
        ("Prompt tokens", f"{result.prompt_tokens:,}"),
        ("Completion tokens", f"{result.completion_tokens:,}"),
        ("Cost (USD)", f"${result.cost_usd:.4f}"),
        ("Seconds", f"{result.seconds:.2f}"),
    ]
    if getattr(result, "answer_type", None):
        rows.insert(2, ("Answer type", f"`{_cell_text(result.answer_type)}`"))
    earlier = len(getattr(result, "conversation", None) or ())
    if earlier:
        rows.insert(2, ("Earlier tasks told", f"{earlier}"))
    table = "\n".join(f"| {k} | {v} |" for k, v in rows)
    return f"## RLM run\n\n**Task:**\n\n{quoted}\n\n| | |\n|:--|--:|\n{table}"


def _candidates_markdown(candidates: list[dict[str, Any]]) -> str:
    """The summary of a candidates run: one table row per candidate that ran."""
    chosen = next((c for c in candidates if c.get("chosen")), candidates[0])
    rows = []
    for c in candidates:
        answer = "*no answer*" if c.get("answer") is None \
            else middle_cut(_cell_text(c["answer"]), 80, "the whole is in result.candidates")
        mark = "**chosen**" if c.get("chosen") else ""
        rows.append(f"| {c.get('index')} | {answer} | {c.get('votes', 0)} | "
                    f"{c.get('steps', 0)} | {c.get('failed_steps', 0)} | "
                    f"`{c.get('stopped_by')}` | {c.get('tokens', 0):,} | "
                    f"{float(c.get('seconds') or 0):.1f} | {mark} |")
    head = ("| Candidate | Answer | Votes | Steps | Failed steps | Stopped by | Tokens | "
            "Seconds | |\n|--:|:--|--:|--:|--:|:--|--:|--:|:--|")
    n, votes = len(candidates), int(chosen.get("votes") or 0)
    why = (f"the answer most of them agree on won (candidate {chosen.get('index')}, "
           f"{votes} vote{'s' * (votes != 1)})" if votes else
           f"none answered (candidate {chosen.get('index')} kept: the fewest failed steps)")
    return (f"### Candidates\n\n{n} candidate{'s' * (n != 1)} ran; {why}. The steps "
            "below are the chosen candidate's.\n\n" + head + "\n" + "\n".join(rows))


def _answer_markdown(result: RLMResult) -> str:
    """The answer cell: the answer, then how the run ended in the one table's words
    (:func:`~rlm_kernel.engine.answer.sources.run_ending`, the task cell's and the
    command line's words), and an error's details."""
    end = run_ending(result.answer is not None, result.stopped_by,
                     getattr(result, "answer_source", None), getattr(result, "votes", None),
                     no_data=not result.variables)
    if result.answer is None:
        text = f"**{end.words}** (stopped by `{result.stopped_by}`)"
        return text + (f":\n\n{_fenced(result.error)}" if result.error else "")
    answer = str(result.answer)
    diff = getattr(result, "diff", None)
    if getattr(result, "answer_source", None) == "finish" and diff:
        message = answer[:answer.rfind(diff)].strip() if diff in answer else ""
        text = (f"**Answer:** {message}\n\n" if message else "**Answer:**\n\n") \
            + _fenced(diff.rstrip("\n"), "diff")
    else:
        text = (f"**Answer:** {answer.strip()}" if "\n" not in answer.strip()
                else f"**Answer:**\n\n{_fenced(answer.strip())}")
    return f"{text}\n\n*{end.words}*"


def _run_metadata(result: RLMResult, run_id: str, entries: list[Any]) -> dict[str, Any]:
    """The notebook's ``metadata.rlm``: JSON-safe totals, timings and call records."""
    return {
        "run_id": run_id,
        "question": str(result.question),
        "model": result.model,
        "sub_model": result.sub_model,
        "stopped_by": result.stopped_by,
        "answer": None if result.answer is None else str(result.answer),
        "answer_source": getattr(result, "answer_source", None),
        "votes": list(result.votes) if result.votes else None,
        "error": result.error,
        "steps": result.steps,
        "llm_calls": result.llm_calls,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "cost_usd": result.cost_usd,
        "seconds": result.seconds,
        "step_seconds": [e.execution_time for e in entries],
        "calls": [c.to_dict() for c in result.calls],
        **({"candidates": [dict(c) for c in result.candidates]}
           if getattr(result, "candidates", None) else {}),
        **({"answer_type": result.answer_type}
           if getattr(result, "answer_type", None) else {}),
        **({"conversation": list(result.conversation)}
           if getattr(result, "conversation", None) else {}),
    }
