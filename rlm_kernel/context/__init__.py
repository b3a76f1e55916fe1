"""The context a run works on: loading files (``files``), splitting text into
documents and searching it (``documents``), and reading its structure: records,
code outlines, tables (``structure``).  Pure Python; used by the engine's REPL
helpers and prompts, the CLI and the kernel."""

from __future__ import annotations

from .documents import describe_structure
from .files import ContextError, load_contexts, load_folder
from .helpers import DataHelper, current_namespace, data_helpers
from .structure import detect_views, sample_fields

__all__ = ["ContextError", "load_contexts", "load_folder",
           "describe_structure", "DataHelper", "current_namespace", "data_helpers", "detect_views",
           "sample_fields"]
