"""``rlm mcp serve``: rlm-kernel as an MCP server, driven by the SDK's client (stdio and
streamable HTTP) and by the MCP Inspector's command line (npm, build/mcp-npm).  The
root model is the stub OpenAI-compatible server of bench/openai_stub.py, scripted: what
is tested is the server (its tool, progress, cancellation, resources), not an answer;
the embedded model's answer is tests/mcp_both_ways/test_mcp_embedded.py."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.openai_stub import StubChatServer
from tests.mcp_both_ways.ports import free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
RLM = str(Path(sys.executable).with_name("rlm"))
INSPECTOR = ROOT / "build" / "mcp-npm" / "node_modules" / ".bin" / "mcp-inspector"
TWO_STEPS = ["```repl\nwords = context.split()\nprint(len(words))\n```",
             "```repl\nFINAL(len(words))\n```"]


def scripted(replies: list[str]):
    """A stub model server replying ``replies`` in turn (then FINAL('out'))."""

    def reply(n: int, body: dict) -> str:
        return replies[n - 1] if n <= len(replies) else "```repl\nFINAL('out')\n```"

    return StubChatServer(reply, model="gpt-4o-mini", keep_alive=False)


def provider_env(stub: StubChatServer) -> dict[str, str]:
    """This process's environment with the stub as the OpenAI provider."""
    return {**os.environ, "OPENAI_API_BASE": stub.api_base,
            "OPENAI_API_KEY": "sk-test-not-a-key"}


def serve_args(*more: str) -> list[str]:
    return ["mcp", "serve", "--model", "openai/gpt-4o-mini", "--executor", "in-process",
            "--no-ground-answer", *more]


async def with_client(target, env, body):
    from mcp import Client, StdioServerParameters

    server = target if isinstance(target, str) else StdioServerParameters(
        command=RLM, args=list(target), env=env)
    async with Client(server) as client:
        return await body(client)


def test_tool_answers_with_progress_and_lists_the_run_as_a_resource(tmp_path: Path):
    (tmp_path / "doc.txt").write_text("one two three four five")

    async def body(client):
        tools = (await client.list_tools()).tools
        assert [t.name for t in tools] == ["rlm_task"]
        props = tools[0].input_schema["properties"]
        assert {"question", "context", "context_text", "model", "max_iterations",
                "max_seconds"} <= set(props)
        seen: list[tuple] = []

        async def progress(done, total, message):
            seen.append((done, total, message))

        result = await client.call_tool(
            "rlm_task", {"question": "How many words?", "context": str(tmp_path / "doc.txt")},
            progress_callback=progress)
        assert not result.is_error, result
        data = result.structured_content
        assert data["answer"] == "5" and data["steps"] == 2 and data["stopped_by"] == "final"
        assert data["answer_source"] and data["tokens"] == 2 * 15 and data["cost_usd"] >= 0
        assert data["seconds"] > 0 and data["trajectory"] == "rlm://runs/1"
        assert [(d, t) for d, t, _ in seen] == [(1, 12), (2, 12)]
        assert "step 1 done" in seen[0][2]
        listed = (await client.list_resources()).resources
        assert [str(r.uri) for r in listed] == ["rlm://runs/1"]
        text = (await client.read_resource("rlm://runs/1")).contents[0].text
        trajectory = json.loads(text)
        assert trajectory["answer"] == "5" and len(trajectory["trajectory"]) == 2
        bad = await client.call_tool("rlm_task", {"question": "x", "context": "/no/such/file"})
        assert bad.is_error and "context path not found: /no/such/file" in \
            bad.content[0].text

    with scripted(TWO_STEPS) as stub:
        asyncio.run(with_client(serve_args(), provider_env(stub), body))


def test_streamable_http_on_loopback():
    port = free_port()
    with scripted(TWO_STEPS) as stub:
        proc = subprocess.Popen([RLM, *serve_args("--http", "--port", str(port))],
                                env={**os.environ, **provider_env(stub)},
                                stderr=subprocess.PIPE, text=True)
        try:
            assert f"http://127.0.0.1:{port}/mcp" in proc.stderr.readline()
            wait_for_port(port)

            async def body(client):
                result = await client.call_tool(
                    "rlm_task", {"question": "How many words?", "context_text": "a b c"})
                return result.structured_content

            data = asyncio.run(with_client(f"http://127.0.0.1:{port}/mcp", None, body))
            assert data["answer"] == "3"
        finally:
            proc.terminate()
            proc.wait(15)


