"""MCP both ways: what the servers cost to start, what a tool call costs through the
wall against the SDK's own client, and how soon ``rlm mcp serve`` answers.

Run by hand (no model: the root model is scripted; about a minute on 2 cores):

    .venv/bin/python bench/bench_mcp.py [--calls 40] [--trials 3]

Three tables, each a median over ``--trials`` (the calls' table over ``--calls`` calls):

1. **Server start**: :meth:`rlm_kernel.mcp.MCPServers.start` for the registry's
   ``mcp-server-git`` (Python) and the npm reference filesystem server (Node.js), alone
   and together (they start at once), seconds from the call to their tools listed.
2. **One tool call** (``git_status`` on a small repository): the baseline is the SDK's
   own client (``mcp.Client.call_tool`` in one event loop); against it, a call made by
   model code in a run (``git.git_status(...)``, timed in the step's code) in-process and
   behind the isolated executor's wall (the worker's stub, the host's checks, schema,
   budget, redaction, record, the SDK call).  The target: at most +10 ms a call.
3. **``rlm mcp serve`` start-up**: seconds from starting the command (stdio) to its tool
   listed by the SDK's client.
4. With ``--embedded N`` (the embedded model; minutes): how often it is right, on N
   questions of each kind drawn from the interpreter's standard library: which file the
   last commit of a made repository added (through ``mcp-server-git``'s tools), and
   which file defines a function (asked of ``rlm mcp serve`` by an MCP client).  The
   tests assert the mechanism only; accuracy is this table's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlm_kernel import RLM  # noqa: E402
from rlm_kernel.mcp import MCPServers, load_servers  # noqa: E402
from rlm_kernel.models.scripted import ScriptedModel  # noqa: E402

RLM_COMMAND = str(Path(sys.executable).with_name("rlm"))
FILESYSTEM = ROOT / "build" / "mcp-npm" / "node_modules" / ".bin" / "mcp-server-filesystem"
GIT = {"command": sys.executable, "args": ["-m", "mcp_server_git"]}


def make_repo(folder: Path) -> Path:
    repo = folder / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "B", "GIT_AUTHOR_EMAIL": "b@example.org",
           "GIT_COMMITTER_NAME": "B", "GIT_COMMITTER_EMAIL": "b@example.org"}
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "one"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env)
    return repo


def start_seconds(servers: dict, trials: int) -> float:
    times = []
    for _ in range(trials):
        with MCPServers(load_servers({"mcpServers": servers})) as started:
            assert not started.problems, started.problems
            times.append(started.start_seconds)
    return statistics.median(times)


async def direct_calls(repo: Path, calls: int) -> list[float]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=GIT["command"], args=GIT["args"])
    async with Client(params) as client:
        await client.call_tool("git_status", {"repo_path": str(repo)})  # warm
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            await client.call_tool("git_status", {"repo_path": str(repo)})
            times.append(time.perf_counter() - t0)
        return times


def run_calls(repo: Path, calls: int, executor: str) -> list[float]:
    code = (f"import time, json\nr = {str(repo)!r}\ngit.git_status(repo_path=r)\nts = []\n"
            f"for _ in range({calls}):\n    t0 = time.perf_counter()\n"
            "    git.git_status(repo_path=r)\n    ts.append(time.perf_counter() - t0)\n"
            "print(json.dumps(ts))\nFINAL('done')")
    model = ScriptedModel([f"```repl\n{code}\n```"])
    res = RLM(root_client=model, sub_client=model, executor=executor, ground_answer=False,
              mcp_servers={"mcpServers": {"git": GIT}}).run("time the calls")
    return json.loads(res.history.entries[0].output.strip().splitlines()[-1])


async def serve_start() -> float:
    from mcp import Client, StdioServerParameters

    t0 = time.perf_counter()
    params = StdioServerParameters(command=RLM_COMMAND, args=["mcp", "serve"])
    async with Client(params) as client:
        tools = (await client.list_tools()).tools
        assert [t.name for t in tools] == ["rlm_task"]
        return time.perf_counter() - t0


def git_question(folder: Path, rng: random.Random) -> tuple[str, str]:
    """A repository of two commits, each adding a file of a stdlib package; the question
    and the expected file name (the last one's)."""
    from evals.questions import stdlib_dir

    packages = sorted(p for p in stdlib_dir().iterdir() if p.is_dir()
                      and p.name not in ("site-packages", "test", "idlelib")
                      and not p.name.startswith("_") and len(list(p.glob("*.py"))) >= 3)
    package = rng.choice(packages)
    first, last = rng.sample(sorted(package.glob("*.py")), 2)
    repo = folder / f"repo-{rng.randrange(10**9)}"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "B", "GIT_AUTHOR_EMAIL": "b@example.org",
           "GIT_COMMITTER_NAME": "B", "GIT_COMMITTER_EMAIL": "b@example.org"}
    subprocess.run(["git", "-C", str(repo), "init", "-q"], check=True, env=env)
    for source in (first, last):
        shutil.copy(source, repo / source.name)
        subprocess.run(["git", "-C", str(repo), "add", source.name], check=True, env=env)
        subprocess.run(["git", "-C", str(repo), "commit", "-qm", f"add {source.stem}"],
                       check=True, env=env)
    return f"What file was added by the last commit of the repository {repo}?", last.name


