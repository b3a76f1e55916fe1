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

__all__ = ["CACHE_KINDS", "cache_folder", "configure_cache", "disk_cache"]

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
    from litellm.types.caching import LiteLLMCacheType

    if kind is None:
        litellm.cache = None
    elif kind == "memory":
        litellm.cache = Cache(type=LiteLLMCacheType.LOCAL, mode=CacheMode.default_off)
    else:
        folder = Path(directory) if directory else cache_folder()
        folder.mkdir(parents=True, exist_ok=True)
        cache = Cache(type=LiteLLMCacheType.LOCAL, mode=CacheMode.default_off)
        cache.cache = disk_cache(folder)
        litellm.cache = cache
    _current["kind"] = key


def disk_cache(folder: Path) -> Any:
    """A litellm cache backend (``litellm.caching.base_cache.BaseCache``) kept in
    ``folder`` by ``diskcache`` (SQLite; safe across threads and processes).

    litellm 1.109 and later have no "disk" backend of their own (``Cache(type="disk")``
    raises); this is the thin adapter theirs was: values stored as given (diskcache
    pickles them), a ``ttl`` keyword in seconds is the entry's expiry.
    """
    import diskcache
    from litellm.caching.base_cache import BaseCache

    class DiskCache(BaseCache):
        def __init__(self) -> None:
            super().__init__()
            self.store = diskcache.Cache(str(folder))

        def set_cache(self, key: str, value: Any, **kwargs: Any) -> None:
            self.store.set(key, value, expire=kwargs.get("ttl"))

        async def async_set_cache(self, key: str, value: Any, **kwargs: Any) -> None:
            self.set_cache(key, value, **kwargs)

        async def async_set_cache_pipeline(self, cache_list: list[tuple[str, Any]],
                                           **kwargs: Any) -> None:
            for key, value in cache_list:
                self.set_cache(key, value, **kwargs)

        def get_cache(self, key: str, **kwargs: Any) -> Any:
            return self.store.get(key)

        async def async_get_cache(self, key: str, **kwargs: Any) -> Any:
            return self.get_cache(key)

        def batch_get_cache(self, keys: list[str], **kwargs: Any) -> list[Any]:
            return [self.get_cache(key) for key in keys]

        async def async_batch_get_cache(self, keys: list[str], **kwargs: Any) -> list[Any]:
            return self.batch_get_cache(keys)

        async def batch_cache_write(self, key: str, value: Any, **kwargs: Any) -> None:
            self.set_cache(key, value, **kwargs)

        def delete_cache(self, key: str) -> None:
            self.store.pop(key, None)

        def flush_cache(self) -> None:
            self.store.clear()

        async def disconnect(self) -> None:
            self.store.close()

    return DiskCache()
