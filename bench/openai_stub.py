"""The one stub OpenAI-compatible chat-completions server of the tests and benchmarks:
real HTTP on 127.0.0.1, no model, no network.

:class:`StubChatServer` runs ``http.server.ThreadingHTTPServer`` in a daemon thread of
the calling process (one thread per connection, so requests are served concurrently)
and answers ``POST .../chat/completions`` with a valid ``chat.completion`` JSON
(:func:`chat_completion`) whose text comes from a callable, optionally after a fixed
delay standing in for model latency, with at most ``slots`` requests served at once
(the others queue, as on a llama.cpp server with one slot).  ``GET .../models`` lists
one model, ``GET .../stats`` returns :meth:`StubChatServer.stats`, ``POST .../reset``
forgets the counts; any other path gets a 404, a body that is not JSON a 400.

A request with ``"stream": true`` is answered as OpenAI streams (server-sent events:
``chat.completion.chunk`` objects, one piece of the text each, :func:`pieces`, then one
with the usage when ``stream_options.include_usage`` asks for it, then ``[DONE]``),
``piece_seconds`` apart, as a model writes; a client that closes the stream ends it
(the server stops writing, as llama.cpp's stops generating), which is counted.

It records, for the test or benchmark to read:

* ``stamps``: the arrival time of every chat request, in seconds of
  ``time.perf_counter`` (the same clock as the caller, since the server runs in its
  process);
* ``requests`` and ``seen`` (one entry per request): how many chat requests arrived;
* ``in_flight`` / ``peak``: how many were being served at once, now and at most;
  ``waiting`` / ``peak_waiting``: how many waited for a slot;
* ``counts``: what the reply callable counted (:meth:`StubChatServer.count`);
* ``streams``: per streamed request, ``{"pieces": sent, "of": total, "closed": the
  client closed it before the end, "ended": perf_counter seconds when it stopped}``.

Use it as a context manager (``with StubChatServer(reply) as server: ...``) or call
:meth:`StubChatServer.start` and :meth:`StubChatServer.stop`.  Tests use
:func:`fake_server` (replies numbered from 1) or :func:`fake_provider`; tests with a
handler of their own use :func:`serve_http` and :func:`send_ok`.

Imported by the ``bench/bench_*.py`` scripts as a sibling module (they put ``bench/`` on
``sys.path``) and by the tests as ``bench.openai_stub``.
"""

from __future__ import annotations

import inspect
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ["StubChatServer", "chat_completion", "fake_provider", "fake_server", "pieces",
           "send_ok", "send_reply", "serve_http", "stream_events"]


def pieces(text: str) -> list[str]:
    """``text`` cut into the pieces a stream sends: a word with the white space before
    it (and the white space at the end); joined, they are ``text``.  (A tokenizer's
    tokens are shorter; the stream's shape is the same.)"""
    return re.findall(r"\s*\S+|\s+\Z", text)


def chat_completion(text: str, model: str = "stub",
                    usage: tuple[int, int] = (10, 5)) -> dict[str, Any]:
    """One ``chat.completion`` payload (OpenAI's shape) replying ``text``.

    Args:
        text: the assistant's reply.
        model: the model name it reports.
        usage: ``(prompt_tokens, completion_tokens)`` it reports.
    """
    prompt_tokens, completion_tokens = usage
    return {
        "id": "chatcmpl-stub", "object": "chat.completion",
        "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


def stream_events(reply: dict[str, Any], request: dict[str, Any]) -> list[dict[str, Any]]:
    """A ``chat.completion`` payload as the ``chat.completion.chunk`` events OpenAI
    streams for it: one per piece of its text (:func:`pieces`), one with its
    ``finish_reason``, and one with its ``usage`` when the request's
    ``stream_options.include_usage`` asks for it."""
    head = {"id": reply.get("id", "chatcmpl-stub"), "object": "chat.completion.chunk",
            "created": reply.get("created", 0), "model": reply.get("model", "stub")}
    text = reply["choices"][0]["message"]["content"]
    events: list[dict[str, Any]] = [
        {**head, "choices": [{"index": 0, "finish_reason": None,
                              "delta": {"role": "assistant", "content": part}}]}
        for part in pieces(text)]
    events.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason":
                                        reply["choices"][0].get("finish_reason", "stop")}]})
    if (request.get("stream_options") or {}).get("include_usage"):
        events.append({**head, "choices": [], "usage": reply["usage"]})
    return events