async def serve_question(question: str, context: str) -> dict:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=RLM_COMMAND, args=["mcp", "serve"],
                                   env=dict(os.environ))
    async with Client(params) as client:
        result = await client.call_tool("rlm_task", {"question": question,
                                                     "context": context})
        return result.structured_content or {}


def embedded_table(count: int, folder: Path) -> None:
    from evals.questions import defines_function_question

    rng = random.Random(20261129)
    right_git, right_serve, secs_git, secs_serve = 0, 0, [], []
    for _ in range(count):
        question, expected = git_question(folder, rng)
        t0 = time.perf_counter()
        res = RLM(mcp_servers={"mcpServers": {"git": GIT}}, max_iterations=6).run(question)
        secs_git.append(time.perf_counter() - t0)
        right_git += expected in (res.answer or "")
        q = defines_function_question(rng.choice(["email", "http", "json", "xml/dom"]), rng)
        t0 = time.perf_counter()
        data = asyncio.run(serve_question(q.text, q.context_path))
        secs_serve.append(time.perf_counter() - t0)
        right_serve += bool(q.check(data.get("answer")))
    print(f"\n4. The embedded model ({count} questions of each kind)\n")
    print("| question | right | mean seconds |")
    print("|---|---|---|")
    print(f"| last commit's file, through mcp-server-git | {right_git}/{count} "
          f"| {statistics.mean(secs_git):.1f} |")
    print(f"| which file defines X, through rlm mcp serve | {right_serve}/{count} "
          f"| {statistics.mean(secs_serve):.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--embedded", type=int, default=0, metavar="N",
                        help="also N questions of each kind on the embedded model")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp))
        files = {"command": str(FILESYSTEM), "args": [tmp]}
        print(f"\n1. Server start (median of {args.trials}), seconds\n")
        print("| servers | start and list tools |")
        print("|---|---|")
        for label, servers in (("mcp-server-git", {"git": GIT}),
                               ("server-filesystem (npm)", {"files": files}),
                               ("both, at once", {"git": GIT, "files": files})):
            print(f"| {label} | {start_seconds(servers, args.trials):.2f} |")

        direct = statistics.median(asyncio.run(direct_calls(repo, args.calls)))
        print(f"\n2. One tool call, git_status (median of {args.calls}), milliseconds\n")
        print("| path | ms a call | vs the SDK's client |")
        print("|---|---|---|")
        print(f"| SDK client, direct (baseline) | {direct * 1000:.2f} | - |")
        for executor in ("in-process", "isolated"):
            through = statistics.median(run_calls(repo, args.calls, executor))
            print(f"| model code, {executor} | {through * 1000:.2f} | "
                  f"{(through - direct) * 1000:+.2f} ms |")

        starts = [asyncio.run(serve_start()) for _ in range(args.trials)]
        print(f"\n3. rlm mcp serve: start to its tool listed (median of {args.trials})\n")
        print("| transport | seconds |")
        print("|---|---|")
        print(f"| stdio | {statistics.median(starts):.2f} |")
        if args.embedded:
            embedded_table(args.embedded, Path(tmp))


if __name__ == "__main__":
    main()
