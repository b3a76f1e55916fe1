"""The sub-call cache (``c.RLM.cache``): litellm's own cache, asked by sub-calls only."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from bench.openai_stub import fake_provider
from rlm_kernel.models import LiteLLMClient, import_litellm
from rlm_kernel.models import cache as cache_module
from rlm_kernel.models.cache import configure_cache


@pytest.fixture()
def restore_cache():
    litellm = import_litellm()
    before = litellm.cache
    yield litellm
    configure_cache(None)
    litellm.cache = before
    cache_module._current["kind"] = ("memory", None) if before is not None else (None, None)


def test_cache_kinds(restore_cache, tmp_path):
    litellm = restore_cache
    configure_cache("memory")
    first = litellm.cache
    assert first is not None and first.mode.value == "default_off"
    assert type(first.cache).__name__ == "InMemoryCache"
    configure_cache("memory")
    assert litellm.cache is first  # same kind: kept
    configure_cache("disk", tmp_path / "c")
    assert type(litellm.cache.cache).__name__ == "DiskCache"
    assert (tmp_path / "c").is_dir() and litellm.cache.mode.value == "default_off"
    for off in (None, "off"):
        configure_cache(off)
        assert litellm.cache is None
    with pytest.raises(ValueError, match="cache must be one of"):
        configure_cache("redis-cluster")


def test_make_client_passes_cache_on():
    from rlm_kernel.models import make_client

    assert make_client("openai/gpt-4o-mini", cache=True).cache is True
    assert make_client("local", cache=True).cache is True  # the embedded model's client
    assert make_client("local").cache is False  # off unless asked


def test_the_disk_cache_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("RLM_CACHE_DIR", str(tmp_path))
    assert cache_module.cache_folder() == tmp_path / "litellm-cache"
    monkeypatch.delenv("RLM_CACHE_DIR")
    assert cache_module.cache_folder().parts[-2:] == ("rlm-kernel", "litellm-cache")


@pytest.fixture()
def server():
    """A chat-completions server that counts its requests and answers with their number."""
    with fake_provider(lambda n: f"reply {n}") as served:
        yield served


def test_a_cache_hit_needs_no_request_and_costs_nothing(server, restore_cache):
    """Also proves the cache-hit path imports (it needs fastapi, orjson, soundfile)."""
    api_base, seen = server
    configure_cache("memory")
    client = LiteLLMClient("openai/gpt-4o-mini", api_base=api_base, api_key="k", cache=True,
                           num_retries=0)
    ask = [{"role": "user", "content": f"cached? {time.time()}"}]
    first, second = (client.complete(ask, role="sub") for _ in range(2))
    assert len(seen) == 1 and second.text == first.text == "reply 1"
    assert (first.call.cached, second.call.cached) == (False, True)
    assert first.call.cost_usd > 0 and second.call.cost_usd == 0
    assert second.call.to_dict()["cached"] is True
    roots = [client.complete(ask, role="root").call.cached for _ in range(2)]
    assert roots == [False, False] and len(seen) == 3  # the root model's turns: never
    uncached = LiteLLMClient("openai/gpt-4o-mini", api_base=api_base, api_key="k")
    assert not uncached.complete(ask, role="sub").call.cached and len(seen) == 4


def test_a_streamed_cache_hit_is_marked_cached_and_sends_nothing(server, restore_cache):
    """The embedded model's client streams its sub-calls: litellm's cache answers a
    stream too, and the call must say so (cost 0, ``cached``)."""
    api_base, seen = server
    configure_cache("memory")
    client = LiteLLMClient("openai/gpt-4o-mini", api_base=api_base, api_key="k", cache=True,
                           num_retries=0)
    ask = [{"role": "user", "content": f"streamed and cached? {time.time()}"}]
    pieces: list[list[str]] = [[], []]
    first, second = (client.complete(ask, role="sub", stream=pieces[i].append)
                     for i in range(2))
    assert len(seen) == 1 and second.text == first.text == "reply 1"
    assert "".join(pieces[0]) == "".join(pieces[1]) == "reply 1"
    assert (first.call.cached, second.call.cached) == (False, True)
    assert first.call.cost_usd > 0 and second.call.cost_usd == 0


@pytest.mark.slow
def test_identical_sub_calls_come_from_the_cache_and_root_turns_never(local_server):
    configure_cache("memory")
    client = LiteLLMClient(f"openai/{local_server.model}", api_base=local_server.api_base,
                           api_key="local", priced=False, cache=True, max_tokens=12)
    ask = [{"role": "user", "content": f"Name one prime number. ({time.time()})"}]
    first = client.complete(ask, role="sub")
    started = time.perf_counter()
    second = client.complete(ask, role="sub")
    assert (first.call.cached, second.call.cached) == (False, True)
    assert second.text == first.text and second.call.cost_usd == 0
    assert time.perf_counter() - started < first.call.seconds
    roots = [client.complete(ask, role="root") for _ in range(2)]
    assert not any(r.call.cached for r in roots)
    other = client.complete([{"role": "user", "content": ask[0]["content"] + "!"}], role="sub")
    assert not other.call.cached


@pytest.mark.slow
def test_the_disk_cache_outlives_the_process(local_server, tmp_path):
    code = (
        "import sys\n"
        "from rlm_kernel.models import LiteLLMClient\n"
        "from rlm_kernel.models.cache import configure_cache\n"
        f"configure_cache('disk', {str(tmp_path)!r})\n"
        f"c = LiteLLMClient('openai/{local_server.model}', api_base={local_server.api_base!r}, "
        "api_key='local', priced=False, cache=True, max_tokens=8)\n"
        "r = c.complete([{'role': 'user', 'content': 'Say one colour.'}], role='sub')\n"
        "print(r.call.cached, repr(r.text))\n")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=300) for _ in range(2)]
    outs = [r.stdout.strip().splitlines()[-1] for r in runs]
    assert outs[0].startswith("False") and outs[1].startswith("True"), (outs, runs[0].stderr)
    assert outs[0].split(" ", 1)[1] == outs[1].split(" ", 1)[1]
