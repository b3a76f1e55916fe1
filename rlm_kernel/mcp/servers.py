"""The MCP servers of one process: configuration, start, tool listing, calls, close.

The configuration is the ``mcpServers`` format the common MCP clients share (Claude
Desktop, VS Code, Cursor, jupyter-ai)::

    {"mcpServers": {
        "git": {"command": "uvx", "args": ["mcp-server-git"], "env": {"GIT_DIR": "..."}},
        "docs": {"type": "http", "url": "http://127.0.0.1:8931/mcp",
                 "headers": {"Authorization": "Bearer ..."}}}}

An entry with ``command`` is started as a child process spoken to over its stdin and
stdout; one with ``url`` over streamable HTTP.  A stdio server's environment is the MCP
SDK's short safe list (``HOME``, ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``, ``USER``:
:func:`mcp.client.stdio.get_default_environment`) plus what its entry's ``env`` names:
none of the host's keys.  What it writes on its stderr goes to a file of its own, whose
last line is quoted when it fails to start.

The SDK is asynchronous; the calls of a run are not.  :class:`MCPServers` runs one event
loop in a thread of its own; each server's connection is one task there, opened at
:meth:`MCPServers.start` and held until :meth:`MCPServers.close` (an anyio cancel scope
must be left by the task that entered it), and a call from any thread is handed to that
loop and waited for with a time limit.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TextIO, cast

__all__ = ["MCPServers", "MCPToolError", "ServerEntry", "ToolReply", "ToolSpec",
           "load_servers", "shared_servers"]

log = logging.getLogger(__name__)

START_SECONDS = 30.0
"""Seconds a server has to start and list its tools (a first ``npx`` or ``uvx`` fetches
its package; an installed one starts in about a second)."""
CLOSE_SECONDS = 5.0
"""Seconds the servers have to close at exit before their tasks are given up (the SDK
stops a stdio server's process in at most 2 s after its stdin closes, then signals it)."""


class MCPToolError(Exception):
    """A tool call that did not give a result: the tool reported an error, the server did
    not answer in time or is gone, the arguments do not fit the tool's input schema, the
    run's tool-call budget is used up.  Model code gets it with one readable message."""


@dataclass(frozen=True)
class ServerEntry:
    """One server of an ``mcpServers`` configuration.

    Attributes:
        name: the entry's key; the name model code reaches the server's tools by.
        command: the program of a stdio server (None for an HTTP one).
        args: its arguments.
        env: the environment variables it gets beyond the SDK's safe list.
        cwd: the folder it starts in, or None (this process's).
        url: the endpoint of a streamable HTTP server (None for a stdio one).
        headers: HTTP headers sent with every request (an ``Authorization``, ...).
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def key(self) -> str:
        """A text that is equal for two equal entries (the process's cache key)."""
        return json.dumps([self.name, self.command, list(self.args), dict(self.env),
                           self.cwd, self.url, dict(self.headers)], sort_keys=True)


@dataclass(frozen=True)
class ToolSpec:
    """One tool of a server, as its ``tools/list`` described it.

    Attributes:
        server: the server's entry name.
        name: the tool's name on the server.
        description: its description ("" when it has none).
        input_schema: the JSON Schema its arguments must meet (an object schema).
        output_schema: the JSON Schema of its structured result, or None.
    """

    server: str
    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None


@dataclass(frozen=True)
class ToolReply:
    """What a tool call gave back.

    Attributes:
        text: the text blocks of its content joined by newlines; other blocks (an image,
            an embedded resource) as one bracketed line each.
        structured: its structured content (a dict) when the tool has an output schema
            and sent one, else None (also for a plain value a server wrapped as
            ``{"result": value}``: its text says the same).
        is_error: the tool reported an error (``isError``): ``text`` says which.
        seconds: the call's time, seconds.
    """

    text: str
    structured: dict[str, Any] | None
    is_error: bool
    seconds: float


def _entry(name: str, raw: Any) -> ServerEntry:
    """One entry checked.

    Raises:
        ValueError: the entry is not a mapping, has neither ``command`` nor ``url``, or a
            field has the wrong type.
    """
    where = f"MCP server {name!r}"
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: an entry is an object with a command or a url")
    command, url = raw.get("command"), raw.get("url") or raw.get("serverUrl")
    kind = raw.get("type") or raw.get("transport")
    if kind in ("sse",):
        raise ValueError(f"{where}: the SSE transport is deprecated and not supported; "
                         "use a streamable HTTP url")
    if (command is None) == (url is None):
        raise ValueError(f"{where}: give either a command (a stdio server) or a url "
                         "(a streamable HTTP server)")
    args, env, headers = raw.get("args", []), raw.get("env", {}), raw.get("headers", {})
    if command is not None and (not isinstance(command, str) or not command):
        raise ValueError(f"{where}: command is a program name or path")
    if url is not None and (not isinstance(url, str) or "://" not in url):
        raise ValueError(f"{where}: url is an http:// or https:// address")
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ValueError(f"{where}: args is a list of strings")
    for label, table in (("env", env), ("headers", headers)):
        if not isinstance(table, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in table.items()):
            raise ValueError(f"{where}: {label} is an object of strings")
    cwd = raw.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise ValueError(f"{where}: cwd is a folder's path")
    return ServerEntry(name=name, command=command, args=tuple(args), env=dict(env),
                       cwd=cwd, url=url, headers=dict(headers))


def load_servers(spec: str | os.PathLike[str] | Mapping[str, Any] | None
                 ) -> list[ServerEntry]:
    """The entries of an ``mcpServers`` configuration.

    Args:
        spec: the path of a JSON file, or its parsed content: ``{"mcpServers": {name:
            entry}}`` or the inner ``{name: entry}`` (VS Code's ``"servers"`` key is read
            too); None or empty: no servers.

    Returns:
        The entries in the configuration's order.

    Raises:
        ValueError: the file is not JSON, or an entry or a name is not valid (the message
            names it).
        OSError: the file cannot be read.
    """
    if not spec:
        return []
    if isinstance(spec, Mapping):
        data: Any = spec
        source = "mcp_servers"
    else:
        path = Path(spec).expanduser()
        source = str(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{source}: not JSON ({exc})") from None
    if not isinstance(data, Mapping):
        raise ValueError(f"{source}: an object with an \"mcpServers\" object of servers")
    servers = data.get("mcpServers", data.get("servers", data))
    if not isinstance(servers, Mapping):
        raise ValueError(f"{source}: \"mcpServers\" is an object of servers by name")
    entries = []
    for name, raw in servers.items():
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
            raise ValueError(f"{source}: the server name {name!r} is not a Python name "
                             "(model code reaches its tools as NAME.tool(...): letters, "
                             "digits and _, not first)")
        entries.append(_entry(name, raw))
    return entries


def _reply(result: Any, seconds: float, output_schema: dict[str, Any] | None) -> ToolReply:
    """A :class:`ToolReply` from the SDK's ``CallToolResult`` of a tool with
    ``output_schema`` (or None)."""
    parts = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(block.text))
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {getattr(block, 'mime_type', '?')}, "
                         f"{len(getattr(block, 'data', '') or '')} base64 characters]")
        elif kind == "resource_link":
            parts.append(f"[resource link: {getattr(block, 'uri', '?')}]")
        elif kind == "resource":
            resource = getattr(block, "resource", None)
            text = getattr(resource, "text", None)
            parts.append(str(text) if text is not None
                         else f"[resource: {getattr(resource, 'uri', '?')}]")
        else:
            parts.append(f"[{kind or 'content'}]")
    structured = getattr(result, "structured_content", None)
    if output_schema is None or not isinstance(structured, dict):
        structured = None
    elif set(structured) == {"result"} and set(
            output_schema.get("properties") or {}) == {"result"}:
        structured = None  # a plain value the server wrapped (the SDKs' servers do): the text
    return ToolReply(text="\n".join(parts), structured=structured,
                     is_error=bool(getattr(result, "is_error", False)), seconds=seconds)


class _Connection:
    """One server's connection: the task that holds it open, its tools, its problem."""

    def __init__(self, entry: ServerEntry) -> None:
        self.entry = entry
        self.client: Any = None
        self.tools: list[ToolSpec] = []
        self.problem: str | None = None
        self.closing: asyncio.Event | None = None
        self.task: asyncio.Task[None] | None = None
        self.stderr: IO[str] | None = None
        self.last_words = ""  # the last line of its stderr when its connection ended

    def stderr_tail(self) -> str:
        """The last line the server wrote on its stderr, or ""."""
        if self.stderr is None:
            return self.last_words
        try:
            self.stderr.flush()
            self.stderr.seek(0)
            lines = [ln.strip() for ln in self.stderr.read()[-4000:].splitlines() if ln.strip()]
        except (OSError, ValueError):
            return ""
        return lines[-1][:300] if lines else ""


class MCPServers:
    """The started servers of a configuration, their tools, and calls to them.

    Args:
        entries: the servers (:func:`load_servers`).
        start_seconds: seconds each server has to start and list its tools
            (:data:`START_SECONDS`).

    Attributes:
        tools: the tools of the servers that started, by server name, in the servers'
            listing order.
        problems: why a server is not available, by name: one line each ("did not start:
            ...", "is gone: ..."); its tools are then not offered.
        start_seconds: how long :meth:`start` took, seconds.
    """

    def __init__(self, entries: list[ServerEntry], *,
                 start_seconds: float = START_SECONDS) -> None:
        self.entries = list(entries)
        self.timeout = start_seconds
        self.tools: dict[str, list[ToolSpec]] = {}
        self.problems: dict[str, str] = {}
        self.start_seconds = 0.0
        self._connections = {e.name: _Connection(e) for e in self.entries}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._lock = threading.Lock()

    # -- life ------------------------------------------------------------------------------
    def start(self) -> MCPServers:
        """Start every server at once and list its tools; a server that fails is put in
        :attr:`problems` (and logged as a warning), the others are kept.

        Returns:
            self.
        """
        with self._lock:
            if self._loop is not None or not self.entries:
                return self
            t0 = time.monotonic()
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever,
                                            name="rlm-mcp-servers", daemon=True)
            self._thread.start()
            futures = [asyncio.run_coroutine_threadsafe(self._open(c), self._loop)
                       for c in self._connections.values()]
            concurrent.futures.wait(futures)
            for conn in self._connections.values():
                if conn.problem is None:
                    self.tools[conn.entry.name] = conn.tools
                else:
                    self.problems[conn.entry.name] = conn.problem
                    log.warning("MCP server %s %s", conn.entry.name, conn.problem)
            self.start_seconds = time.monotonic() - t0
            return self

    async def _open(self, conn: _Connection) -> None:
        """Start ``conn``'s server in a task of its own and wait until it lists its tools,
        fails, or runs out of :attr:`timeout`."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        conn.closing = asyncio.Event()
        conn.task = asyncio.ensure_future(self._hold(conn, ready))
        try:
            await asyncio.wait_for(asyncio.shield(ready), self.timeout)
        except asyncio.TimeoutError:
            conn.problem = (f"did not start within {self.timeout:g} s"
                            + (f" (its last words: {tail})" if (tail := conn.stderr_tail())
                               else ""))
            conn.task.cancel()
        except Exception as exc:  # noqa: BLE001 - one line for the user, the rest go on
            tail = conn.stderr_tail()
            conn.problem = f"did not start: {_exception_line(exc)}" + (
                f" (its last words: {tail})" if tail else "")

    async def _hold(self, conn: _Connection, ready: asyncio.Future[None]) -> None:
        """Open the connection, list the tools, hold it until :meth:`close`."""
        from mcp import Client, StdioServerParameters

        entry = conn.entry
        try:
            if entry.command is not None:
                conn.stderr = tempfile.TemporaryFile("w+", encoding="utf-8",
                                                     prefix=f"rlm-mcp-{entry.name}-")
                target: Any = StdioServerParameters(
                    command=entry.command, args=list(entry.args), env=dict(entry.env),
                    cwd=entry.cwd)
                transport: Any = _stdio_transport(target, conn.stderr)
            else:
                transport = _http_transport(str(entry.url), dict(entry.headers))
            async with Client(transport) as client:
                conn.client = client
                conn.tools = await _list_tools(client, entry.name)
                ready.set_result(None)
                assert conn.closing is not None
                await conn.closing.wait()
        except BaseException as exc:  # noqa: BLE001 - told to start(); a later loss noted
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else
                                    RuntimeError(type(exc).__name__))
            elif not (conn.closing is not None and conn.closing.is_set()):
                conn.problem = f"is gone: {_exception_line(exc)}"
                log.warning("MCP server %s %s", entry.name, conn.problem)
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            conn.client = None
            if conn.stderr is not None:
                conn.last_words = conn.stderr_tail()
                conn.stderr.close()
                conn.stderr = None

    def close(self) -> None:
        """Close every connection (a stdio server's process is stopped) and the loop; safe
        to call twice."""
        with self._lock:
            if self._closed or self._loop is None:
                self._closed = True
                return
            self._closed = True
            loop = self._loop

        async def close_all() -> None:
            tasks = []
            for conn in self._connections.values():
                if conn.closing is not None:
                    conn.closing.set()
                if conn.task is not None:
                    tasks.append(conn.task)
            if tasks:
                _, pending = await asyncio.wait(tasks, timeout=CLOSE_SECONDS)
                for task in pending:
                    task.cancel()

        try:
            asyncio.run_coroutine_threadsafe(close_all(), loop).result(CLOSE_SECONDS + 5)
        except Exception as exc:  # noqa: BLE001 - closing at exit: logged, never raised
            log.warning("MCP servers did not close cleanly: %s", exc)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> MCPServers:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- calls -----------------------------------------------------------------------------
    def spec(self, server: str, tool: str) -> ToolSpec:
        """The :class:`ToolSpec` of ``server``'s ``tool``.

        Raises:
            MCPToolError: no such server or tool (the message names what there is).
        """
        if server not in self.tools:
            why = self.problems.get(server)
            raise MCPToolError(f"MCP server {server!r} " + (why if why else
                               "is not configured") + ".")
        for spec in self.tools[server]:
            if spec.name == tool:
                return spec
        names = ", ".join(s.name for s in self.tools[server])
        raise MCPToolError(f"MCP server {server!r} has no tool {tool!r} (its tools: {names})")

    def call(self, server: str, tool: str, arguments: dict[str, Any],
             timeout: float) -> ToolReply:
        """Call ``server``'s ``tool`` with ``arguments`` and wait for its result.

        Args:
            server: the server's name.
            tool: the tool's name.
            arguments: the tool's arguments (checked by the caller).
            timeout: seconds to wait; the request is cancelled after them.

        Returns:
            The :class:`ToolReply` (its ``is_error`` set when the tool reported one).

        Raises:
            MCPToolError: no such tool, the server is gone, did not answer within
                ``timeout``, or refused the request (a protocol error).
        """
        spec = self.spec(server, tool)
        conn = self._connections[server]
        if conn.problem is not None or conn.client is None or self._loop is None:
            raise MCPToolError(f"MCP server {server!r} {conn.problem or 'is closed'}.")
        client = conn.client
        t0 = time.monotonic()

        async def send() -> Any:
            return await client.call_tool(tool, arguments, read_timeout_seconds=timeout)

        future = asyncio.run_coroutine_threadsafe(asyncio.wait_for(send(), timeout),
                                                  self._loop)
        try:
            result = future.result(timeout + 1.0)
        except (TimeoutError, asyncio.TimeoutError, concurrent.futures.TimeoutError):
            future.cancel()
            raise MCPToolError(f"{server}.{tool} did not answer within {timeout:g} s") \
                from None
        except Exception as exc:  # noqa: BLE001 - a protocol error or a lost server
            from mcp.types import CONNECTION_CLOSED

            if getattr(exc, "code", None) == CONNECTION_CLOSED and conn.problem is None:
                tail = conn.stderr_tail()
                conn.problem = ("is gone: its connection closed" + (
                    f" (its last words: {tail})" if tail else ""))
                log.warning("MCP server %s %s", server, conn.problem)
                raise MCPToolError(f"{server}.{tool}: the server's connection closed during "
                                   "the call") from None
            if conn.problem is not None:
                raise MCPToolError(f"MCP server {server!r} {conn.problem}") from None
            raise MCPToolError(f"{server}.{tool}: {_exception_line(exc)}") from None
        return _reply(result, time.monotonic() - t0, spec.output_schema)


async def _list_tools(client: Any, server: str) -> list[ToolSpec]:
    """Every tool of ``client``'s server (all pages of ``tools/list``)."""
    specs: list[ToolSpec] = []
    cursor = None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor) if cursor else await client.list_tools()
        for tool in page.tools:
            schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
            specs.append(ToolSpec(server=server, name=tool.name,
                                  description=(tool.description or "").strip(),
                                  input_schema=dict(schema),
                                  output_schema=tool.output_schema))
        cursor = getattr(page, "next_cursor", None)
        if not cursor:
            break
    return specs


