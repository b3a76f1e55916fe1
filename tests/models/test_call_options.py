"""One call's options (CallOptions) through the client wrappers: passed on unnamed,
read by the wrapper that changes one, refused when unknown."""

from __future__ import annotations

import dataclasses

import pytest

from rlm_kernel.models import CallOptions, ClientWrapper, Completion, LLMCall
from rlm_kernel.models.tracing import TracedClient


class Leaf:
    """A client that keeps the keywords of every call."""

    model, max_tokens, context_window, ledger, depth = "leaf", None, None, None, 0

    def __init__(self) -> None:
        self.keywords: list[dict] = []

    def check(self) -> None:
        pass

    def complete(self, messages, **options):
        self.keywords.append(options)
        return Completion(text="ok", call=LLMCall(model="leaf", role=options["role"]))


class Capped(ClientWrapper):
    """A wrapper that changes one option and names no other."""

    def call(self, messages, options):
        return super().call(messages, dataclasses.replace(options, max_tokens=7))


def test_wrappers_pass_every_option_on_and_change_only_their_own():
    leaf = Leaf()
    client = TracedClient(Capped(TracedClient(leaf)))
    client.complete([{"role": "user", "content": "hi"}], role="sub", stop=["x"],
                    temperature=0.5, seed=3)
    assert leaf.keywords == [{"role": "sub", "stop": ["x"], "max_tokens": 7,
                              "temperature": 0.5, "seed": 3}]


def test_an_unset_later_option_is_not_sent_so_older_clients_keep_working():
    leaf = Leaf()
    ClientWrapper(leaf).complete([{"role": "user", "content": "hi"}])
    assert leaf.keywords == [{"role": "root", "stop": None, "max_tokens": None,
                              "temperature": None}]


def test_an_unknown_option_is_a_type_error():
    with pytest.raises(TypeError):
        ClientWrapper(Leaf()).complete([], colour="blue")
    with pytest.raises(TypeError):
        CallOptions(colour="blue")  # type: ignore[call-arg]
