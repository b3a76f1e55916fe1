"""MCP both ways on the real embedded model (slow: a minute or two each on 2 cores).

What is asserted is the mechanism, never whether the small model's answer is right
(``make test`` stays deterministic; how often it is right is ``bench/bench_mcp.py
--embedded``'s table):

1. A question only a tool of the registry's ``mcp-server-git`` can answer (which file the
   last commit of a repository added; the repository is made here from the interpreter's
   standard library, and the isolated executor's sandbox cannot read it): the model's
   code calls the server's tools through the host, each call is recorded with its
   result, and the run ends by its own rules.
2. An MCP client (the SDK's) asks ``rlm mcp serve`` on the embedded model "which file
   defines the function X" over the ``http`` package's folder
   (:func:`evals.questions.defines_function_question`): it gets the run's answer, its
   source, tokens, seconds, and one progress notification per step.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evals.questions import defines_function_question, stdlib_dir
from rlm_kernel import RLM

pytestmark = pytest.mark.slow

RLM_COMMAND = str(Path(sys.executable).with_name("rlm"))


def test_the_embedded_models_code_calls_a_git_tool(tmp_path: Path, local_server):
    rng = random.Random(0)
    sources = sorted(p for p in (stdlib_dir() / "email").glob("*.py") if p.name != "__init__.py")
    first, last = rng.sample(sources, 2)
    repo = tmp_path / "project"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.org",
           "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.org"}

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env)

    git("init", "-q")
    for source in (first, last):
        shutil.copy(source, repo / source.name)
        git("add", source.name)
        git("commit", "-qm", f"add {source.stem}")
    servers = {"mcpServers": {"git": {"command": sys.executable, "args": ["-m", "mcp_server_git"]}}}
    question = f"What file was added by the last commit of the repository {repo}?"
    res = RLM(max_iterations=4, mcp_servers=servers, executor="isolated").run(question)
    assert res.stopped_by != "error", res.error
    calls = [e for e in res.exchanges if e["role"] == "tool"]
    assert calls, [e.code for e in res.history.entries]
    for call in calls:  # made by the host, recorded with what model code got
        assert call["server"] == "git" and call["tool"].startswith("git_"), call
        assert ("response" in call) != ("error" in call), call
        assert call["arguments"].get("repo_path") == str(repo) or "error" in call, call
    assert calls[0]["step"] >= 1 and calls[0]["depth"] == 0


def test_an_mcp_client_gets_a_finished_run_from_rlm_mcp_serve(local_server):
    from mcp import Client, StdioServerParameters

    q = defines_function_question("http", random.Random(1))

    async def ask() -> dict:
        params = StdioServerParameters(command=RLM_COMMAND,
                                       args=["mcp", "serve", "--max-iterations", "8"],
                                       env=dict(os.environ))
        async with Client(params) as client:
            steps: list[float] = []

            async def progress(done, total, message):
                steps.append(done)

            result = await client.call_tool(
                "rlm_task", {"question": q.text, "context": q.context_path},
                progress_callback=progress)
            assert not result.is_error, result.content
            data = result.structured_content
            assert steps == list(range(1, data["steps"] + 1)), (steps, data)
            return data

    data = asyncio.run(ask())
    assert data["stopped_by"] != "error", data
    assert data["steps"] >= 1 and data["tokens"] > 0 and data["seconds"] > 0, data
    assert "qwen" in data["model"] and data["trajectory"] == "rlm://runs/1"  # embedded
    assert (data["answer"] is None) == (data["answer_source"] is None), data
