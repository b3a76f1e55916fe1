"""A stub OpenAI-compatible chat-completions server on 127.0.0.1, shared by the benchmarks.

:class:`StubChatServer` runs ``http.server.ThreadingHTTPServer`` in a daemon
thread of the calling process (one thread per connection, so requests are
served concurrently) and answers ``POST .../chat/completions`` with a valid
``chat.completion`` JSON whose text comes from a callable, optionally after a
fixed delay standing in for model latency.  Any other path gets a 404.

It records, for the benchmark to read:

* ``stamps``: the arrival time of every chat request, in seconds of
  ``time.perf_counter`` (the same clock as the benchmark, since the server runs
  in its process);
* ``requests``: how many chat requests arrived;
* ``in_flight`` / ``peak``: how many were being served at once, now and at most.

Use it as a context manager (``with StubChatServer(reply) as server: ...``) or
call :meth:`StubChatServer.start` and :meth:`StubChatServer.stop`.  Imported by
the ``bench/bench_*.py`` scripts as a sibling module (they put ``bench/`` on
``sys.path``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64  # listen() backlog: a batch of concurrent connections


class StubChatServer:
    """OpenAI-compatible chat server on 127.0.0.1 (an ephemeral port) replying from ``reply``.

    ``reply`` gets the decoded JSON body of each chat request (``model``,
    ``messages``, ...) and returns the assistant's text.  It is called after
    ``delay`` seconds (no sleep at all when ``delay`` is 0), from the request's
    own server thread, so it must be thread-safe when requests overlap.
    ``usage`` is the ``(prompt_tokens, completion_tokens)`` reported with every
    reply.  The socket is bound on construction, so :attr:`base_url` is known
    before :meth:`start`.
    """

    def __init__(self, reply: Callable[[dict[str, Any]], str], delay: float = 0.0,
                 usage: tuple[int, int] = (10, 5)) -> None:
        self.reply = reply
        self.delay = delay  # seconds
        self.usage = usage  # (prompt_tokens, completion_tokens) per reply
        self.stamps: list[float] = []  # time.perf_counter() seconds at each request's arrival
        self.requests = 0
        self.in_flight = 0
        self.peak = 0
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else delayed ACKs add ~40 ms per response

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                arrived = time.perf_counter()
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                request = json.loads(body or b"{}")
                self._send(200, owner._complete(request, arrived))

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def _complete(self, request: dict[str, Any], arrived: float) -> dict[str, Any]:
        """Record one chat request (arrived at ``arrived``, perf_counter seconds), wait
        ``delay`` seconds, and return its ``chat.completion`` payload."""
        with self._lock:
            self.stamps.append(arrived)
            self.requests += 1
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            if self.delay > 0:
                time.sleep(self.delay)
            text = self.reply(request)
        finally:
            with self._lock:
                self.in_flight -= 1
        prompt_tokens, completion_tokens = self.usage
        return {
            "id": "chatcmpl-stub", "object": "chat.completion",
            "created": int(time.time()), "model": request.get("model", "stub"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }

    @property
    def base_url(self) -> str:
        """The OpenAI ``base_url`` / litellm ``api_base``: ``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def start(self) -> StubChatServer:
        """Start serving in a daemon thread; returns ``self``."""
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop serving (waits up to the 0.5 s poll interval) and close the socket."""
        self.httpd.shutdown()
        self.httpd.server_close()

    def reset(self) -> None:
        """Forget the stamps and the request count; the peak restarts from ``in_flight``."""
        with self._lock:
            self.stamps = []
            self.requests = 0
            self.peak = self.in_flight

    def __enter__(self) -> StubChatServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
