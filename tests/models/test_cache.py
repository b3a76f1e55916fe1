"""The sub-call cache (``c.RLM.cache``): litellm's own cache, asked by sub-calls only."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from rlm_kernel.models import LiteLLMClient, import_litellm
from rlm_kernel.models.cache import configure_cache


def test_cache_kinds():
    litellm = import_litellm()
    configure_cache("memory")
    first = litellm.cache
    assert first is not None and first.mode.value == "default_off"
    configure_cache("memory")
    assert litellm.cache is first  # same kind: kept
    configure_cache(None)
    assert litellm.cache is None
    with pytest.raises(ValueError, match="cache must be one of"):
        configure_cache("redis-cluster")
    configure_cache("memory")


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