def send_reply(handler: BaseHTTPRequestHandler, reply: dict[str, Any],
               request: dict[str, Any]) -> None:
    """Answer ``handler``'s chat request with ``reply`` (a ``chat.completion`` payload):
    as JSON, or as server-sent events (:func:`stream_events`, then ``[DONE]``) when the
    request asks for a stream, as an OpenAI-compatible server does."""
    if not request.get("stream"):
        send_ok(handler, json.dumps(reply).encode(), "application/json")
        return
    data = b"".join(f"data: {json.dumps(e)}\n\n".encode()
                    for e in stream_events(reply, request)) + b"data: [DONE]\n\n"
    send_ok(handler, data, "text/event-stream")


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


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # listen() backlog: a batch of concurrent connections


class StubChatServer:
    """OpenAI-compatible chat server on 127.0.0.1 replying from ``reply`` (see the module
    docstring for its routes and counts).

    ``reply`` gets the decoded JSON body of each chat request (``model``,
    ``messages``, ...), and first the request's number (from 1, in order of arrival)
    when it takes two arguments, and returns the assistant's text.  It is called when the request
    holds a slot, after ``delay`` seconds (no sleep at all when ``delay`` is 0), from
    the request's own server thread, so it must be thread-safe when requests overlap.
    The socket is bound on construction, so :attr:`base_url` is known before
    :meth:`start`.

    Args:
        reply: ``reply(request) -> str`` or ``reply(n, request) -> str``.
        delay: seconds each request holds its slot before its reply (a model's latency).
        usage: ``(prompt_tokens, completion_tokens)`` reported with every reply.
        slots: requests served at once (None: no limit).
        port: TCP port on 127.0.0.1 (0: a free one).
        model: the model name the replies report (None: the request's).
        keep_alive: HTTP/1.1 with persistent connections (True), else HTTP/1.0, one
            request a connection, so that after :meth:`stop` every request is refused.
        kinds: keys of :attr:`counts` reported even at zero (``("root", "sub")``).
        piece_seconds: seconds between two pieces of a streamed reply.

    Raises:
        ValueError: ``delay`` < 0 or ``slots`` < 1.
        OSError: the port cannot be bound.
    """

    def __init__(self, reply: Callable[..., str], delay: float = 0.0,
                 usage: tuple[int, int] = (10, 5), slots: int | None = None,
                 port: int = 0, model: str | None = None, keep_alive: bool = True,
                 kinds: tuple[str, ...] = (), piece_seconds: float = 0.0) -> None:
        if delay < 0 or (slots is not None and slots < 1):
            raise ValueError("delay must be >= 0 and slots >= 1")
        self.reply = reply
        self._numbered = len(inspect.signature(reply).parameters) >= 2
        self.model = model
        self.kinds = kinds
        self.delay = delay  # seconds
        self.usage = usage  # (prompt_tokens, completion_tokens) per reply
        self.piece_seconds = piece_seconds
        self._slots = threading.BoundedSemaphore(slots) if slots is not None else None
        self._lock = threading.Lock()
        self._stopped = False
        self.reset()
        self.in_flight = 0
        self.waiting = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"
            disable_nagle_algorithm = True  # else delayed ACKs add ~40 ms per response

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                path = self.path.rstrip("/")
                if path.endswith("/stats"):
                    self._send(200, owner.stats())
                elif path.endswith("/models"):
                    self._send(200, {"object": "list", "data": [
                        {"id": "stub", "object": "model", "owned_by": "bench"}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                arrived = time.perf_counter()
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.rstrip("/")
                if path.endswith("/reset"):
                    owner.reset()
                    self._send(200, {"reset": True})
                    return
                if not path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                try:
                    request = json.loads(body or b"{}")
                except ValueError:
                    self._send(400, {"error": {"message": "the body is not JSON"}})
                    return
                if request.get("stream"):
                    self._stream(owner._complete(request, arrived), request)
                    return
                self._send(200, owner._complete(request, arrived))

            def _stream(self, reply: dict[str, Any], request: dict[str, Any]) -> None:
                """The reply as server-sent events, piece by piece, until the client
                closes the stream."""
                text = reply["choices"][0]["message"]["content"]
                parts = pieces(text)
                record = {"pieces": 0, "of": len(parts), "closed": False, "ended": 0.0}
                with owner._lock:
                    owner.streams.append(record)
                self.close_connection = True
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                events = stream_events(reply, request)
                try:
                    for n, event in enumerate(events):
                        if n and owner.piece_seconds:
                            time.sleep(owner.piece_seconds)
                        self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                        self.wfile.flush()
                        record["pieces"] = min(n + 1, len(parts))
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except OSError:  # the client closed the stream
                    record["closed"] = True
                record["ended"] = time.perf_counter()

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = _Server(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def _complete(self, request: dict[str, Any], arrived: float) -> dict[str, Any]:
        """Record one chat request (arrived at ``arrived``, perf_counter seconds), wait
        for a slot, hold it ``delay`` seconds, and return its ``chat.completion``."""
        with self._lock:
            self.stamps.append(arrived)
            self.seen.append(1)
            self.requests += 1
            number = self.requests
            self.waiting += 1
            self.peak_waiting = max(self.peak_waiting, self.waiting)
        if self._slots is not None:
            self._slots.acquire()
        try:
            with self._lock:
                self.waiting -= 1
                self.in_flight += 1
                self.peak = max(self.peak, self.in_flight)
            try:
                if self.delay > 0:
                    time.sleep(self.delay)
                text = self.reply(number, request) if self._numbered else self.reply(request)
            finally:
                with self._lock:
                    self.in_flight -= 1
        finally:
            if self._slots is not None:
                self._slots.release()
        return chat_completion(text, self.model or request.get("model", "stub"), self.usage)

    def ended_streams(self, timeout: float = 5.0) -> list[dict[str, Any]]:
        """:attr:`streams` once each has ended (its last piece sent, or its client gone:
        the server sees a closed stream at its next write), waiting up to ``timeout``
        seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if all(s["ended"] for s in self.streams):
                    break
            time.sleep(0.005)
        with self._lock:
            return [dict(s) for s in self.streams]

    def count(self, key: str) -> None:
        """Add one to ``counts[key]`` (thread-safe): for a reply that sorts requests."""
        with self._lock:
            self.counts[key] += 1

    def stats(self) -> dict[str, int]:
        """The counts since the last :meth:`reset`: ``requests``, ``peak``, ``in_flight``,
        ``waiting``, ``peak_waiting`` and what :meth:`count` counted."""
        with self._lock:
            return {"requests": self.requests, "peak": self.peak,
                    "in_flight": self.in_flight, "waiting": self.waiting,
                    "peak_waiting": self.peak_waiting, **self.counts}

    @property
    def port(self) -> int:
        """The port it listens on."""
        return int(self.httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The OpenAI ``base_url`` / litellm ``api_base``: ``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    api_base = base_url

    def start(self) -> StubChatServer:
        """Start serving in a daemon thread; returns ``self``."""
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop serving (waits up to the 0.5 s poll interval) and close the socket
        (idempotent: a later request is refused)."""
        if self._stopped:
            return
        self._stopped = True
        if self.thread.is_alive():
            self.httpd.shutdown()
        self.httpd.server_close()

    shutdown = stop

    def reset(self) -> None:
        """Forget the stamps, the requests and the counts; the peaks restart from what
        is in flight and waiting now."""
        with self._lock:
            self.stamps: list[float] = []  # perf_counter() seconds at each arrival
            self.seen: list[int] = []  # one entry per chat request
            self.requests = 0
            self.counts: Counter[str] = Counter(dict.fromkeys(self.kinds, 0))
            self.streams: list[dict[str, Any]] = []  # per streamed request (module docstring)
            self.peak = getattr(self, "in_flight", 0)
            self.peak_waiting = getattr(self, "waiting", 0)

    def __enter__(self) -> StubChatServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


@contextmanager
def fake_server(reply: Callable[..., str], prompt_tokens: int = 5,
                completion_tokens: int = 2, delay: float = 0.0) -> Iterator[StubChatServer]:
    """A running :class:`StubChatServer` whose replies are numbered: the test's form.

    Args:
        reply: ``reply(n)`` or ``reply(n, body)``: the text of the n-th reply (from 1;
            ``body``: the request's JSON, e.g. its ``messages``).
        prompt_tokens / completion_tokens: the usage each reply reports.
        delay: seconds each request waits before its reply (a model's latency).

    Yields:
        The server (``api_base``, ``seen``, ``shutdown()`` to stop it mid-test), stopped
        when the block ends.
    """
    with_body = len(inspect.signature(reply).parameters) >= 2

    def numbered(n: int, body: dict[str, Any]) -> str:
        return reply(n, body) if with_body else reply(n)

    with StubChatServer(numbered, delay, (prompt_tokens, completion_tokens),
                        model="gpt-4o-mini", keep_alive=False) as server:
        yield server


@contextmanager
def fake_provider(reply: Callable[..., str], prompt_tokens: int = 5,
                  completion_tokens: int = 2) -> Iterator[tuple[str, list[int]]]:
    """:func:`fake_server` as ``(api_base, seen)``: the ``.../v1`` base URL and the list
    of requests so far."""
    with fake_server(reply, prompt_tokens, completion_tokens) as server:
        yield server.api_base, server.seen
