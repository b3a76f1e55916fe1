"""A run written for other tools: as a notebook that re-runs (``notebook``) and as
alexzhang13/rlm's trajectory JSONL, which its visualizer opens (``rlm_log``).

Importing the package is cheap: nbformat loads with the first export (the kernel
imports :class:`CellRLM` at start)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .cells import CellRLM

__all__ = ["CellRLM", "child_markdown", "cli_setup_cells", "export_run", "export_rlm_log",
           "rlm_log_lines", "write_atomic"]

if TYPE_CHECKING:  # pragma: no cover
    from .folds import child_markdown
    from .notebook import cli_setup_cells, export_run, write_atomic
    from .rlm_log import export_rlm_log, rlm_log_lines

_LAZY = {"cli_setup_cells": "notebook", "export_run": "notebook", "write_atomic": "notebook",
         "export_rlm_log": "rlm_log", "rlm_log_lines": "rlm_log", "child_markdown": "folds"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
