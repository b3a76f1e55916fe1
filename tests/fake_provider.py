"""A local OpenAI-compatible chat-completions server for tests of the litellm client:
real HTTP, real litellm, no network.  Each request is counted; the reply text is
``reply(n)`` for the n-th request (from 1), or ``reply(n, body)`` when ``reply`` takes
two arguments (``body``: the request's JSON, e.g. its ``messages``)."""

from __future__ import annotations

import inspect
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def send_ok(handler: BaseHTTPRequestHandler, data: bytes, content_type: str) -> None:
    """Answer ``handler``'s request with status 200 and ``data`` (bytes) as its body."""
    handler.send_response(200)
    handler.send_header("content-type", content_type)
    handler.send_header("content-length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def serve_http(handler_class: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    """Serve ``handler_class`` on a free 127.0.0.1 port from a daemon thread; the caller
    stops it (``shutdown()`` then ``server_close()``)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler_class)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


@dataclass
class FakeServer:
    """A running fake provider: its ``api_base`` (``.../v1``), the requests it has
    answered (``seen``, one entry each) and :meth:`shutdown` to stop it mid-test (a
    later request to it is refused)."""

    api_base: str
    seen: list[int]
    httpd: ThreadingHTTPServer = field(repr=False)
    _stopped: bool = False

    def shutdown(self) -> None:
        """Stop serving and close the port (idempotent)."""
        if not self._stopped:
            self._stopped = True
            self.httpd.shutdown()
            self.httpd.server_close()


@contextmanager
def fake_server(reply: Callable[..., str], prompt_tokens: int = 5,
                completion_tokens: int = 2, delay: float = 0.0) -> Iterator[FakeServer]:
    """Serve ``/v1/chat/completions`` on a free 127.0.0.1 port.

    Args:
        reply: ``reply(n)`` or ``reply(n, body)``: the text of the n-th reply.
        prompt_tokens / completion_tokens: the usage each reply reports.
        delay: seconds each request waits before its reply (a model's latency).

    Yields:
        A :class:`FakeServer`, shut down when the block ends.
    """
    seen: list[int] = []
    with_body = len(inspect.signature(reply).parameters) >= 2
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            raw = self.rfile.read(int(self.headers.get("content-length", 0)))
            with lock:
                seen.append(1)
                n = len(seen)
            if delay:
                time.sleep(delay)
            text = reply(n, json.loads(raw or b"{}")) if with_body else reply(n)
            data = json.dumps({
                "id": "x", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens},
            }).encode()
            send_ok(self, data, "application/json")

    httpd = serve_http(Handler)
    server = FakeServer(f"http://127.0.0.1:{httpd.server_port}/v1", seen, httpd)
    try:
        yield server
    finally:
        server.shutdown()


@contextmanager
def fake_provider(reply: Callable[..., str], prompt_tokens: int = 5,
                  completion_tokens: int = 2) -> Iterator[tuple[str, list[int]]]:
    """:func:`fake_server` as ``(api_base, seen)``: the ``.../v1`` base URL and the list
    of requests so far."""
    with fake_server(reply, prompt_tokens, completion_tokens) as server:
        yield server.api_base, server.seen