def _stdio_transport(params: Any, errlog: IO[str]) -> Any:
    """The SDK's stdio transport for ``params``, the server's stderr to ``errlog``."""
    from mcp.client.stdio import stdio_client

    return stdio_client(params, errlog=cast(TextIO, errlog))


def _http_transport(url: str, headers: dict[str, str]) -> Any:
    """The SDK's streamable HTTP transport for ``url`` (with ``headers`` when given)."""
    from mcp.client.streamable_http import streamable_http_client

    if not headers:
        return streamable_http_client(url)
    import httpx2

    return streamable_http_client(url, http_client=httpx2.AsyncClient(
        headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)))


def _exception_line(exc: BaseException) -> str:
    """One line for ``exc``: an exception group's first leaf, its type when it says
    nothing."""
    while isinstance(inner := getattr(exc, "exceptions", None), tuple) and inner \
            and isinstance(inner[0], BaseException):  # an exception group's first leaf
        exc = inner[0]
    text = " ".join(str(exc).split())
    return (f"{type(exc).__name__}: {text}" if text else type(exc).__name__)[:300]


_SHARED: dict[str, MCPServers] = {}
_SHARED_LOCK = threading.Lock()
_AT_EXIT: list[Any] = []  # the exit hook, once registered


def shared_servers(spec: str | os.PathLike[str] | Mapping[str, Any] | None
                   ) -> MCPServers | None:
    """The started servers of ``spec`` for this process: started on the first request,
    the same set after it (a kernel's runs, an ``rlm run``'s task, a batch worker's tasks
    share them), closed when the process exits.

    Args:
        spec: as for :func:`load_servers`.

    Returns:
        The servers, or None when ``spec`` names none.

    Raises:
        ValueError / OSError: as :func:`load_servers`.
    """
    entries = load_servers(spec)
    if not entries:
        return None
    key = json.dumps([e.key() for e in entries])
    with _SHARED_LOCK:
        servers = _SHARED.get(key)
        if servers is None:
            servers = _SHARED[key] = MCPServers(entries)
            if not _AT_EXIT:
                _AT_EXIT.append(atexit.register(_close_shared))
    return servers.start()


def _close_shared() -> None:
    """Close this process's shared servers (at exit)."""
    with _SHARED_LOCK:
        servers = list(_SHARED.values())
        _SHARED.clear()
    for one in servers:
        one.close()
