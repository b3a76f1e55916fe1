"""keep_alive: the embedded model's server outlives the command that started it, is
shared by the next ones, says when it will stop, and stops itself when idle.

The fast cases drive :class:`IdleWatch` (the server process's clock) with a small ASGI
app; the slow ones run the real llama.cpp server in a cache folder of their own.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from bench.proc_cpu import cpu_seconds, cpu_until_idle
from rlm_kernel.models.local.keep_alive import (
    DEFAULT_KEEP_ALIVE,
    IdleWatch,
    default_keep_alive,
    describe_status,
    read_status,
)
from rlm_kernel.models.local.launcher import ServerSettings, server_command
from tests.faults import test_fault_server as fault_server
from tests.faults.test_fault_server import alive, state, wait_for

own_cache = fault_server.own_cache  # the fixture: a cache folder of the test's own

ROOT = Path(__file__).resolve().parents[2]
RLM = str(Path(sys.executable).with_name("rlm"))  # the command, as a user types it

# -- fast: the clock ------------------------------------------------------------------


class Held:
    """An ASGI app whose requests wait for ``release`` (a reply being written)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def __call__(self, scope, receive, send) -> None:
        await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


async def _request(app, path: str) -> list[dict]:
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    await app({"type": "http", "path": path, "method": "GET"}, receive, send)
    return sent


def test_the_clock_runs_only_while_no_request_is_in_flight():
    stops: list[float] = []
    held = Held()
    watch = IdleWatch(held, keep_alive=0.4, on_idle=lambda: stops.append(time.monotonic())
                      or True, tick=0.05)

    async def scenario() -> None:
        request = asyncio.ensure_future(_request(watch, "/v1/chat/completions"))
        await asyncio.sleep(0.8)  # twice keep_alive, the request in flight all along
        busy = watch.status()
        assert busy["in_flight"] == 1 and busy["stops_in"] is None and not stops
        assert describe_status(busy).startswith("busy (1 request)")
        held.release.set()
        await request
        ended = time.monotonic()
        status = json.loads((await _request(watch, "/rlm/keep_alive"))[1]["body"])
        assert status["in_flight"] == 0 and 0 < status["stops_in"] <= 0.4
        assert status["requests"] == 1  # asking the clock is not a use of the server
        await asyncio.sleep(0.7)
        assert len(stops) == 1 and 0.35 <= stops[0] - ended <= 0.65, stops

    asyncio.run(scenario())
    time.sleep(0.3)
    assert len(stops) == 1  # once


def test_a_stop_refused_now_starts_the_clock_again():
    answers = [False, True]
    calls: list[float] = []

    def on_idle() -> bool:
        calls.append(time.monotonic())
        return answers.pop(0)

    IdleWatch(Held(), keep_alive=0.2, on_idle=on_idle, tick=0.02)
    assert wait_for(lambda: len(calls) == 2, 3)
    assert calls[1] - calls[0] >= 0.18  # a whole keep_alive again, not the next tick
    time.sleep(0.3)
    assert len(calls) == 2


def test_keep_alive_zero_never_stops_the_server():
    stops: list[int] = []
    watch = IdleWatch(Held(), keep_alive=0, on_idle=lambda: bool(stops.append(1)), tick=0.02)
    time.sleep(0.2)
    assert not stops and watch.status()["stops_in"] is None
    assert describe_status(watch.status()) == (
        f"stops with the process that started it (pid {os.getppid()})")  # this one's parent


def test_the_default_is_five_minutes_unless_the_environment_says(monkeypatch):
    monkeypatch.delenv("RLM_KEEP_ALIVE", raising=False)
    assert default_keep_alive() == DEFAULT_KEEP_ALIVE == 300
    monkeypatch.setenv("RLM_KEEP_ALIVE", "42.5")
    assert default_keep_alive() == 42.5
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv("RLM_KEEP_ALIVE", bad)
        with pytest.raises(ValueError, match="RLM_KEEP_ALIVE"):
            default_keep_alive()


def test_the_server_command_carries_keep_alive():
    cmd = server_command(Path("/w.gguf"), "m", 1, ServerSettings(keep_alive=90))
    assert cmd[cmd.index("--keep_alive") + 1] == "90"
    assert "--keep_alive" in server_command(Path("/w.gguf"), "m", 1)


def test_a_server_that_does_not_answer_its_clock_is_said_so():
    assert read_status("http://127.0.0.1:9/v1", timeout=0.5) is None
    assert describe_status(None) == "its keep-alive clock did not answer"


# -- slow: the real server ------------------------------------------------------------

START = ("import sys\n"
         "from rlm_kernel.models.local.server import ensure_server\n"
         "info = ensure_server(keep_alive=float(sys.argv[1]))\n"
         "print(info.pid, info.port, flush=True)\n")


def _run(code: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                          text=True, timeout=300, cwd=ROOT, env=env or os.environ.copy())


