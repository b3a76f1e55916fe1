"""Warm start: what :func:`prewarm` sends, to which model, and that it never raises."""

from __future__ import annotations

import logging

import rlm_kernel.engine.session.warmup as warmup
from rlm_kernel.engine.prompts import SYSTEM_PROMPT
from rlm_kernel.models.usage import Completion, LLMCall


class _Recorder:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[list, dict]] = []
        self.fail = fail

    def complete(self, messages, **kwargs):
        self.calls.append((messages, kwargs))
        if self.fail:
            raise RuntimeError("server down")
        return Completion(text="", call=LLMCall(model="m", role="warmup"))


def _patch(monkeypatch, recorder):
    made = []

    def fake_make_client(model, **kwargs):
        made.append((model, kwargs))
        return recorder

    monkeypatch.setattr(warmup, "make_client", fake_make_client)
    return made


def test_embedded_model_gets_the_system_prompt_with_a_one_token_reply(monkeypatch):
    recorder = _Recorder()
    made = _patch(monkeypatch, recorder)
    warmup.prewarm(None).join(timeout=30)
    assert made == [(None, {"max_tokens": 1})]
    (messages, kwargs), = recorder.calls
    assert messages[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert messages == warmup.warm_messages()
    assert kwargs["max_tokens"] == 1


def test_named_embedded_model_is_warmed_by_its_name(monkeypatch):
    recorder = _Recorder()
    made = _patch(monkeypatch, recorder)
    warmup.prewarm("local/qwen2.5-coder-0.5b").join(timeout=30)
    assert made[0][0] == "local/qwen2.5-coder-0.5b" and len(recorder.calls) == 1


def test_a_provider_model_is_never_called(monkeypatch):
    recorder = _Recorder()
    made = _patch(monkeypatch, recorder)
    warmup.prewarm("openai/gpt-4.1-mini").join(timeout=60)
    assert made == [] and recorder.calls == []


def test_a_failing_warm_up_is_logged_not_raised(monkeypatch, caplog):
    _patch(monkeypatch, _Recorder(fail=True))
    with caplog.at_level(logging.WARNING, logger="rlm_kernel.engine.session.warmup"):
        thread = warmup.prewarm(None)
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert "warm start failed" in caplog.text and "server down" in caplog.text


def test_every_root_prompt_starts_with_the_warmed_head():
    from rlm_kernel.engine.prompts import build_messages

    messages = build_messages("Task: which file ...?", [], 8)
    assert messages[0] == warmup.warm_messages()[0]
    assert messages[1]["role"] == warmup.warm_messages()[1]["role"]
