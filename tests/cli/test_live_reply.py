"""``rlm run`` on a terminal prints each reply as the model writes it (dimmed), and not
when its output is piped; the model is a real HTTP server streaming as OpenAI does
(``bench/openai_stub.py``)."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

from bench.openai_stub import StubChatServer
from rlm_kernel.cli import main

STEP1 = ("First I count the lines of the context.\n```repl\n"
         "n = len(context.splitlines())\nprint(n)\n```\n")
STEP2 = "Now the answer.\n```repl\nFINAL(str(n))\n```\n"


def replies(n: int, _request: dict) -> str:
    return STEP1 if n == 1 else STEP2


def command(tmp_path, server: StubChatServer) -> tuple[list[str], dict[str, str]]:
    data = tmp_path / "data.txt"
    data.write_text("a\nb\nc\n")
    env = {**os.environ, "OPENAI_API_BASE": server.api_base, "OPENAI_API_KEY": "sk-test"}
    return ([sys.executable, "-m", "rlm_kernel.cli", "run", "--context", str(data),
             "--model", "openai/stub", "How many lines?"], env)


def on_a_terminal(cmd: list[str], env: dict[str, str]) -> str:
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=slave, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the terminal's other end closed
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=120) == 0
    return out.decode().replace("\r\n", "\n")


def test_a_terminal_sees_the_reply_as_it_is_written(tmp_path):
    with StubChatServer(replies, piece_seconds=0.01) as server:
        raw = on_a_terminal(*command(tmp_path, server))
    assert "\x1b[2m" in raw  # dimmed while written
    out = re.sub(r"\x1b\[[0-9;]*m", "", raw)
    assert "── step 1 (the model writes) ──" in out
    written = out.index("First I count the lines")
    assert written < out.index("── step 1: its code runs ──") < out.index("│ 3")
    assert out.count("n = len(context.splitlines())") == 1  # not printed twice
    assert "Answer: 3" in out


def test_piped_output_has_no_live_reply(tmp_path, monkeypatch, capsys):
    with StubChatServer(replies, piece_seconds=0.01) as server:
        cmd, env = command(tmp_path, server)
        monkeypatch.setenv("OPENAI_API_BASE", env["OPENAI_API_BASE"])
        monkeypatch.setenv("OPENAI_API_KEY", env["OPENAI_API_KEY"])
        assert main(cmd[3:]) == 0  # in this process: its stdout is captured, not a TTY
    out = capsys.readouterr().out
    assert "\x1b[" not in out and "(the model writes)" not in out
    assert "── step 1 ──" in out and "  n = len(context.splitlines())" in out
