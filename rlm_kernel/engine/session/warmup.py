"""Warm start: do before the first task what its first step would otherwise wait for.

A fresh kernel's first task used to wait for three things in a row: importing litellm
(about 3 s), starting the embedded model's server (about 3 s) and the server reading
the system prompt, the same ~900 tokens at the head of every root-model prompt (about
16 s at ~55 prompt tokens/s on 2 cores).  :func:`prewarm` starts all three in a
daemon thread when a session begins (the RLM kernel, ``%load_ext rlm_kernel``,
``rlm model serve``).  llama-cpp-python's server keeps the tokens of its last request
and reuses their longest common prefix with the next one, so the first real request
finds the system prompt already evaluated; a request that arrives while the warm-up
runs waits for it (the server answers one request at a time) and then reuses it.

Imports nothing from Jupyter.
"""

from __future__ import annotations

import logging
import threading
import time

from ...executors import host_thread
from ...models import import_litellm, is_embedded, make_client
from ..prompts import SYSTEM_PROMPT

__all__ = ["prewarm", "warm_messages"]

log = logging.getLogger(__name__)


def warm_messages() -> list[dict[str, str]]:
    """The chat messages of the warm-up request: the system prompt and an empty user
    turn, whose chat-template head every root-model prompt shares."""
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": ""}]


def _warm(model: str | None) -> None:
    start = time.perf_counter()
    try:
        import_litellm()
        if not is_embedded(model):  # a provider's model: no request, it would cost money
            log.debug("warm start: litellm imported in %.1f s", time.perf_counter() - start)
            return
        make_client(model, max_tokens=1).complete(warm_messages(), role="warmup",
                                                  max_tokens=1)
    except Exception:  # noqa: BLE001 - the first run reports any real problem itself
        log.warning("warm start failed; the first task will start cold", exc_info=True)
        return
    log.info("warm start: litellm imported, embedded server ready and system prompt "
             "evaluated in %.1f s", time.perf_counter() - start)


def prewarm(model: str | None) -> threading.Thread:
    """Import litellm and, for the embedded model, start its server and have it evaluate
    the system prompt, in a daemon thread (failures are logged, never raised: the first
    run meets and reports any real problem).

    Args:
        model: the root model string as :meth:`RLMConfig.models` resolves it; None,
            ``local`` or ``local/<name>`` is the embedded model, which alone gets a
            request (a provider's model is never called for a warm-up).

    Returns:
        The started thread (join it to wait for the warm-up).
    """
    thread = threading.Thread(target=_warm, args=(model,), daemon=True,
                              name="rlm-warm-start")
    host_thread(thread)
    thread.start()
    return thread
