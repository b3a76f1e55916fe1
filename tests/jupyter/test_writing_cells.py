"""A step's cell fills while the root model writes its reply: ``%%rlm`` in this
process's IPython shell, its model a real HTTP server streaming as OpenAI does
(``bench/openai_stub.py``), the extension's comm recorded (with it) or the task cell's
displays (inline, without it)."""

from __future__ import annotations

import pytest

from bench.openai_stub import StubChatServer
from rlm_kernel.jupyter import protocol
from rlm_kernel.models import LiteLLMClient
from tests.jupyter.scripted_magic import magics
from tests.jupyter.test_protocol import check, run_comms

STEP1 = ("I will measure the context first, then print it.\n```repl\n"
         "n = len(context)\nprint(n)\n```\n")
STEP2 = "Printed.\n```repl\nFINAL(n)\n```\n"
NO_CODE = "Let me think about what the question asks before I write any code.\n"
LONG = "I have a great deal to say before any code. " + " ".join(f"w{i}" for i in range(400))


@pytest.fixture()
def ip(ip):
    ip.run_line_magic("config", "RLM.verify_answer = False")
    yield ip
    for name in ("context", "n", "rlm_answer"):
        ip.user_ns.pop(name, None)


def streamed_model(monkeypatch, ip, server: StubChatServer) -> None:
    """Every client the shell's ``%rlm`` asks for: litellm to ``server``."""
    def factory(_model):
        return LiteLLMClient("openai/stub", api_base=server.api_base, api_key="sk-test",
                             num_retries=0, priced=False)

    monkeypatch.setattr(magics(ip).session, "client_factory", factory)


def test_the_cell_fills_as_the_model_writes_then_becomes_the_step(ip, monkeypatch):
    replies = {1: STEP1, 2: NO_CODE, 3: STEP2}
    # a piece each 0.06 s, an update at most each 0.1 s: every second piece is shown
    with StubChatServer(lambda n, _r: replies[n], piece_seconds=0.06) as server:
        streamed_model(monkeypatch, ip, server)
        comms = run_comms(ip, monkeypatch)
        ip.user_ns["context"] = "hello world"
        ip.run_cell("%%rlm --context context\nHow long?", store_history=True)
    assert ip.user_ns["rlm_answer"] == 11
    (run_comm,) = comms
    sent = run_comm.sent
    for msg in sent:
        check(msg, protocol.MESSAGE_TYPES[msg["type"]])
    kinds = [(m["type"], m.get("step"), m.get("state")) for m in sent]
    first = kinds.index(("step_added", 1, None))
    writing = [m for m in sent[:first] if m["type"] == "step_writing"]
    assert len(writing) >= 3 and all(m["state"] == "writing" for m in writing)
    sources = [m["source"] for m in writing]
    assert sources[0].startswith("# I") and sources[-1] == sent[first]["source"]
    assert all(b.startswith(a.rstrip("\n")[:-3]) for a, b in zip(sources, sources[1:], strict=False))
    assert any("\nn =" in s and "print(n)" not in s for s in sources)  # code mid-write
    assert writing[-1]["tokens"] > writing[0]["tokens"] and writing[-1]["tokens_per_second"] > 0
    # the reply without code: its cell was written, then dropped (no step cell)
    assert ("step_writing", 2, "dropped") in kinds and ("step_added", 2, None) not in kinds
    assert kinds.index(("step_writing", 2, "dropped")) < kinds.index(("step_added", 3, None))


def test_a_stop_while_the_model_writes_keeps_its_cell_marked_cut(ip, monkeypatch):
    with StubChatServer(lambda _r: LONG, piece_seconds=0.02) as server:
        streamed_model(monkeypatch, ip, server)
        comms = run_comms(ip, monkeypatch)
        ip.user_ns["context"] = "hello world"
        ip.run_cell("%%rlm --context context --max-seconds 1.5\nHow long?",
                    store_history=True)
        stream = server.ended_streams()[0]
    (run_comm,) = comms
    sent = run_comm.sent
    cut = [m for m in sent if m["type"] == "step_writing" and m["state"] == "cut"]
    assert len(cut) == 1 and cut[0]["step"] == 1
    assert sent.index(cut[0]) == len(sent) - 2 and sent[-1]["type"] == "run_finished"
    assert sent[-1]["stopped_by"] == "budget"
    assert stream["closed"] and stream["pieces"] < stream["of"]  # the request was ended
    assert LONG.startswith(cut[0]["source"][2:])  # "# " + the reply so far


def test_inline_without_the_extension_the_block_shows_the_reply_being_written(ip, monkeypatch):
    shown: list[tuple[dict, str, bool]] = []
    with StubChatServer(lambda n, _r: STEP1 if n == 1 else STEP2, piece_seconds=0.03) as server:
        streamed_model(monkeypatch, ip, server)
        from rlm_kernel.jupyter import frontend

        real = frontend.StepRenderer._render_inline

        def render(self, *, update, block=None):
            real(self, update=update, block=block)
            cur = block or self.current
            shown.append((cur["step"], cur.get("tokens"), update))

        monkeypatch.setattr(frontend.StepRenderer, "_render_inline", render)
        ip.user_ns["context"] = "hello world"
        ip.run_cell("%%rlm --context context\nHow long?", store_history=True)
    assert ip.user_ns["rlm_answer"] == 11
    step1 = [s for s in shown if s[0] == 1]
    # written first (a new block, then updates of it), then the step, in the same block
    assert step1[0][1] is not None and step1[0][2] is False
    assert all(update for _, _, update in step1[1:])
    assert any(tokens is None for _, tokens, _ in step1)  # the step itself, after
