"""A cell's ``metadata.rlm``: one definition for exported notebooks and live step cells
(light: no nbformat, so the kernel's start does not pay for it)."""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = ["CellRLM"]


class _CellRLMKeys(TypedDict):
    run_id: str
    step: int | None
    role: str


class CellRLM(_CellRLMKeys, total=False):
    """A cell's ``metadata.rlm``, in exported notebooks and on live step cells.

    ``role`` is ``task``, ``setup``, ``recorded``, ``step``, ``children``, ``candidates``
    or ``answer``; ``step`` is the step number (from 1) on step cells and on a
    ``children`` cell (an exported sub-agent's run, folded Markdown, right after the
    step whose code started it), else None;
    ``task_cell`` (live cells only, see ``docs/protocol.md``) is the id of the task
    cell that ran the run.  A candidates run (``RLMConfig.candidates`` > 1): live step
    cells carry ``candidate`` (which candidate made them, from 1; step numbers restart
    with each candidate), and its summary cell (role ``candidates``) ``chosen`` (the
    candidate whose steps are the run's record) and ``candidates`` (the summaries of
    ``RLMResult.candidates``); an exported notebook holds the chosen candidate's steps
    only.  The record a
    replay reads: ``exchanges`` (step and answer cells: the model exchanges made
    during that step, the reply that produced the cell's code among them; see
    :mod:`rlm_kernel.engine.replay.recording` for their form and size caps) and
    ``output_sha256`` (step cells: the digest of the step's text output).
    ``answer_now`` (true only): the step cell holds the "answer now" call the run made
    after it stopped early (the step limit, a stuck run), not a further step: it is
    labelled so (``answer now · run 3f2a``), not ``step 6``.
    """

    task_cell: str | None
    exchanges: list[dict[str, Any]]
    output_sha256: str
    candidate: int
    chosen: int | None
    candidates: list[dict[str, Any]]
    answer_now: bool
