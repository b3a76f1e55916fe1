"""Streamed replies through litellm's streaming, against the stub OpenAI-compatible
server streaming over real HTTP (``bench/openai_stub.py``): the pieces reach the
``stream`` callback in order and join to the reply the call returns, the usage is the
server's, and a callback that raises (a stop) closes the request: the server sees its
client go and stops writing."""

from __future__ import annotations

import time

import pytest

from bench.openai_stub import StubChatServer, pieces
from rlm_kernel.models import CallOptions, ClientWrapper, LiteLLMClient, UsageLedger
from rlm_kernel.models.usage import Completion

HI = [{"role": "user", "content": "hi"}]
REPLY = ("I will count the lines first.\n```repl\nlines = context.splitlines()\n"
         "print(len(lines))\n```\n")
LONG = " ".join(f"word{i}" for i in range(400))


def client(server: StubChatServer) -> LiteLLMClient:
    lm = LiteLLMClient("openai/stub", api_base=server.api_base, api_key="sk-test",
                       num_retries=0, priced=False)
    lm.ledger = UsageLedger()
    return lm


def test_pieces_come_in_order_and_join_to_the_reply_a_plain_call_gets():
    with StubChatServer(lambda _req: REPLY, usage=(31, 17), piece_seconds=0.02) as server:
        lm, got, sent = client(server), [], []

        def on_text(piece: str) -> None:
            got.append(piece)
            sent.append(server.streams[-1]["pieces"])  # what the server had sent by then

        lm.complete(HI, stream=lambda _piece: None)  # litellm's first stream imports more
        plain = lm.complete(HI)
        streamed = lm.complete(HI, stream=on_text)
    assert got == pieces(REPLY)  # every piece, in order, as the server sent them
    assert "".join(got) == streamed.text == plain.text == REPLY
    # as they came: the first piece was handed on before the server had written the rest
    assert sent == sorted(sent) and sent[0] < len(got) - 1, sent
    assert (streamed.call.prompt_tokens, streamed.call.completion_tokens) == (31, 17)
    assert server.streams[-1]["pieces"] == len(pieces(REPLY)) and not server.streams[-1]["closed"]
    assert [c.error for c in lm.ledger.calls] == [None, None, None]


def test_a_stop_while_the_model_writes_closes_the_request():
    with StubChatServer(lambda _req: LONG, piece_seconds=0.01) as server:
        lm, got = client(server), []

        def on_text(piece: str) -> None:
            got.append(piece)
            if len(got) == 5:
                raise KeyboardInterrupt  # the stop button, Ctrl-C

        with pytest.raises(KeyboardInterrupt):
            lm.complete(HI, stream=on_text)
        stopped = time.perf_counter()
        record = server.ended_streams()[0]
    assert record["closed"], record  # the server saw its client go ...
    assert record["pieces"] < 20 < record["of"]  # ... and stopped writing
    assert record["ended"] - stopped < 1.0
    (call,) = lm.ledger.calls  # the cut call is kept, marked
    assert "".join(got) == "".join(pieces(LONG)[:5])
    assert call.error == f"the reply was cut after {len(''.join(got))} characters " \
        "(KeyboardInterrupt)"


class NamedKeywords:
    """A user's client written before the ``stream`` option: ``complete`` names its
    keywords."""

    model, ledger, depth = "mine", None, 0

    def check(self) -> None:
        pass

    def complete(self, messages, role="root", stop=None, max_tokens=None,
                 temperature=None) -> Completion:
        from rlm_kernel.models.usage import LLMCall

        return Completion(text="the whole reply", call=LLMCall(model="mine", role=role))


def test_a_client_that_cannot_stream_gives_its_reply_whole():
    got: list[str] = []
    reply = ClientWrapper(NamedKeywords()).call(HI, CallOptions(stream=got.append))
    assert reply.text == "the whole reply" and got == ["the whole reply"]


def test_a_streamed_reply_reaches_litellm_callbacks_once_whole():
    """litellm's per-piece logging is off (:func:`~rlm_kernel.models.litellm_client.import_litellm`):
    a litellm callback (a user's tracer, ours) still gets one success event a streamed
    call, carrying the whole reply and its usage, as for a plain call."""
    from litellm.integrations.custom_logger import CustomLogger

    from rlm_kernel.models.litellm_client import import_litellm

    litellm = import_litellm()
    seen: list[tuple[str, int]] = []

    class Seen(CustomLogger):
        def log_success_event(self, kwargs, response_obj, start_time, end_time):
            seen.append((response_obj.choices[0].message.content,
                         response_obj.usage.completion_tokens))

    logger, before = Seen(), list(litellm.callbacks)
    litellm.callbacks = [*before, logger]
    try:
        with StubChatServer(lambda _req: LONG, usage=(12, 400)) as server:
            got: list[str] = []
            streamed = client(server).complete(HI, stream=got.append)
            deadline = time.monotonic() + 5  # litellm logs from its thread pool
            while not seen and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(0.2)  # a second event, were there one, has come by now
    finally:
        litellm.callbacks = before
    assert litellm.disable_streaming_logging is True
    assert len(got) == len(pieces(LONG)) and streamed.text == LONG
    assert seen == [(LONG, 400)]


def test_a_server_that_ignores_stream_gives_its_reply_whole_not_an_empty_one(caplog):
    """A server that answers ``stream: true`` with one JSON body (no server-sent
    events): litellm reads it as a stream of nothing.  The reply is asked again whole,
    handed on as one piece, and later calls of the client are asked whole."""
    import json
    from http.server import BaseHTTPRequestHandler

    from bench.openai_stub import chat_completion, serve_http

    asked: list[bool] = []

    class WholeOnly(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            asked.append(bool(request.get("stream")))
            data = json.dumps(chat_completion(REPLY)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = serve_http(WholeOnly)
    try:
        lm = LiteLLMClient("openai/stub", api_key="sk-test", num_retries=0, priced=False,
                           api_base=f"http://127.0.0.1:{server.server_address[1]}/v1")
        lm.ledger = UsageLedger()
        got: list[str] = []
        first = lm.complete(HI, stream=got.append)
        second = lm.complete(HI, stream=got.append)
    finally:
        server.shutdown()
        server.server_close()
    assert first.text == second.text == REPLY and got == [REPLY, REPLY]
    assert asked == [True, False, False]  # streamed once, then whole from then on
    assert [c.error for c in lm.ledger.calls] == [None, None, None]
    assert "sent no stream" in caplog.text
