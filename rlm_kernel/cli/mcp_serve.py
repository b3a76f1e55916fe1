"""``rlm mcp serve``: rlm-kernel as an MCP server, built on the official SDK's
``MCPServer``, so that another agent (an IDE's, a chat client's) can hand a long-context
question to an RLM.

It offers one tool, ``rlm_task``: a question and a context (a file, a folder, an fsspec
URL, or text), the model and limits optional.  It returns the answer, how the answer was
reached (``answer_source``), the steps, tokens, cost and seconds.  Each task:

- runs in a process of its own (:mod:`rlm_kernel.cli.mcp_task`) with the server's
  settings (its command line's options) and the task's;
- sends one progress notification per finished step (when the client asked for
  progress with a ``progressToken``);
- is stopped when the client cancels the request: its process gets ``SIGINT``, which
  ends the run as Ctrl-C ends ``rlm run`` (the model's request is closed, the isolated
  REPL too), and ``SIGKILL`` if it is still there :data:`STOP_SECONDS` later;
- leaves its trajectory (``RLMResult.to_dict()``) as a resource ``rlm://runs/N`` (the
  last :data:`KEEP_RUNS` runs; an older one reads as gone).

Transports: stdio (the default: a client starts ``rlm mcp serve`` itself) or streamable
HTTP on a loopback port (``--http [--port N]``, at ``http://127.0.0.1:N/mcp``).
"""

# No ``from __future__ import annotations``: the SDK reads rlm_task's annotations at run
# time, and Context is imported inside build_server (the SDK is not loaded by the rlm
# command's other subcommands).
import argparse
import asyncio
import collections
import contextlib
import json
import logging
import os
import signal
import sys
import time
from typing import Any

__all__ = ["KEEP_RUNS", "STOP_SECONDS", "add_mcp_parser", "build_server", "mcp_command"]

log = logging.getLogger(__name__)

KEEP_RUNS = 20
"""Recent runs whose trajectories the server lists as resources."""
STOP_SECONDS = 15.0
"""Seconds a cancelled task's process has after ``SIGINT`` before it is killed."""
DEFAULT_PORT = 8765
"""The loopback port of ``--http`` when ``--port`` is not given."""

TOOL_DESCRIPTION = (
    "Answer a question about a long context with a Recursive Language Model: the context "
    "is kept as a variable in a Python REPL, and a model writes code to read it (search, "
    "split, ask sub-questions) until it can answer.  Give the context as a file or folder "
    "path or an fsspec URL (context), or as text (context_text).  Returns the answer, "
    "how it was reached (answer_source), steps, tokens, cost_usd and seconds.")


def add_mcp_parser(sub: Any) -> None:
    """Add ``rlm mcp serve`` to the ``rlm`` command's subparsers ``sub``."""
    from ..engine.frontends import add_setting_options

    mcp = sub.add_parser("mcp", help="rlm-kernel as an MCP server (rlm mcp serve)")
    action = mcp.add_subparsers(dest="mcp_action", required=True)
    serve = action.add_parser(
        "serve", help="serve the rlm_task tool over MCP (stdio; --http: streamable HTTP "
        "on 127.0.0.1)")
    serve.add_argument("--http", action="store_true",
                       help="streamable HTTP on a loopback port instead of stdio")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT,
                       help=f"with --http: the port on 127.0.0.1 (default {DEFAULT_PORT})")
    add_setting_options(serve)  # each task's defaults: --model, --max-seconds ...


def mcp_command(args: argparse.Namespace) -> int:
    """Run ``rlm mcp serve`` until its client goes (stdio: also mid-task, which stops the
    task) or Ctrl-C (HTTP); exit code 0."""
    from ..engine.frontends import config_overrides

    server = build_server(config_overrides(args))
    if args.http:
        print(f"rlm mcp serve: streamable HTTP at http://127.0.0.1:{args.port}/mcp "
              "(Ctrl-C stops it)", file=sys.stderr, flush=True)
        server.run("streamable-http", host="127.0.0.1", port=args.port)
    else:
        try:
            server.run()
        except Exception as exc:  # noqa: BLE001 - sorted below
            # the client closed its end while a task ran (its progress or result found
            # the pipe broken): the tasks were stopped on the way out, as when cancelled
            if not all(isinstance(e, (BrokenPipeError, ConnectionResetError))
                       for e in _leaves(exc)):
                raise
            print("rlm mcp serve: the client closed the connection; the task in progress "
                  "was stopped", file=sys.stderr, flush=True)
    return 0


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions an exception group holds, flattened (``exc`` itself when it is
    none)."""
    inner = getattr(exc, "exceptions", None)
    if not isinstance(inner, tuple) or not inner:
        return [exc]
    return [leaf for e in inner for leaf in _leaves(e)]


class _Runs:
    """The recent runs' trajectories, by number (the last :data:`KEEP_RUNS`)."""

    def __init__(self) -> None:
        self.count = 0
        self.kept: collections.OrderedDict[int, str] = collections.OrderedDict()

    def add(self, trajectory: dict[str, Any]) -> int:
        self.count += 1
        self.kept[self.count] = json.dumps(trajectory, default=str)
        while len(self.kept) > KEEP_RUNS:
            self.kept.popitem(last=False)
        return self.count

    def read(self, number: int) -> str:
        return self.kept.get(number) or json.dumps(
            {"error": f"run {number} is gone: the server keeps the last {KEEP_RUNS} runs"})


