"""MCP servers as tool sources: real servers (the registry's ``mcp-server-git`` on a git
repository the test makes; ``slow_server.py`` on the SDK for a slow tool, a crash and the
server's environment) started through the SDK's client, their tools called by model code
in both executors.  The root model is scripted: these tests are about the loop's
mechanics (who makes the call, what is checked, counted, recorded and replayed); the
embedded model's use of a tool is tests/mcp_both_ways/test_mcp_embedded.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlm_kernel import RLM
from rlm_kernel.mcp import MCPServers, load_servers
from rlm_kernel.models.scripted import ScriptedModel
from tests.mcp_both_ways.ports import free_port, wait_for_port

HERE = Path(__file__).parent
SLOW = [sys.executable, str(HERE / "slow_server.py")]
FILESYSTEM = HERE.parents[1] / "build" / "mcp-npm" / "node_modules" / ".bin" / \
    "mcp-server-filesystem"
EXECUTORS = ["in-process", "isolated"]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env={**os.environ, "GIT_AUTHOR_NAME": "Ada",
                                          "GIT_AUTHOR_EMAIL": "ada@example.org",
                                          "GIT_COMMITTER_NAME": "Ada",
                                          "GIT_COMMITTER_EMAIL": "ada@example.org"}).stdout


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository of three commits; the last one changes ``parser.py`` only."""
    root = tmp_path_factory.mktemp("repo")
    git(root, "init", "-q")
    (root / "README.md").write_text("# demo\n")
    git(root, "add", ".")
    git(root, "commit", "-qm", "start the project")
    (root / "cli.py").write_text("print('cli')\n")
    git(root, "add", ".")
    git(root, "commit", "-qm", "add the command line")
    (root / "parser.py").write_text("def parse(text):\n    return text.split()\n")
    git(root, "add", ".")
    git(root, "commit", "-qm", "parse words")
    os.chmod(root, 0o755)
    return root


def servers_config(**more: dict) -> dict:
    return {"mcpServers": {"git": {"command": sys.executable, "args": ["-m", "mcp_server_git"]},
                           **more}}


def run_code(code: str, executor: str, **options) -> object:
    """One run whose single step runs ``code`` (the scripted root model's reply)."""
    model = ScriptedModel([f"```repl\n{code}\n```"])
    rlm = RLM(root_client=model, sub_client=model, executor=executor, **options)
    return rlm.run("use the tools")


def test_configuration_is_checked():
    with pytest.raises(ValueError, match="either a command"):
        load_servers({"mcpServers": {"x": {}}})
    with pytest.raises(ValueError, match="not a Python name"):
        load_servers({"mcpServers": {"my-git": {"command": "x"}}})
    with pytest.raises(ValueError, match="args is a list"):
        load_servers({"mcpServers": {"x": {"command": "x", "args": "a b"}}})
    entries = load_servers({"servers": {"a": {"command": "x"},
                                        "b": {"type": "http", "url": "http://127.0.0.1:1/mcp"}}})
    assert [(e.name, e.command, e.url) for e in entries] == [
        ("a", "x", None), ("b", None, "http://127.0.0.1:1/mcp")]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_model_code_calls_a_tool_through_the_host(repo: Path, executor: str):
    code = (f"log = git.git_log(repo_path={str(repo)!r}, max_count=1)\nprint(log)\n"
            "FINAL(log)")
    res = run_code(code, executor, mcp_servers=servers_config())
    assert res.stopped_by == "final"
    assert "parse words" in res.answer and "add the command line" not in res.answer
    tool = [e for e in res.exchanges if e["role"] == "tool"]
    assert [(e["server"], e["tool"], e["arguments"]) for e in tool] == [
        ("git", "git_log", {"repo_path": str(repo), "max_count": 1})]
    assert "parse words" in tool[0]["response"] and tool[0]["step"] == 1


