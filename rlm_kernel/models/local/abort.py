"""A request whose client has gone stops the embedded model at once, mid-prompt too.

llama-cpp-python's server looks at its client between two tokens of a streamed reply
(``get_event_publisher`` in ``llama_cpp.server.app``), so a client that goes while its
prompt is being evaluated (seconds to minutes for a long context on a CPU) leaves the
server evaluating that prompt to its end and computing a first token no one reads, while
the next request waits for the model.

llama.cpp has the means to stop sooner: the abort callback of a context's parameters
(``llama_context_params.abort_callback``), which its CPU backend calls between two nodes
of the compute graph (a few hundred times a token); when it returns true,
``llama_decode`` stops and returns 2, its memory of the cut batch is removed, and
llama-cpp-python raises ``RuntimeError``.  The model is whole for the next request.

Two halves, both in the server process (:mod:`rlm_kernel.models.local.serve`):

- :class:`AbortOnDisconnect`, an ASGI middleware, gives each HTTP request an event (in a
  context variable) that it sets when the request's ``http.disconnect`` arrives: ASGI
  servers send it when the client closes its connection, and sse-starlette's streamed
  response listens for it while the reply is computed;
- :func:`abort_when_client_gone` makes every context this process creates call
  :func:`client_gone`, which reads the event of the request in whose worker thread the
  evaluation runs (starlette's ``run_in_threadpool`` runs a request's work in a copy of
  its context).  Outside a request (no event), nothing is stopped.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from .keep_alive import ASGIApp, Scope

__all__ = ["AbortOnDisconnect", "abort_when_client_gone", "client_gone"]

log = logging.getLogger(__name__)

_gone: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "rlm_request_gone", default=None)
"""The event of the HTTP request whose work runs in this context: set once its client
has gone."""

_callback: Any = None
"""The C function pointer handed to llama.cpp, kept alive for the process's life."""


def client_gone(_data: Any = None) -> bool:
    """True when the HTTP request this thread works for has lost its client (llama.cpp's
    ``ggml_abort_callback``: ``bool (*)(void * data)``, ``data`` unused)."""
    event = _gone.get()
    return event is not None and event.is_set()


class AbortOnDisconnect:
    """ASGI middleware of the server process: marks a request as abandoned when its
    ``http.disconnect`` arrives (see the module docstring), so that the model's
    evaluation for it stops (:func:`client_gone`).

    An error the app raises for a request already abandoned (llama-cpp-python's
    ``RuntimeError: llama_decode returned 2``) is logged in one line, not as a traceback:
    no client is there to answer.

    Args:
        app: the server's ASGI app (llama-cpp-python's FastAPI app).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Any]],
                       send: Callable[[Any], Awaitable[None]]) -> None:
        if scope["type"] != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        gone = threading.Event()

        async def watched_receive() -> Any:
            message = await receive()
            if message.get("type") == "http.disconnect":
                gone.set()
            return message

        token = _gone.set(gone)
        try:
            await self.app(scope, watched_receive, send)
        except Exception as exc:
            if not gone.is_set():
                raise
            log.info("rlm-kernel: %s %s: its client went; the model stopped (%s)",
                     scope.get("method"), scope.get("path"), exc)
        finally:
            _gone.reset(token)


def abort_when_client_gone() -> None:
    """Make every llama.cpp context this process creates from then on stop its
    evaluation when :func:`client_gone` says so (llama-cpp-python's ``Llama`` starts
    from ``llama_context_default_params()``, whose result gets the callback).  Call
    before a model is loaded."""
    global _callback
    from llama_cpp import llama_cpp as capi

    if _callback is None:
        _callback = capi.ggml_abort_callback(client_gone)
    defaults = capi.llama_context_default_params

    def context_defaults() -> Any:  # llama.cpp's llama_context_params structure
        params = defaults()
        params.abort_callback = _callback
        params.abort_callback_data = None
        return params

    capi.llama_context_default_params = context_defaults
