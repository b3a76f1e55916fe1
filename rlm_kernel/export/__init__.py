"""A run written for other tools: as a notebook that re-runs (``notebook``) and as
alexzhang13/rlm's trajectory JSONL, which its visualizer opens (``rlm_log``)."""

from __future__ import annotations

from .notebook import CellRLM, cli_setup_cells, export_run, write_atomic
from .rlm_log import export_rlm_log, rlm_log_lines

__all__ = ["CellRLM", "cli_setup_cells", "export_run", "export_rlm_log", "rlm_log_lines",
           "write_atomic"]
