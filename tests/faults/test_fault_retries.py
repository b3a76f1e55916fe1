"""Retries through litellm's own layer (it needs ``tenacity``) against a local
OpenAI-compatible server that fails on purpose, and errors that name their cause."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rlm_kernel.models import LiteLLMClient, LLMError


class FlakyServer:
    """Answers ``POST /v1/chat/completions`` with the given HTTP statuses in turn, then 200."""

    def __init__(self, statuses: list[int], delay: float = 0.0) -> None:
        self.statuses = list(statuses)
        self.delay = delay
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):  # noqa: N802 - http.server API
                self.rfile.read(int(self.headers.get("content-length", 0)))
                outer.requests += 1
                time.sleep(outer.delay)
                status = outer.statuses.pop(0) if outer.statuses else 200
                if status == 200:
                    body = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": "fine"}}],
                            "usage": {"prompt_tokens": 3, "completion_tokens": 1,
                                      "total_tokens": 4}}
                else:
                    body = {"error": {"message": f"status {status} on purpose",
                                      "type": "test", "code": status}}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def client(api_base: str, **kwargs) -> LiteLLMClient:
    return LiteLLMClient("openai/test-model", api_base=api_base, api_key="sk-dummy-key-000",
                         **kwargs)


def test_429_then_500_then_an_answer_is_retried_to_success():
    server = FlakyServer([429, 500])
    try:
        reply = client(server.api_base, num_retries=3).complete(
            [{"role": "user", "content": "hi"}])
    finally:
        server.close()
    assert reply.text == "fine"
    assert server.requests >= 3


@pytest.mark.parametrize("status,cause", [(401, "401"), (500, "500")])
def test_a_provider_that_keeps_failing_is_reported_by_its_cause(status, cause):
    server = FlakyServer([status] * 20)
    try:
        with pytest.raises(LLMError) as exc:
            client(server.api_base, num_retries=1).complete([{"role": "user", "content": "hi"}])
    finally:
        server.close()
    message = str(exc.value)
    assert cause in message or ("authentic" in message.lower() and status == 401), message
    assert "tenacity" not in message


def test_a_dead_server_is_reported_as_a_refused_connection():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(LLMError) as exc:
        client(f"http://127.0.0.1:{port}/v1", num_retries=1, timeout=5).complete(
            [{"role": "user", "content": "hi"}])
    message = str(exc.value).lower()
    assert "connect" in message and "tenacity" not in message, message


def test_a_silent_server_is_reported_as_a_timeout():
    server = FlakyServer([], delay=5)
    try:
        with pytest.raises(LLMError) as exc:
            client(server.api_base, num_retries=0, timeout=1).complete(
                [{"role": "user", "content": "hi"}])
    finally:
        server.close()
    assert "timed out" in str(exc.value).lower() or "timeout" in str(exc.value).lower()
