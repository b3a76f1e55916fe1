"""``seed`` reaches litellm: a candidate's own, or the fixed one of a resample."""

from __future__ import annotations

import types

import pytest

import rlm_kernel.models.litellm_client as client_module
from rlm_kernel.models.litellm_client import SAMPLING_SEED, LiteLLMClient


@pytest.fixture()
def sent(monkeypatch):
    """litellm stood in for by an object that records each completion's arguments."""
    calls: list[dict] = []

    def completion(**kwargs):
        calls.append(kwargs)
        message = types.SimpleNamespace(content="ok")
        return types.SimpleNamespace(choices=[types.SimpleNamespace(message=message)],
                                     usage=types.SimpleNamespace(prompt_tokens=1,
                                                                 completion_tokens=1))

    monkeypatch.setattr(client_module, "_litellm", types.SimpleNamespace(completion=completion))
    return calls


HI = [{"role": "user", "content": "hi"}]


def test_a_given_seed_is_sent_with_the_call(sent):
    client = LiteLLMClient("openai/test", api_base="http://127.0.0.1:9/v1", priced=False)
    client.complete(HI, temperature=0.7, seed=3)
    client.complete(HI, seed=4)
    client.complete(HI, temperature=0.7)
    client.complete(HI)
    assert [(c["temperature"], c.get("seed")) for c in sent] == [
        (0.7, 3), (0.0, 4), (0.7, SAMPLING_SEED), (0.0, None)]
    assert all(c.get("drop_params") for c in sent[:3])  # a provider without seeds drops it
