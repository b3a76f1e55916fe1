"""A run whose root model streams (``stream_replies``, on by default), against the stub
OpenAI-compatible server streaming over real HTTP: observers get each reply as it is
written (``model_writing``, batched, in order, the last one whole), the record is the
one a run without streaming makes, and a stop or a spent time budget while the model
writes ends the request and keeps the reply as it was when it was cut."""

from __future__ import annotations

import pytest

from bench.openai_stub import StubChatServer
from rlm_kernel import RLM
from rlm_kernel.engine.events import ModelCall, ModelWriting, StepStarted
from rlm_kernel.engine.writing import CUT_MARK
from rlm_kernel.models import LiteLLMClient

STEP1 = ("I will count the lines first, then answer with the count.\n```repl\n"
         "n = len(context.splitlines())\nprint(n)\n```\n")
STEP2 = "The count is printed above.\n```repl\nFINAL(str(n))\n```\n"
LONG = "Let me think about this at length. " + " ".join(f"w{i}" for i in range(300))


def replies(n: int, _request: dict) -> str:
    return STEP1 if n % 2 == 1 else STEP2


def rlm(server: StubChatServer, observer=None, **cfg) -> RLM:
    lm = LiteLLMClient("openai/stub", api_base=server.api_base, api_key="sk-test",
                       num_retries=0, priced=False)
    return RLM(root_client=lm, sub_client=lm, observer=observer, **cfg)


def test_observers_see_each_reply_as_it_is_written_and_the_record_is_unchanged():
    events: list = []
    with StubChatServer(replies, piece_seconds=0.02) as server:
        streamed = rlm(server, events.append).run("How many lines?", context="a\nb\nc")
        plain = rlm(server, stream_replies=False).run("How many lines?", context="a\nb\nc")
    assert streamed.answer == plain.answer == "3"
    assert streamed.history.to_list()[0]["code"] == plain.history.to_list()[0]["code"]
    assert [(e["reasoning"], e["code"], e["output"]) for e in streamed.history.to_list()] == \
        [(e["reasoning"], e["code"], e["output"]) for e in plain.history.to_list()]
    for step, reply in ((1, STEP1), (2, STEP2)):
        kinds = [type(e) for e in events if getattr(e, "step", None) == step]
        assert kinds[0] is ModelCall and StepStarted in kinds
        writing = [e for e in events if isinstance(e, ModelWriting) and e.step == step]
        # between the call and the step, in order, batched (not one event per piece)
        assert kinds.index(StepStarted) > kinds.index(ModelWriting) > 0
        assert "".join(e.text for e in writing) == writing[-1].reply == reply
        assert [e.done for e in writing] == [False] * (len(writing) - 1) + [True]
        assert 2 <= len(writing) < writing[-1].pieces
        assert all(b.reply.startswith(a.reply) for a, b in zip(writing, writing[1:], strict=False))
        assert writing[-1].tokens_per_second > 0 and writing[-1].totals is None
    assert not any(isinstance(e, ModelWriting) for e in
                   _events_of(lambda obs: rlm_run_plain(obs)))


def _events_of(run) -> list:
    got: list = []
    run(got.append)
    return got


def rlm_run_plain(observer) -> None:
    with StubChatServer(replies) as server:
        rlm(server, observer, stream_replies=False).run("How many lines?", context="a\nb")


@pytest.mark.parametrize("how", ["interrupt", "budget"])
def test_a_stop_while_the_model_writes_ends_the_request_and_keeps_the_cut_reply(how):
    seen: list[ModelWriting] = []

    def observer(event) -> None:
        if isinstance(event, ModelWriting):
            seen.append(event)
            if how == "interrupt" and len(seen) == 3:
                raise KeyboardInterrupt  # as Ctrl-C or the stop button in the kernel

    with StubChatServer(lambda _r: LONG, piece_seconds=0.02) as server:
        cfg = {"max_seconds": 1.5} if how == "budget" else {}
        result = rlm(server, observer, **cfg).run("q?", context="text")
        stream = server.ended_streams()[0]
    assert result.stopped_by == how and result.answer is None
    assert stream["closed"] and stream["pieces"] < stream["of"]  # the request was ended
    cut = result.history.to_list()[-1]
    assert cut["code"] == "" and cut["output"].startswith(CUT_MARK)
    assert cut["reasoning"] == seen[-1].reply or cut["reasoning"].startswith(seen[-1].reply)
    assert LONG.startswith(cut["reasoning"]) and len(cut["reasoning"]) < len(LONG)
    assert f"after {len(cut['reasoning'])} characters" in cut["output"]
    # the run's conversation (what a trainer takes) ends with the reply as it was cut
    assert result.messages[-1] == {"role": "assistant", "content": cut["reasoning"]}
    assert result.messages[-2]["role"] == "user"


SUB_STEP = "I will ask the sub model.\n```repl\nanswer = llm_query('SUBQ: say a lot')\n```\n"


@pytest.mark.parametrize("executor", ["in-process", "isolated"])
def test_a_spent_time_budget_ends_a_sub_call_in_flight(executor):
    """A sub-call streams too: when the run's time is up while the sub model writes,
    its request is ended (the server sees its client go), not left to write on for a
    run that is over."""

    def reply(request: dict) -> str:
        return LONG if "SUBQ" in request["messages"][-1]["content"] else SUB_STEP

    with StubChatServer(reply, piece_seconds=0.02) as server:  # the sub reply: ~6 s
        result = rlm(server, max_seconds=2.5, executor=executor).run("q?", context="text")
        sub = [s for s in server.ended_streams() if s["of"] > 100]
    assert result.stopped_by == "budget" and result.answer is None
    assert len(sub) == 1 and sub[0]["closed"] and sub[0]["pieces"] < sub[0]["of"], sub


def test_a_time_budget_spent_before_the_first_piece_keeps_that_piece():
    """The model's time ran out while it read its prompt: the first piece is where the
    stop is seen, and the cut reply keeps it (the run's conversation ends with it, as a
    trainer's rollout needs)."""
    with StubChatServer(lambda _r: LONG, delay=1.5, piece_seconds=0.02) as server:
        result = rlm(server, max_seconds=1.0).run("q?", context="text")
    assert result.stopped_by == "budget"
    cut = result.history.to_list()[-1]
    assert cut["reasoning"] and LONG.startswith(cut["reasoning"])
    assert result.messages[-1] == {"role": "assistant", "content": cut["reasoning"]}
