"""A local OpenAI-compatible chat-completions server for tests of the litellm client:
real HTTP, real litellm, no network.  Each request is counted; the reply text is
``reply(n)`` for the n-th request (from 1)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def fake_provider(reply: Callable[[int], str], prompt_tokens: int = 5,
                  completion_tokens: int = 2) -> Iterator[tuple[str, list[int]]]:
    """Serve ``/v1/chat/completions`` on a free 127.0.0.1 port.

    Yields:
        ``(api_base, seen)``: the ``.../v1`` base URL and the list of requests so far.
    """
    seen: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def do_POST(self):  # noqa: N802 - http.server API
            self.rfile.read(int(self.headers.get("content-length", 0)))
            seen.append(1)
            data = json.dumps({
                "id": "x", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": reply(len(seen))}}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens},
            }).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/v1", seen
    finally:
        httpd.shutdown()
        httpd.server_close()
