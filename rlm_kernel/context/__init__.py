"""The context a run works on: loading files (``files``), splitting text into
documents and searching it (``documents``), and reading its structure: records,
code outlines, tables (``structure``).  Pure Python; used by the engine's REPL
helpers and prompts, the CLI and the kernel."""

from __future__ import annotations

from .files import ContextError, load_contexts, load_folder

__all__ = ["ContextError", "load_contexts", "load_folder"]
