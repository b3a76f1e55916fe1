"""A client that goes while the embedded model is still reading its prompt (a long
context on a CPU) stops the model at once: llama.cpp's abort callback, set by the
server process (:mod:`rlm_kernel.models.local.abort`), ends the prompt's evaluation,
where llama-cpp-python's server alone would evaluate it to its end and write a first
token.  Measured on the server process (``/proc``), for a stopped client (SIGINT: the
``KeyboardInterrupt`` of Ctrl-C and of the stop button closes the request) and a killed
one (SIGKILL: a kernel restarted mid-step); then the server answers the next request."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid

import pytest

from bench.proc_cpu import cpu_seconds, cpu_until_idle
from rlm_kernel.models.local.server import LocalModelClient, ensure_server

pytestmark = pytest.mark.slow

IDLE_WITHIN = 1.0  # seconds of server CPU (and of time) after the client goes, at most

CLIENT = """
import sys
from rlm_kernel.models.local.server import LocalModelClient
ask = [{"role": "user", "content": sys.stdin.read()}]
print("asking", flush=True)
LocalModelClient("qwen2.5-coder-1.5b", max_tokens=20).complete(
    ask, stream=lambda piece: print(piece, end="", flush=True))
"""


def long_prompt() -> str:
    """About 3000 tokens (15 s or more of evaluation on 2 cores), new to the server's
    prompt cache from their first token on."""
    lines = [f"record {n}: {uuid.uuid4().hex}" for n in range(150)]
    return f"Session {uuid.uuid4()}.\n" + "\n".join(lines) + "\nWhich record is last?"


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["stopped", "killed"])
def test_a_client_gone_mid_prompt_stops_the_evaluation_within_a_second(how):
    pid = ensure_server().pid
    proc = subprocess.Popen([sys.executable, "-c", CLIENT], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        proc.stdin.write(long_prompt())
        proc.stdin.close()
        assert proc.stdout.readline() == "asking\n"
        before = cpu_seconds(pid)
        deadline = time.monotonic() + 30
        while cpu_seconds(pid) - before < 1.5 and time.monotonic() < deadline:
            time.sleep(0.1)  # the server is evaluating the prompt now
        assert cpu_seconds(pid) - before >= 1.5, "the server never started on the prompt"
        proc.send_signal(how)
        proc.wait(timeout=30)
        gone = cpu_seconds(pid)
        assert not proc.stdout.read()  # not one token came: it was cut mid-prompt
    finally:
        proc.kill()
        proc.wait()
    cpu, seconds = cpu_until_idle(pid, gone)
    assert cpu < IDLE_WITHIN and seconds < IDLE_WITHIN, (cpu, seconds)

    reply = LocalModelClient("qwen2.5-coder-1.5b", max_tokens=5).complete(
        [{"role": "user", "content": "Say OK."}])
    assert reply.text.strip()  # the model is whole for the next request
