"""The embedded model streams: its pieces are the reply a plain call gets, and a stop
while it writes ends its request, so the server (llama-cpp-python's, which looks at its
client between two tokens) stops generating: its CPU falls to idle, measured on the
server process (``/proc``); so does the death of a client process.  Seen here: 0.1 to
1.4 s of CPU after the stop (``bench/bench_streaming.py``); the bound below, 2.5 s, is
far under the 19 s the 380 tokens left would take at 20 tokens a second."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench.proc_cpu import cpu_seconds, cpu_until_idle
from rlm_kernel.models import UsageLedger
from rlm_kernel.models.local.server import LocalModelClient, ensure_server

pytestmark = pytest.mark.slow

IDLE_WITHIN = 2.5  # seconds of server CPU (and of time) after a stop, at most

ASK = [{"role": "user", "content": "Write a Python function that tells whether a number is "
        "prime, with a docstring and three doctests."}]


def client(max_tokens: int) -> LocalModelClient:
    lm = LocalModelClient("qwen2.5-coder-1.5b", max_tokens=max_tokens)
    lm.ledger = UsageLedger()
    return lm


def test_a_stop_while_the_embedded_model_writes_idles_its_server_within_a_second():
    pid = ensure_server().pid
    pieces: list[str] = []

    def stop_after_twenty(piece: str) -> None:
        pieces.append(piece)
        if len(pieces) == 20:
            raise KeyboardInterrupt  # what Ctrl-C and the stop button raise

    with pytest.raises(KeyboardInterrupt):
        client(max_tokens=400).complete(ASK, stream=stop_after_twenty)
    cpu, seconds = cpu_until_idle(pid, cpu_seconds(pid))
    assert cpu < IDLE_WITHIN and seconds < IDLE_WITHIN, (cpu, seconds)  # not 380 tokens

    # temperature 0, the prompt's evaluation reused from the call before alike: the same
    # words.  (A prompt evaluated cold may give other words than one reused from the
    # server's cache, streamed or not: llama.cpp's sums differ in their last bits.)
    plain = client(max_tokens=30).complete(ASK)
    streamed = client(max_tokens=30)
    got: list[str] = []
    assert streamed.complete(ASK, stream=got.append).text == plain.text == "".join(got)
    call = streamed.ledger.calls[0]  # counted as the server counts (it sends no usage)
    assert (call.prompt_tokens, call.completion_tokens) == (plain.call.prompt_tokens,
                                                           plain.call.completion_tokens)


CLIENT = """
import sys
from rlm_kernel.models.local.server import LocalModelClient
ask = [{"role": "user", "content": sys.argv[1]}]
LocalModelClient("qwen2.5-coder-1.5b", max_tokens=400).complete(
    ask, stream=lambda piece: print(piece, end="", flush=True))
"""


def test_a_client_killed_while_the_model_writes_leaves_no_generation_running():
    """A kernel restarted mid-step: its process dies with the request open; the server
    stops at its next token."""
    pid = ensure_server().pid
    proc = subprocess.Popen([sys.executable, "-c", CLIENT, ASK[0]["content"]],
                            stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.read(40)  # it writes
    finally:
        proc.kill()
        proc.wait()
    cpu, seconds = cpu_until_idle(pid, cpu_seconds(pid))
    assert cpu < IDLE_WITHIN and seconds < IDLE_WITHIN, (cpu, seconds)
