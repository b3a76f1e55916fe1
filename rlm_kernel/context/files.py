"""Load ``--context`` paths: a file becomes its text, a folder a dict of texts.

A folder may be one model code wrote (a working folder, given as the next run's
context): its files are read by this process, outside the wall, so a symbolic link
there is followed only when what it leads to is inside the folder given (the real path
of the file opened, read back from ``/proc/self/fd``, so a link changed between a check
and the read is caught too); any other is skipped, with a warning on the module's
logger that names it.  A file given by its own path is read wherever it leads.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Any

__all__ = ["ContextError", "load_contexts", "load_folder", "is_text_file"]

log = logging.getLogger(__name__)

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
    return _is_text(head)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ContextError(f"cannot read context file {path}: {exc.strerror}") from exc


def _opened_path(fd: int, path: Path) -> str:
    """The real path of the file open as ``fd`` (``/proc/self/fd``; else the real path
    of ``path``)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)


def _is_text(head: bytes) -> bool:
    if b"\0" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:  # a multi-byte char cut at the sniff boundary is fine
        return exc.start >= len(head) - 3
    return True


def _read_inside(path: Path, folder: str) -> str | None:
    """The text of ``path`` when it is a regular text file whose real path is inside
    ``folder`` (real path, resolved), else None (a file that leads out of the folder is
    logged as skipped)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        real = _opened_path(fd, path)
        if real != folder and not real.startswith(folder.rstrip(os.sep) + os.sep):
            log.warning("context: skipped %s: a symbolic link to %s, outside the folder %s "
                        "(a folder's links are followed only inside it)", path, real, folder)
            return None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            head = fh.read(_SNIFF_BYTES)
            if not _is_text(head):
                return None
            data = head + fh.read()
        except OSError as exc:
            raise ContextError(f"cannot read context file {path}: {exc.strerror}") from exc
    return data.decode("utf-8", errors="replace")


def load_folder(folder: Path) -> dict[str, str]:
    """Text files under ``folder`` (recursively, sorted) as ``{relative path: text}``.

    Binary files and VCS/cache folders are skipped, and so is a symbolic link that
    leads out of ``folder`` (logged; links to folders are not followed at all), since a
    folder model code wrote may hold one to ``/etc/shadow`` or a key of yours (see the
    module docstring).

    Raises:
        ContextError: a text file cannot be read.
    """
    out: dict[str, str] = {}
    folder = Path(folder)
    real = os.path.realpath(folder)
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            path = Path(root) / name
            text = _read_inside(path, real)
            if text is not None:
                out[str(path.relative_to(folder))] = text
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