def task_processes() -> list[int]:
    out = subprocess.run(["pgrep", "-f", "rlm_kernel.cli.mcp_task"], capture_output=True,
                         text=True).stdout
    return [int(p) for p in out.split()]


def test_cancelling_a_task_stops_its_run_and_the_server_goes_on():
    """The client cancels a task while the model writes a long reply: the task's process
    is gone within seconds, the model's streamed request is closed before its end (the
    stub counts the pieces sent), and the next task is answered."""
    long_reply = "```repl\n" + "\n".join(f"v{i} = {i}" for i in range(3000)) + "\n```"

    def reply(n: int, body: dict) -> str:
        return long_reply if n == 1 else "```repl\nFINAL(len(context.split()))\n```"

    async def body(client):
        call = asyncio.ensure_future(client.call_tool(
            "rlm_task", {"question": "slow", "context_text": "a b"}))
        deadline = time.monotonic() + 60
        while not stub.streams and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert stub.streams and task_processes(), "the task never reached the model"
        await asyncio.sleep(1.0)
        t0 = time.monotonic()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        while task_processes() and time.monotonic() - t0 < 20:
            await asyncio.sleep(0.2)
        gone_after = time.monotonic() - t0
        assert not task_processes() and gone_after < 16, gone_after
        first = stub.ended_streams(10)[0]
        assert first["closed"] and first["pieces"] < first["of"], first
        result = await client.call_tool("rlm_task", {"question": "count",
                                                     "context_text": "a b c d"})
        return result.structured_content

    with StubChatServer(reply, model="gpt-4o-mini", keep_alive=False,
                        piece_seconds=0.02) as stub:
        data = asyncio.run(with_client(serve_args(), provider_env(stub), body))
    assert data["answer"] == "4"


def test_the_inspector_cli_lists_and_calls_the_tool():
    assert INSPECTOR.exists(), ("the MCP Inspector is not installed: `make setup` runs "
                                "scripts/install_mcp_servers.sh")
    with scripted(TWO_STEPS) as stub:
        env = provider_env(stub)
        # the Inspector gives its server a short environment: the provider by -e
        given = ["-e", f"OPENAI_API_BASE={stub.api_base}", "-e", "OPENAI_API_KEY=sk-test"]
        listed = subprocess.run([str(INSPECTOR), "--cli", *given, RLM, *serve_args(),
                                 "--method", "tools/list"], capture_output=True, text=True,
                                env=env, timeout=120)
        assert listed.returncode == 0, listed.stderr
        assert [t["name"] for t in json.loads(listed.stdout)["tools"]] == ["rlm_task"]
        called = subprocess.run([str(INSPECTOR), "--cli", *given, RLM, *serve_args(),
                                 "--method", "tools/call", "--tool-name", "rlm_task",
                                 "--tool-arg", "question=How many words?",
                                 "--tool-arg", "context_text=one two three four five"],
                                capture_output=True, text=True, env=env, timeout=180)
        assert called.returncode == 0, called.stderr
        data = json.loads(called.stdout)
        assert data["structuredContent"]["answer"] == "5", data


def test_a_client_gone_mid_task_ends_the_server_and_its_task_cleanly():
    """A stdio client that closes its pipes while a task runs (its process killed, say):
    the server says so in one line and exits 0, and the task's process is gone."""
    long_reply = "```repl\n" + "\n".join(f"v{i} = {i}" for i in range(3000)) + "\n```"
    with StubChatServer(lambda n, body: long_reply, model="gpt-4o-mini", keep_alive=False,
                        piece_seconds=0.02) as stub:
        proc = subprocess.Popen([RLM, *serve_args()], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=provider_env(stub))

        def send(message: dict) -> None:
            proc.stdin.write((json.dumps(message) + "\n").encode())
            proc.stdin.flush()

        send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "1"}}})
        assert b'"serverInfo"' in proc.stdout.readline()
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "rlm_task", "_meta": {"progressToken": 1},
                         "arguments": {"question": "q", "context_text": "a b"}}})
        deadline = time.monotonic() + 60
        while not stub.streams and time.monotonic() < deadline:
            time.sleep(0.2)
        assert stub.streams and task_processes(), "the task never reached the model"
        time.sleep(1.0)
        proc.stdout.close()
        proc.stdin.close()
        assert proc.wait(30) == 0
        err = proc.stderr.read().decode()
        assert "the client closed the connection; the task in progress was stopped" in err
        assert "internal error" not in err and "Traceback" not in err, err
    deadline = time.monotonic() + 20
    while task_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not task_processes()