def _rlm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([RLM, *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)


@pytest.mark.slow
def test_a_server_outlives_its_command_says_when_it_stops_and_stops_itself(own_cache):
    started = _run(START, "6")
    assert started.returncode == 0, started.stderr
    pid, port = map(int, started.stdout.split())
    assert alive(pid) and state(own_cache)["pid"] == pid  # its starter has exited
    status = _rlm("model", "status")
    line = [x for x in status.stdout.splitlines() if x.startswith("server:")][0]
    assert f"127.0.0.1:{port}/v1 (pid {pid}): idle" in line and "keep_alive 6 s" in line, line
    # another process finds it and starts none
    found = _run("from rlm_kernel.models.local import server\n"
                 "server.prepare = lambda *a, **k: exit('started a second server')\n"
                 "print(server.ensure_server(keep_alive=6).pid)\n")
    assert found.stdout.strip() == str(pid), found.stderr
    assert wait_for(lambda: not alive(pid), 6 + 5), "the idle server did not stop itself"
    assert state(own_cache) is None  # and took its state file with it
    assert "not running" in _rlm("model", "status").stdout


SUB_CALL = """
import sys
from rlm_kernel.models.local.server import LocalModelClient
lm = LocalModelClient("qwen2.5-coder-1.5b", keep_alive=60, max_tokens=600)
print("asking", flush=True)
lm.complete([{"role": "user", "content": sys.argv[1]}], role="sub")
"""


@pytest.mark.slow
def test_a_client_killed_mid_sub_call_leaves_the_kept_server_idle(own_cache):
    """No stream callback (a sub-call's): the embedded client streams anyway, so the
    server, which outlives the killed client, stops generating at once."""
    proc = subprocess.Popen([sys.executable, "-c", SUB_CALL,
                             "Write a long story about a lighthouse keeper."],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "asking"
        assert wait_for(lambda: state(own_cache) is not None, 120)
        info = state(own_cache)
        base = f"http://127.0.0.1:{info['port']}/v1"
        assert wait_for(lambda: (read_status(base) or {}).get("in_flight") == 1, 120)
        time.sleep(3)  # past the prompt: it writes
    finally:
        proc.kill()
        proc.wait()
    cpu, seconds = cpu_until_idle(info["pid"], cpu_seconds(info["pid"]))
    assert alive(info["pid"])  # kept up (keep_alive), but not generating:
    assert cpu < 2.5 and seconds < 2.5, (cpu, seconds)
    assert wait_for(lambda: (read_status(base) or {}).get("in_flight") == 0, 5)


FIRST_REQUEST = """
import sys, time
from rlm_kernel.models import import_litellm
import_litellm()  # what every command pays first (5 s on 2 cores), not the server's
print(time.time(), flush=True)
from rlm_kernel.cli.run import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_the_second_of_two_runs_finds_the_server_up_and_asks_at_once(own_cache,
                                                                       tmp_path):
    """The first ``rlm run`` starts the server and leaves it up; the second finds it and
    sends its first request without waiting for one.  Timed from the command's start
    once litellm is imported (its import, 5 s on 2 cores, is every command's cost, server
    or not).  Measured here: 0.9 to 1.5 s, spent in the run's own start (the isolated
    REPL, 0.4 s) and litellm's first request (0.5 s of imports it makes then); a server
    start alone takes 7 s (bench/bench_keep_alive.py)."""
    notes = tmp_path / "notes.txt"
    notes.write_text("alpha 1\nbeta 2\ngamma 3\n")
    env = {**os.environ, "RLM_KEEP_ALIVE": "120"}
    command = ["run", "--context", str(notes), "--max-iterations", "2"]
    first = _run(FIRST_REQUEST, *command, "What number is next to beta?", env=env)
    assert first.returncode == 0, first.stderr[-2000:]
    info = state(own_cache)
    assert info is not None and alive(info["pid"]), "the server stopped with its command"
    base = f"http://127.0.0.1:{info['port']}/v1"
    before = read_status(base)
    assert before is not None and before["in_flight"] == 0

    second = subprocess.Popen([sys.executable, "-c", FIRST_REQUEST, *command,
                               "What number is next to gamma?"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    try:
        assert second.stdout is not None
        began = float(second.stdout.readline())
        asked = None
        while asked is None and second.poll() is None:  # the server's request count
            clock = read_status(base)
            if clock is not None and clock["requests"] > before["requests"]:
                asked = time.time()
            time.sleep(0.02)
        assert second.wait(timeout=300) == 0, second.stderr.read()[-2000:]
    finally:
        second.kill()
        second.wait()
    assert asked is not None, "the second run sent no request to the kept server"
    assert asked - began < 2.5, asked - began  # no server start (7 s), no wait for one
    assert state(own_cache)["pid"] == info["pid"]  # the same server throughout


@pytest.mark.slow
def test_rlm_model_serve_stops_on_one_ctrl_c_mid_request(own_cache):
    serve = subprocess.Popen([RLM, "model", "serve"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             cwd=ROOT)
    try:
        assert serve.stdout is not None
        line = serve.stdout.readline()
        assert line.startswith("Serving"), line
        info = state(own_cache)
        base = f"http://127.0.0.1:{info['port']}/v1"
        body = json.dumps({"model": info["model"], "max_tokens": 2000, "stream": True,
                           "messages": [{"role": "user", "content": "Count to 1000."}]})
        request = urllib.request.Request(base + "/chat/completions", body.encode(),
                                         {"content-type": "application/json"})

        def ask() -> None:
            try:
                urllib.request.urlopen(request, timeout=300).read()
            except Exception:  # noqa: BLE001 - the server went mid-reply, as meant
                pass

        threading.Thread(target=ask, daemon=True).start()
        assert wait_for(lambda: (read_status(base) or {}).get("in_flight") == 1, 60)
        time.sleep(1)
        sent = time.monotonic()
        serve.send_signal(signal.SIGINT)  # one Ctrl-C
        serve.wait(timeout=10)
        took = time.monotonic() - sent
        assert serve.returncode == 0 and took < 3, (serve.returncode, took)
        assert not alive(info["pid"]) and state(own_cache) is None
    finally:
        serve.kill()
        serve.wait()