@pytest.mark.parametrize("executor", EXECUTORS)
def test_the_reference_filesystem_server_from_npm(tmp_path: Path, executor: str):
    """@modelcontextprotocol/server-filesystem (Node.js) on one folder: a listing, a read,
    and its refusal of a path outside the folder as one MCPToolError."""
    assert FILESYSTEM.exists(), ("@modelcontextprotocol/server-filesystem is not installed: "
                                 "`make setup` runs scripts/install_mcp_servers.sh")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "notes.md").write_text("# Notes\nthe launch is on Tuesday\n")
    (tmp_path / "secret.txt").write_text("not for the model")
    config = {"mcpServers": {"files": {"command": str(FILESYSTEM), "args": [str(shared)]}}}
    code = (f"print(files.list_directory(path={str(shared)!r}))\n"
            f"print(files.read_text_file(path={str(shared / 'notes.md')!r}))\n"
            f"try:\n    files.read_text_file(path={str(tmp_path / 'secret.txt')!r})\n"
            "except Exception as exc:\n    print(type(exc).__name__, '|', exc)\nFINAL('ok')")
    res = run_code(code, executor, mcp_servers=config)
    out = res.history.entries[0].output
    assert "[FILE] notes.md" in out
    assert "the launch is on Tuesday" in out
    refused = [line for line in out.splitlines() if line.startswith("MCPToolError |")]
    assert len(refused) == 1 and "files.read_text_file failed:" in refused[0], out
    assert "not for the model" not in out


@pytest.mark.parametrize("executor", EXECUTORS)
def test_arguments_outside_the_schema_are_refused_unsent(repo: Path, executor: str):
    code = ("try:\n    git.git_log(repo_path=5)\nexcept Exception as exc:\n"
            "    print(type(exc).__name__, '|', exc)\n"
            "try:\n    git.git_show(repo_path='.')\nexcept Exception as exc:\n"
            "    print(type(exc).__name__, '|', exc)\n"
            "try:\n    git.git_log(repo_path='.', context_lines=0)\nexcept Exception as exc:\n"
            "    print(type(exc).__name__, '|', exc)\nFINAL('done')")
    res = run_code(code, executor, mcp_servers=servers_config())
    out = res.history.entries[0].output
    assert "MCPToolError | git.git_log: the arguments do not fit its input schema, not " \
           "sent: repo_path: 5 is not of type 'string'" in out
    assert "'revision' is a required property" in out
    assert ("git.git_log: the arguments do not fit its input schema, not sent: unexpected "
            "argument 'context_lines' (its arguments: repo_path, max_count, "
            "start_timestamp, end_timestamp)") in out
    assert not [e for e in res.exchanges if e["role"] == "tool"]  # nothing was sent


@pytest.mark.parametrize("executor", EXECUTORS)
def test_tool_call_budget(repo: Path, executor: str):
    code = (f"r = {str(repo)!r}\nprint(len(git.git_status(repo_path=r)) > 0)\n"
            "print(len(git.git_branch(repo_path=r, branch_type='local')) > 0)\n"
            "try:\n    git.git_log(repo_path=r)\nexcept Exception as exc:\n"
            "    print(type(exc).__name__, '|', exc)\nFINAL('done')")
    res = run_code(code, executor, mcp_servers=servers_config(), max_tool_calls=2)
    out = res.history.entries[0].output
    assert out.splitlines()[:2] == ["True", "True"]
    assert ("MCPToolError | git.git_log: the run's budget of 2 tool calls (max_tool_calls) "
            "is used up") in out
    assert res.stopped_by == "final"  # the run goes on without tools


@pytest.mark.parametrize("executor", EXECUTORS)
def test_slow_tool_times_out_and_a_crash_is_one_error(executor: str):
    config = {"mcpServers": {f"slow_{executor.replace('-', '_')}": {
        "command": SLOW[0], "args": SLOW[1:]}}}
    name = next(iter(config["mcpServers"]))
    code = (f"print({name}.wait(seconds=0.1))\n"
            f"try:\n    {name}.wait(seconds=30)\nexcept Exception as exc:\n"
            "    print(type(exc).__name__, '|', exc)\n"
            f"try:\n    {name}.crash()\nexcept Exception as exc:\n"
            "    print(type(exc).__name__, '|', exc)\n"
            f"try:\n    {name}.wait(seconds=0)\nexcept Exception as exc:\n"
            "    print(type(exc).__name__, '|', exc)\nFINAL('done')")
    t0 = time.monotonic()
    res = run_code(code, executor, mcp_servers=config, tool_timeout=2)
    lines = res.history.entries[0].output.splitlines()
    assert lines[0] == "waited 0.1 s"
    assert lines[1] == f"MCPToolError | {name}.wait did not answer within 2 s"
    assert lines[2] == (f"MCPToolError | {name}.crash: the server's connection closed "
                        "during the call"), lines
    assert lines[3] == f"MCPToolError | MCP server {name!r} is gone: its connection closed.", \
        lines
    assert time.monotonic() - t0 < 25
    assert res.stopped_by == "final"


