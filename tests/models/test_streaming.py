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
    with StubChatServer(lambda _req: REPLY, usage=(31, 17), piece_seconds=0.005) as server:
        lm, got, stamps = client(server), [], []

        def on_text(piece: str) -> None:
            got.append(piece)
            stamps.append(time.perf_counter())

        streamed = lm.complete(HI, stream=on_text)
        plain = lm.complete(HI)
    assert got == pieces(REPLY)  # every piece, in order, as the server sent them
    assert "".join(got) == streamed.text == plain.text == REPLY
    assert stamps == sorted(stamps) and stamps[-1] - stamps[0] > 0.02  # as they came
    assert (streamed.call.prompt_tokens, streamed.call.completion_tokens) == (31, 17)
    assert server.streams[0]["pieces"] == len(pieces(REPLY)) and not server.streams[0]["closed"]
    assert [c.error for c in lm.ledger.calls] == [None, None]


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
