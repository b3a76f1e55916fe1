"""A task's context named by where it lives (a path or an fsspec URL), read where the
task runs: on the worker, so the client never holds the data.

Imports no fsspec until a URL is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..context import ContextError, load_contexts
from .cluster import CLUSTER_EXTRA, ClusterMissing

__all__ = ["ContextRef", "load_context"]


@dataclass(frozen=True)
class ContextRef:
    """A task's context named by where it lives, read by :meth:`load` where the task
    runs (on the worker, so the client never holds the data).

    Attributes:
        location: a file (its text), a folder (a dict ``{relative path: text}`` of its
            text files), or an fsspec URL of either: ``file://``, ``s3://``, ``gs://``
            ... (``s3fs``, ``gcsfs`` installed on the workers for those).
    """

    location: str

    def load(self) -> Any:
        """The context's value (see :func:`load_context`)."""
        return load_context(self.location)


def load_context(location: str) -> Any:
    """Read a context from a path or an fsspec URL.

    Args:
        location: a local file or folder path (``~`` expanded), or a URL with a scheme
            (``file://``, ``s3://``, ``gs://``, ``memory://`` ...).

    Returns:
        A file's text (UTF-8, undecodable bytes replaced), or for a folder a dict
        ``{path relative to the folder: text}`` of its files that decode as UTF-8.

    Raises:
        ContextError: the location does not exist or cannot be read, a folder holds no
            text file, or its URL scheme has no fsspec filesystem installed.
        ClusterMissing: a URL was given and fsspec is not installed.
    """
    if "://" not in location:
        return load_contexts([location])
    try:
        import fsspec
    except ImportError:
        raise ClusterMissing(f"a context URL ({location}) needs fsspec: {CLUSTER_EXTRA}") \
            from None
    try:
        fs, path = fsspec.core.url_to_fs(location)
        if not fs.exists(path):
            raise ContextError(f"context not found: {location}")
        if not fs.isdir(path):
            return fs.cat_file(path).decode("utf-8", errors="replace")
        return _text_files(fs, path, location)
    except ContextError:
        raise
    except (ImportError, ValueError) as exc:  # no filesystem for the scheme
        raise ContextError(f"cannot read {location}: {exc}") from None
    except OSError as exc:
        raise ContextError(f"cannot read {location}: {exc.strerror or exc}") from None


def _text_files(fs: Any, path: str, location: str) -> dict[str, str]:
    """The UTF-8 text files under the folder ``path`` of the fsspec filesystem ``fs``,
    by path relative to it, hidden ones (a part starting with ``.``) left out.

    Raises:
        ContextError: no text file there."""
    files: dict[str, str] = {}
    root = path.rstrip("/")
    for name in sorted(fs.find(path)):
        rel = name[len(root):].lstrip("/") if name.startswith(root) else name
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        try:
            files[rel] = fs.cat_file(name).decode("utf-8")
        except UnicodeDecodeError:
            continue  # a binary file
    if not files:
        raise ContextError(f"no text files under {location}")
    return files
