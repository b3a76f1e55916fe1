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

    ``role`` is ``task``, ``setup``, ``step`` or ``answer``; ``step`` is the step
    number (from 1) on step cells, else None; ``task_cell`` (live cells only, see
    ``docs/protocol.md``) is the id of the task cell that ran the run.  The record a
    replay reads: ``exchanges`` (step and answer cells: the model exchanges made
    during that step, the reply that produced the cell's code among them; see
    :mod:`rlm_kernel.engine.recording` for their form and size caps) and
    ``output_sha256`` (step cells: the digest of the step's text output).
    """

    task_cell: str | None
    exchanges: list[dict[str, Any]]
    output_sha256: str
