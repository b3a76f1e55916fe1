"""MCP both ways on the real embedded model (slow: a minute or two each on 2 cores).

1. The model answers a question only a tool of the registry's ``mcp-server-git`` can
   answer: which file the last commit of a repository added.  The repository is made
   here from the interpreter's own standard library (the file is drawn from the ``json``
   package), and the isolated executor's sandbox cannot read it: the answer must come
   through the tool.
2. An MCP client (the SDK's) gets a right answer from ``rlm mcp serve`` on the embedded
   model: "which file defines the function X" over the ``json`` package's folder
   (:func:`evals.questions.defines_function_question`).
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


def test_the_embedded_model_answers_with_a_git_tool(tmp_path: Path, local_server):
    rng = random.Random(0)
    sources = sorted(p for p in (stdlib_dir() / "json").glob("*.py") if p.name != "__init__.py")
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
    question = (f"The git repository at {repo} has several commits. Which file did its most "
                "recent commit add? Answer with the file name.")
    res = RLM(max_iterations=6, mcp_servers=servers, executor="isolated").run(question)
    calls = [e for e in res.exchanges if e["role"] == "tool"]
    assert calls and all(e["server"] == "git" for e in calls), res.exchanges
    assert res.stopped_by == "final", (res.stopped_by, res.error)
    assert last.name in (res.answer or ""), (res.answer, [e.code for e in res.history])


def test_an_mcp_client_gets_a_right_answer_from_rlm_mcp_serve(local_server):
    from mcp import Client, StdioServerParameters

    q = defines_function_question("json", random.Random(1))

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
    assert data["stopped_by"] == "final", data
    assert q.check(data["answer"]), (q.expected, data["answer"])
    assert data["tokens"] > 0 and data["seconds"] > 0 and data["answer_source"]
