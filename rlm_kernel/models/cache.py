"""litellm's own cache for sub-calls (``c.RLM.cache``): ``"memory"`` (per process, the
default), ``"disk"`` (kept across sessions, under the user cache folder) or None (off).

The cache is opt-in per call (``CacheMode.default_off``): only sub-calls of a client
made with ``cache=True`` ask it, so the root model's turns are always sent.  A request
is the same when its model, messages and parameters are (litellm's cache key).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .litellm_client import import_litellm

__all__ = ["CACHE_KINDS", "cache_folder", "configure_cache"]

CACHE_KINDS = ("memory", "disk")
_current: dict[str, Any] = {"kind": None}


def cache_folder() -> Path:
    """Where the disk cache lives: ``$RLM_CACHE_DIR/litellm-cache`` or the user cache
    folder's ``rlm-kernel/litellm-cache``."""
    import platformdirs

    base = os.environ.get("RLM_CACHE_DIR") or platformdirs.user_cache_dir("rlm-kernel")
    return Path(base) / "litellm-cache"


def configure_cache(kind: str | None, directory: str | os.PathLike[str] | None = None) -> None:
    """Set litellm's cache to ``kind`` (``"memory"``, ``"disk"``, None or ``"off"``);
    nothing changes when it is already that kind.

    Raises:
        ValueError: an unknown kind.
    """
    kind = None if kind in (None, "", "off", "none") else kind
    if kind is not None and kind not in CACHE_KINDS:
        raise ValueError(f"cache must be one of {', '.join(CACHE_KINDS)} or None, got {kind!r}")
    key = (kind, str(directory) if directory else None)
    if _current["kind"] == key:
        return
    litellm = import_litellm()
    from litellm.caching.caching import Cache, CacheMode

    if kind is None:
        litellm.cache = None
    elif kind == "memory":
        litellm.cache = Cache(type="local", mode=CacheMode.default_off)
    else:
        folder = Path(directory) if directory else cache_folder()
        folder.mkdir(parents=True, exist_ok=True)
        litellm.cache = Cache(type="disk", disk_cache_dir=str(folder), mode=CacheMode.default_off)
    _current["kind"] = key