def test_a_server_that_fails_to_start_is_one_line_and_the_rest_go_on(repo: Path, caplog):
    config = servers_config(broken={"command": "/bin/sh",
                                    "args": ["-c", "echo cannot open the index >&2; exit 3"]},
                            missing={"command": "/nonexistent/mcp-server"})
    with MCPServers(load_servers(config)) as servers:
        assert sorted(servers.tools) == ["git"]
        assert servers.problems["missing"].startswith("did not start: FileNotFoundError")
        assert "cannot open the index" in servers.problems["broken"]
        assert "\n" not in servers.problems["broken"]
    code = ("print(sorted(n for n in ('git', 'broken', 'missing') if n in globals()))\n"
            "FINAL('ok')")
    res = run_code(code, "in-process", mcp_servers=config)
    assert res.history.entries[0].output.strip() == "['git']"


def test_server_environment_holds_only_what_its_entry_names(monkeypatch):
    monkeypatch.setenv("RLM_TEST_HOST_SECRET", "host-only-value-123456")
    config = {"mcpServers": {"slowenv": {"command": SLOW[0], "args": SLOW[1:],
                                         "env": {"GREETING": "hello"}}}}
    code = ("print(slowenv.env(name='RLM_TEST_HOST_SECRET'))\n"
            "print(slowenv.env(name='GREETING'))\nFINAL('ok')")
    res = run_code(code, "isolated", mcp_servers=config)
    assert res.history.entries[0].output.splitlines() == ["(unset)", "hello"]


def test_a_secret_in_a_result_is_redacted(monkeypatch):
    config = {"mcpServers": {"slowkey": {"command": SLOW[0], "args": SLOW[1:],
                                         "env": {"SERVICE_API_KEY": "sk-mcp-0123456789abcdef"}}}}
    code = ("v = slowkey.env(name='SERVICE_API_KEY')\nprint(v)\n"
            "print('sk-mcp' in v)\nFINAL('ok')")
    res = run_code(code, "isolated", mcp_servers=config)
    out = res.history.entries[0].output
    assert "sk-mcp-0123456789abcdef" not in out and out.splitlines()[1] == "False"
    assert "sk-mcp-0123456789abcdef" not in json.dumps(res.exchanges)


def test_streamable_http_server(tmp_path: Path):
    port = free_port()
    proc = subprocess.Popen([*SLOW, "http", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port)
        config = {"mcpServers": {"remote": {"type": "http",
                                            "url": f"http://127.0.0.1:{port}/mcp",
                                            "headers": {"X-Client": "rlm-kernel-test"}}}}
        for executor in EXECUTORS:
            res = run_code("FINAL(remote.wait(seconds=0))", executor, mcp_servers=config)
            assert res.answer == "waited 0 s"
    finally:
        proc.terminate()
        proc.wait(10)


def test_replay_answers_tool_calls_from_the_record(repo: Path):
    code = f"FINAL(git.git_log(repo_path={str(repo)!r}, max_count=1))"
    first = run_code(code, "in-process", mcp_servers=servers_config())
    replayed = RLM(replay=first, executor="in-process").run("use the tools")
    assert replayed.answer == first.answer and "parse words" in replayed.answer
    assert replayed.diverged_at is None


def test_exported_notebook_reruns_tool_calls_with_no_server(repo: Path, tmp_path: Path):
    """The exported notebook's ``%%rlm recorded`` cell holds the run's tool calls: re-run
    top to bottom in an rlm kernel with no ``mcp_servers`` (no server runs), the step's
    call to ``git.git_log`` is answered from it and prints what it printed live."""
    import nbformat
    from nbclient import NotebookClient

    from rlm_kernel.export import export_run

    code = (f"log = git.git_log(repo_path={str(repo)!r}, max_count=1)\n"
            "print(log.strip().splitlines()[-1])\nFINAL(log)")
    res = run_code(code, "in-process", mcp_servers=servers_config())
    path = tmp_path / "run.ipynb"
    nb = export_run(res, path)
    recorded = [c for c in nb.cells if c.metadata.rlm["role"] == "recorded"]
    assert '"role": "tool"' in recorded[0].source
    rerun = nbformat.read(path, as_version=4)
    NotebookClient(rerun, timeout=120, kernel_name="rlm").execute()
    steps = [c for c in rerun.cells if c.metadata.rlm["role"] == "step"]
    printed = "".join(o.get("text", "") for o in steps[0].outputs if o.output_type == "stream")
    assert printed.strip() == "Message: parse words", steps[0].outputs
