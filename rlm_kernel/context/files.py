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
        ContextError: a path does not exist, cannot be read, is neither a regular
            file nor a folder (a FIFO), or is a folder without text files.
    """
    loaded: list[tuple[str, Any]] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.exists():
            raise ContextError(f"context path not found: {raw}")
        if path.is_dir():
            files = load_folder(path)
            if not files:
                raise ContextError(f"no text files under {raw} (binary files and hidden or "
                                   "cache folders are skipped)")
            loaded.append((raw, files))
        elif path.is_file():
            loaded.append((raw, _read(path)))
        else:  # a FIFO or a device would block for ever
            raise ContextError(f"context path is not a regular file or folder: {raw}")
    if len(loaded) == 1:
        return loaded[0][1]
    merged: dict[str, str] = {}
    for raw, value in loaded:
        if isinstance(value, dict):
            for rel, text in value.items():
                merged[str(Path(raw) / rel)] = text
        else:
            merged[raw] = value
    return merged
