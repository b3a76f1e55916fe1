"""The ``rlm`` command: ``rlm run`` (``run``) and ``rlm model`` (``model``)."""

from __future__ import annotations

from .run import build_parser, main

__all__ = ["main", "build_parser"]