def build_server(settings: dict[str, Any]) -> Any:
    """The MCP server of ``rlm mcp serve``.

    Args:
        settings: every task's settings (``RLMConfig`` fields; a task's own model and
            limits override them).

    Returns:
        An ``mcp.server.MCPServer`` with the ``rlm_task`` tool and the runs' resources.
    """
    from mcp.server import MCPServer
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.server.mcpserver.resources import FunctionResource

    from .._version import __version__

    server = MCPServer("rlm-kernel", version=__version__,
                       instructions="rlm_task answers questions about long contexts "
                       "(files, folders, URLs, text) with a Recursive Language Model.")
    runs = _Runs()

    @server.tool(name="rlm_task", description=TOOL_DESCRIPTION)
    async def rlm_task(question: str, ctx: Context, context: str | None = None,
                       context_text: str | None = None, model: str | None = None,
                       max_iterations: int | None = None, max_seconds: float | None = None,
                       max_llm_calls: int | None = None) -> dict[str, Any]:
        """Run one RLM task (see the module docstring)."""
        task_settings = dict(settings)
        for key, value in (("model", model), ("max_iterations", max_iterations),
                           ("max_seconds", max_seconds), ("max_llm_calls", max_llm_calls)):
            if value is not None:
                task_settings[key] = value
        task = {"question": question, "context": context, "context_text": context_text,
                "settings": task_settings}

        async def progress(line: dict[str, Any]) -> None:
            steps = line.get("max_steps")
            tokens = int(line.get("prompt_tokens") or 0) + int(line.get("completion_tokens") or 0)
            await ctx.report_progress(
                float(line.get("step") or 0), float(steps) if steps else None,
                f"step {line.get('step')} done ({tokens:,} tokens, "
                f"{float(line.get('seconds') or 0):.1f} s)")

        outcome = await run_in_process(task, progress)
        if "error" in outcome:  # the client's one readable line (isError)
            raise ToolError(f"the task did not run: {outcome['error']}")
        number = runs.add(outcome["trajectory"])
        uri = f"rlm://runs/{number}"
        server.add_resource(FunctionResource(
            uri=uri, name=f"run-{number}", description=question[:200],
            mime_type="application/json", fn=lambda: runs.read(number)))
        summary = dict(outcome["summary"])
        tokens = int(summary.get("prompt_tokens") or 0) + int(summary.get("completion_tokens") or 0)
        return {"answer": summary.get("answer"), "answer_source": summary.get("answer_source"),
                "steps": summary.get("steps"), "tokens": tokens,
                "prompt_tokens": summary.get("prompt_tokens"),
                "completion_tokens": summary.get("completion_tokens"),
                "cost_usd": summary.get("cost_usd"), "seconds": summary.get("seconds"),
                "stopped_by": summary.get("stopped_by"), "error": summary.get("error"),
                "model": summary.get("model"), "trajectory": uri}

    return server


async def run_in_process(task: dict[str, Any], progress: Any) -> dict[str, Any]:
    """Run ``task`` in a :mod:`rlm_kernel.cli.mcp_task` process; ``await progress(line)``
    for each step's line; the outcome.  Cancelled: the process gets ``SIGINT``, then
    ``SIGKILL`` after :data:`STOP_SECONDS`, and the cancellation goes on.

    Raises:
        asyncio.CancelledError: the request was cancelled (the process is gone by then).
    """
    progress_r, progress_w = os.pipe()
    result_r, result_w = os.pipe()
    t0 = time.monotonic()
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "rlm_kernel.cli.mcp_task", str(progress_w), str(result_w),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL, pass_fds=(progress_w, result_w),
            start_new_session=True)  # a Ctrl-C of the server's terminal is not the task's
    finally:
        os.close(progress_w)
        os.close(result_w)
    loop = asyncio.get_running_loop()
    try:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(task).encode())
        await proc.stdin.drain()
        proc.stdin.close()
        lines = await _reader(loop, progress_r)
        while line := await lines.readline():
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict):
                try:
                    await progress(data)
                except Exception as exc:  # noqa: BLE001 - a client gone mid-task
                    log.debug("progress not sent: %s", exc)
        result = await (await _reader(loop, result_r)).read()
        await proc.wait()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
        await asyncio.shield(_end(proc))
        raise
    log.info("task done in %.1f s (exit %s)", time.monotonic() - t0, proc.returncode)
    try:
        outcome = json.loads(result)
    except ValueError:
        return {"error": f"the task's process ended (exit {proc.returncode}) without a "
                         "result", "stopped_by": "error"}
    return outcome if isinstance(outcome, dict) else {"error": "malformed result"}


async def _end(proc: Any) -> None:
    """Wait for a signalled task's process to end; kill it after :data:`STOP_SECONDS`."""
    try:
        await asyncio.wait_for(proc.wait(), STOP_SECONDS)
    except asyncio.TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


async def _reader(loop: asyncio.AbstractEventLoop, fd: int) -> asyncio.StreamReader:
    """An asyncio reader of the pipe end ``fd`` (closed with it)."""
    reader = asyncio.StreamReader(limit=1 << 30)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                 os.fdopen(fd, "rb", buffering=0))
    return reader
