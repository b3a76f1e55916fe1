"""Retries through litellm's own layer (it needs ``tenacity``) against a local
OpenAI-compatible server that fails on purpose, and errors that name their cause.

Two layers retry a call: the OpenAI SDK (``num_retries`` requests more, for 429, 5xx
and connection errors), then litellm's (``num_retries`` attempts more, through
``tenacity``).  With ``num_retries=1`` a server failing twice is only answered by
litellm's layer, so the success test fails if that layer cannot run.  The server
sends ``retry-after-ms`` so the SDK's backoff is 10 ms instead of 0.5-8 s.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rlm_kernel.models import LiteLLMClient, LLMError, import_litellm

HI = [{"role": "user", "content": "hi"}]


class FlakyServer:
    """Answers ``POST /v1/chat/completions`` with the given HTTP statuses in turn, then 200.

    Error bodies say "refused on purpose" and never the status, so a message naming
    the status got it from the reply, not from the text."""

    def __init__(self, statuses: list[int], delay: float = 0.0) -> None:
        self.statuses = list(statuses)
        self.delay = delay
        self.seen: list[int] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):  # noqa: N802 - http.server API
                self.rfile.read(int(self.headers.get("content-length", 0)))
                time.sleep(outer.delay)
                status = outer.statuses.pop(0) if outer.statuses else 200
                outer.seen.append(status)
                if status == 200:
                    body = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": "fine"}}],
                            "usage": {"prompt_tokens": 3, "completion_tokens": 1,
                                      "total_tokens": 4}}
                else:
                    body = {"error": {"message": "refused on purpose", "type": "test"}}
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.send_header("retry-after-ms", "10")  # the SDK's backoff, kept short
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (timeout test)
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def flaky():
    servers: list[FlakyServer] = []

    def make(statuses: list[int], delay: float = 0.0) -> FlakyServer:
        servers.append(FlakyServer(statuses, delay))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def client(api_base: str, **kwargs) -> LiteLLMClient:
    return LiteLLMClient("openai/test-model", api_base=api_base, api_key="sk-dummy-key-000",
                         **kwargs)


def dead_port() -> int:
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_tenacity_is_a_declared_dependency():
    requires = importlib.metadata.requires("rlm-kernel") or []
    plain = [r for r in requires if "extra ==" not in r]
    assert any(re.match(r"tenacity\b", r) for r in plain), plain
    import tenacity  # noqa: F401 - installed with the package


def test_429_then_500_then_an_answer_is_retried_to_success(flaky):
    server = flaky([429, 500])
    import_litellm()  # its import (seconds) is not backoff
    started = time.monotonic()
    reply = client(server.api_base, num_retries=1).complete(HI)
    assert reply.text == "fine"
    # the SDK's one retry got the 500; litellm's own retry (tenacity) got the answer
    assert server.seen == [429, 500, 200]
    assert time.monotonic() - started < 5  # 10 ms backoffs, not seconds


@pytest.mark.parametrize("status,words", [
    (401, ["http 401", "api key"]),
    (403, ["http 403"]),
    (404, ["http 404", "does not know this model"]),
    (500, ["http 500", "provider failed"]),
    (429, ["http 429", "rate limited"]),
])
def test_a_provider_that_keeps_failing_is_reported_by_its_cause(flaky, status, words):
    server = flaky([status] * 20)
    with pytest.raises(LLMError) as exc:
        client(server.api_base, num_retries=1).complete(HI)
    message = str(exc.value)
    assert all(w in message.lower() for w in words), message
    assert "refused on purpose" in message and "tenacity" not in message, message
    assert "\n" not in message and len(message) < 500


def test_a_dead_server_is_reported_as_a_refused_connection():
    api_base = f"http://127.0.0.1:{dead_port()}/v1"
    with pytest.raises(LLMError) as exc:
        client(api_base, num_retries=1, timeout=5).complete(HI)
    message = str(exc.value)
    assert "connection refused" in message.lower() and api_base in message, message
    assert "tenacity" not in message and "provider failed" not in message, message


def test_a_silent_server_is_reported_as_a_timeout(flaky):
    server = flaky([], delay=3)
    started = time.monotonic()
    with pytest.raises(LLMError) as exc:
        client(server.api_base, num_retries=0, timeout=0.5).complete(HI)
    message = str(exc.value)
    assert "timed out" in message and "within 0.5 s" in message, message
    assert "tenacity" not in message
    assert time.monotonic() - started < 3


def test_without_tenacity_errors_still_name_their_cause(flaky, monkeypatch):
    """An install that lacks tenacity (``pip install --no-deps``): litellm raises
    "tenacity import failed" over the real error; the message still names the cause."""
    monkeypatch.setitem(sys.modules, "tenacity", None)
    server = flaky([500] * 20)
    with pytest.raises(LLMError) as exc:
        client(server.api_base, num_retries=1).complete(HI)
    assert "HTTP 500" in str(exc.value) and "tenacity" not in str(exc.value), str(exc.value)
    with pytest.raises(LLMError) as exc:
        client(f"http://127.0.0.1:{dead_port()}/v1", num_retries=1, timeout=5).complete(HI)
    message = str(exc.value)
    assert "connection refused" in message.lower() and "tenacity" not in message, message


def test_the_failed_call_is_recorded_with_its_cause(flaky):
    from rlm_kernel.models import UsageLedger

    server = flaky([401] * 5)
    llm = client(server.api_base, num_retries=0)
    llm.ledger = UsageLedger()
    with pytest.raises(LLMError):
        llm.complete(HI)
    calls = llm.ledger.calls
    assert len(calls) == 1 and "HTTP 401" in calls[0].error, calls
