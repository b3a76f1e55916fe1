"""How long the embedded model's server outlives the command that started it
(``keep_alive``, as ollama's ``OLLAMA_KEEP_ALIVE``).

A server started with ``keep_alive`` > 0 is not tied to its starter: every process
(a kernel, ``rlm run``, a batch's workers) finds it through its state file and it stops
itself once no request has been in flight for ``keep_alive`` seconds.  With 0 it stops
with the process that started it, as before.

Two sides of one clock:

- in the server process, :class:`IdleWatch` wraps llama-cpp-python's ASGI app: it
  counts the requests in flight, answers ``GET /rlm/keep_alive`` itself (not counted as
  use), and calls its ``on_idle`` once the server has been idle for ``keep_alive``;
- in any process, :func:`read_status` asks a server that clock and
  :func:`describe_status` says it in one line (``rlm model status``).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["DEFAULT_KEEP_ALIVE", "STATUS_PATH", "IdleWatch", "default_keep_alive",
           "describe_status", "read_status"]

log = logging.getLogger(__name__)

DEFAULT_KEEP_ALIVE = 300.0
"""Seconds an idle server started by a command stays up (ollama's default: 5 minutes)."""
STATUS_PATH = "/rlm/keep_alive"
"""The server's route that reports its clock (JSON; see :meth:`IdleWatch.status`)."""

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
                   Awaitable[None]]


def default_keep_alive() -> float:
    """``keep_alive`` when no setting gives one: ``$RLM_KEEP_ALIVE`` (seconds) when set,
    else :data:`DEFAULT_KEEP_ALIVE`.

    Raises:
        ValueError: ``$RLM_KEEP_ALIVE`` is not a number of seconds at least 0.
    """
    text = os.environ.get("RLM_KEEP_ALIVE", "").strip()
    if not text:
        return DEFAULT_KEEP_ALIVE
    try:
        seconds = float(text)
    except ValueError:
        raise ValueError(f"RLM_KEEP_ALIVE must be seconds (a number), got {text!r}") from None
    if not seconds >= 0:
        raise ValueError(f"RLM_KEEP_ALIVE must be at least 0 seconds, got {text!r}")
    return seconds


class IdleWatch:
    """ASGI middleware of the server process: stops the server after ``keep_alive``
    idle seconds and reports when it will.

    A request is in flight from its arrival until its response is sent or its client is
    gone (a streamed reply's whole length).  The clock restarts when the last one ends;
    a thread looks at it each ``tick`` seconds and calls ``on_idle()`` once, when it has
    run for ``keep_alive`` seconds.

    Args:
        app: the server's ASGI app (llama-cpp-python's FastAPI app).
        keep_alive: seconds; 0 or less: never idle out (the server then stops with the
            process that started it).
        on_idle: called from the watch thread when the clock runs out, to stop the
            server; returns True when it does (then never called again), False when it
            cannot now (the clock starts again).  The watch holds its lock meanwhile, so
            no request starts while it decides: it must not wait.
        tick: seconds between two looks at the clock.
    """

    def __init__(self, app: ASGIApp, keep_alive: float, on_idle: Callable[[], bool],
                 tick: float = 0.5) -> None:
        self.app = app
        self.keep_alive = keep_alive
        self.on_idle = on_idle
        self.tick = tick
        self.requests = 0  # requests answered or in flight since the start
        self.first_request: float | None = None  # epoch seconds
        self.last_request: float | None = None
        self._in_flight = 0
        self._idle_since = time.monotonic()
        self._stopping = False
        self._lock = threading.Lock()
        if keep_alive > 0:
            threading.Thread(target=self._watch, daemon=True, name="rlm-keep-alive").start()

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Any]],
                       send: Callable[[Any], Awaitable[None]]) -> None:
        if scope["type"] != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        if scope.get("path") == STATUS_PATH:
            body = json.dumps(self.status()).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return
        with self._lock:
            self._in_flight += 1
            self.requests += 1
            now = time.time()
            self.first_request = self.first_request or now
            self.last_request = now
        try:
            await self.app(scope, receive, send)
        finally:
            with self._lock:
                self._in_flight -= 1
                self._idle_since = time.monotonic()

    def status(self) -> dict[str, Any]:
        """The clock as JSON-ready data: ``keep_alive`` (s), ``in_flight`` (requests),
        ``idle_seconds`` (None while busy), ``stops_in`` (s; None while busy or with
        ``keep_alive`` 0), ``requests``, ``first_request``/``last_request`` (epoch s or
        None), ``pid`` and ``parent`` (the starter's pid, 1 once it is gone)."""
        with self._lock:
            idle = None if self._in_flight else time.monotonic() - self._idle_since
            return {"keep_alive": self.keep_alive, "in_flight": self._in_flight,
                    "idle_seconds": idle,
                    "stops_in": (max(0.0, self.keep_alive - idle)
                                 if idle is not None and self.keep_alive > 0 else None),
                    "requests": self.requests, "first_request": self.first_request,
                    "last_request": self.last_request, "pid": os.getpid(),
                    "parent": os.getppid()}

    def _watch(self) -> None:
        while not self._stopping:
            time.sleep(self.tick)
            with self._lock:
                if self._in_flight or time.monotonic() - self._idle_since < self.keep_alive:
                    continue
                if self.on_idle():
                    self._stopping = True
                    log.warning("rlm-kernel: no request for %g s (keep_alive): the server "
                                "stops", self.keep_alive)
                else:
                    self._idle_since = time.monotonic()


def read_status(api_base: str, timeout: float = 2.0) -> dict[str, Any] | None:
    """A server's keep-alive clock (:meth:`IdleWatch.status`), or None when it does not
    answer (busy past ``timeout`` seconds, gone, or a server without the route).

    Args:
        api_base: the server's OpenAI base URL (``http://127.0.0.1:PORT/v1``).
    """
    root = api_base.rstrip("/").removesuffix("/v1")
    try:
        with urllib.request.urlopen(root + STATUS_PATH, timeout=timeout) as resp:
            data = json.loads(resp.read())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def describe_status(status: dict[str, Any] | None) -> str:
    """When the server stops, in words, from :func:`read_status`'s answer.

    e.g. ``"idle 12 s: stops in 4 min 48 s unless asked (keep_alive 300 s)"``,
    ``"busy (1 request): stops 300 s after its last request"``, ``"stops with the
    process that started it (pid 4242)"``."""
    if status is None:
        return "its keep-alive clock did not answer"
    keep = float(status.get("keep_alive") or 0)
    if keep <= 0:
        return f"stops with the process that started it (pid {status.get('parent')})"
    if status.get("stops_in") is None:
        busy = int(status.get("in_flight") or 0)
        return (f"busy ({busy} request{'s' if busy != 1 else ''}): stops {keep:g} s after "
                "its last request")
    return (f"idle {_duration(float(status.get('idle_seconds') or 0))}: stops in "
            f"{_duration(float(status['stops_in']))} unless asked (keep_alive {keep:g} s)")


def _duration(seconds: float) -> str:
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole} s"
    return f"{whole // 60} min {whole % 60} s"
