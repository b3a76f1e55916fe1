"""Load ``--context`` paths: a file becomes its text, a folder a dict of texts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["ContextError", "load_contexts", "load_folder", "is_text_file"]

_SNIFF_BYTES = 8192  # bytes read to decide whether a file is text
_SKIP_DIRS = {"__pycache__", ".git", ".hg", ".svn", "node_modules", ".venv", ".tox"}


class ContextError(ValueError):
    """A context path is missing or unreadable; the message names it."""


def is_text_file(path: Path) -> bool:
    """True if the first 8 KiB of ``path`` hold no NUL byte and decode as UTF-8."""
    try:
        with path.open("rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError:
        return False
    if b"\0" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:  # a multi-byte char cut at the sniff boundary is fine
        return exc.start >= len(head) - 3
    return True


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ContextError(f"cannot read context file {path}: {exc.strerror}") from exc


def load_folder(folder: Path) -> dict[str, str]:
    """Text files under ``folder`` (recursively, sorted) as ``{relative path: text}``.

    Binary files and VCS/cache folders are skipped.
    """
    out: dict[str, str] = {}
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            path = Path(root) / name
            if path.is_file() and is_text_file(path):
                out[str(path.relative_to(folder))] = _read(path)
    return out


def load_contexts(paths: list[str]) -> Any:
    """The value bound to ``context`` for the given ``--context`` paths.

    One file gives its text (str); one folder gives :func:`load_folder`'s dict;
    several paths give one dict keyed by path (folders contribute their files
    as ``folder/relative``).

    Raises:
        ContextError: a path does not exist or cannot be read.
    """
    resolved = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.exists():
            raise ContextError(f"context path not found: {raw}")
        resolved.append((raw, path))
    if len(resolved) == 1:
        raw, path = resolved[0]
        return load_folder(path) if path.is_dir() else _read(path)
    merged: dict[str, str] = {}
    for raw, path in resolved:
        if path.is_dir():
            for rel, text in load_folder(path).items():
                merged[str(Path(raw) / rel)] = text
        else:
            merged[raw] = _read(path)
    return merged
