"""The MCP tools of one run: what model code may call, and every call made by the host.

A run with ``mcp_servers`` set gets, for each server that started, a
:class:`~rlm_kernel.mcp.groups.ToolGroup` under the server's name (``git.git_log(...)``)
and the reserved host function ``mcp_call(server, tool, arguments)`` that the groups
call.  :meth:`RunTools.call` is that function; in order, it

1. refuses a call once the run is over or out of budget (the guard's ``BudgetExceeded``,
   as for ``llm_query``) and a call past ``max_tool_calls`` (an :class:`MCPToolError`:
   the run goes on without tools);
2. answers from the record when the run replays one (:func:`recorded_tools`), else
3. checks the arguments against the tool's input schema (JSON data, no argument the
   schema does not name unless it allows more, then the schema with ``jsonschema``): a
   refused call is never sent;
4. makes the call on the host (:meth:`~rlm_kernel.mcp.MCPServers.call`) within
   ``tool_timeout`` and the run's time left;
5. redacts the result as every output is (the values of the host's secrets, the
   servers' own ``env`` and ``headers`` values among them), records it in the run's
   exchanges (role ``tool``: replay and the exported notebook answer from it) and tells
   the step's cell (a ``step_notice``, reason ``tool_call``);
6. returns the result: the tool's structured content when it has an output schema, else
   its text; a tool's error is raised as one :class:`MCPToolError`.

Imports nothing from Jupyter.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...mcp import MCPServers, MCPToolError, ToolSpec, shared_servers
from ...mcp.groups import CALL_NAME, ToolGroup
from ...redaction import Redactor, redact_data, remember_secret
from ..budget import BudgetGuard
from ..events import Event, StepNotice
from ..replay.recording import Recorder

__all__ = ["CALL_NAME", "RunTools", "describe_tools", "open_servers", "recorded_tools"]

log = logging.getLogger(__name__)

RESULT_CHARS = 50_000
"""Characters of a tool's text result kept in the record (a longer one replays cut)."""
NOTICE_CHARS = 300
"""Characters of a call's arguments and of its result shown in the step's cell."""
MIN_SECONDS = 1.0
"""The least time a call is given when the run's time left is shorter (seconds)."""


def open_servers(spec: Any) -> MCPServers | None:
    """The process's started servers for the ``mcp_servers`` setting
    (:func:`~rlm_kernel.mcp.shared_servers`); the values of every entry's ``env`` and
    ``headers`` are remembered as secrets first (redacted from every output and record).

    Args:
        spec: the setting: a file's path, its parsed dict, or None.

    Returns:
        The servers, or None when the setting names none.

    Raises:
        ValueError / OSError: the configuration cannot be read (the message names it).
    """
    servers = shared_servers(spec)
    if servers is None:
        return None
    for entry in servers.entries:
        for label, table in (("env", entry.env), ("headers", entry.headers)):
            for key, value in table.items():
                remember_secret(value, f"mcp_servers.{entry.name}.{label}.{key}")
    return servers


def _params(schema: Mapping[str, Any]) -> list[str]:
    """The tool's parameter names: its schema's required ones first, then the rest, each
    in the schema's order."""
    props = schema.get("properties")
    names = [str(n) for n in props] if isinstance(props, Mapping) else []
    required = schema.get("required")
    first = [n for n in names if isinstance(required, list) and n in required]
    return first + [n for n in names if n not in first]


def _signature(spec: ToolSpec) -> str:
    """``name(a: string, b: integer = 10) -> str``: the short form of a tool's input
    schema and of what a call returns (`` -> dict with x, y`` for a tool whose output
    schema names the keys of its result, else its text)."""
    props = spec.input_schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    required = spec.input_schema.get("required")
    parts = []
    for name in _params(spec.input_schema):
        found = props.get(name)
        prop: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        kind = prop.get("type") or "|".join(
            str(p.get("type")) for p in prop.get("anyOf", []) if isinstance(p, Mapping)) or "any"
        part = f"{name}: {kind}"
        if not (isinstance(required, list) and name in required):
            part += f" = {json.dumps(prop.get('default'))}"
        parts.append(part)
    out = spec.output_schema.get("properties") if spec.output_schema else None
    returns = f" -> dict with {', '.join(map(str, out))}" if isinstance(out, Mapping) and \
        out and set(out) != {"result"} else " -> str"
    return f"{spec.name}({', '.join(parts)}){returns}"


def describe_tools(tools: Mapping[str, Sequence[ToolSpec]], *,
                   description_chars: int = 160) -> list[str]:
    """One line per tool for the task message: ``server.name(params): description``
    (the description's first sentence, cut at ``description_chars`` characters).

    Args:
        tools: the tools by server.
        description_chars: characters of each description kept.
    """
    lines = []
    for server, specs in tools.items():
        for spec in specs:
            text = " ".join(spec.description.split())
            first = text.split(". ")[0].rstrip(".")
            if len(first) > description_chars:
                first = first[:description_chars - 1] + "…"
            lines.append(f"- {server}.{_signature(spec)}" + (f": {first}" if first else ""))
    return lines


def _key(server: str, tool: str, arguments: Any) -> str:
    """The record's key of a call: the names and the arguments as canonical JSON."""
    return json.dumps([server, tool, arguments], sort_keys=True, default=repr)


def recorded_tools(exchanges: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, list[str]]]:
    """The servers and tools a record's ``tool`` exchanges name, with the arguments each
    call passed: ``{server: {tool: [argument names]}}`` (for the groups of a replay or an
    exported notebook when the servers are not running)."""
    seen: dict[str, dict[str, list[str]]] = {}
    for e in exchanges:
        if e.get("role") != "tool":
            continue
        server, tool = str(e.get("server", "")), str(e.get("tool", ""))
        if not server.isidentifier():
            continue
        names = seen.setdefault(server, {}).setdefault(tool, [])
        args = e.get("arguments")
        for name in args if isinstance(args, Mapping) else ():
            if name not in names:
                names.append(str(name))
    return seen


class RunTools:
    """The MCP tools of one run tree (a child run shares its parent's, and its budget).

    Args:
        servers: the started servers, or None (a replay with no servers: the record only).
        guard: the run's budget guard (a call after the run's end or past its budget is
            refused; the time left caps each call's), or None (outside a run).
        max_calls: tool calls the run tree may make (``max_tool_calls``); None: no limit.
        timeout: seconds one call may take (``tool_timeout``).
        recorder: where each call's ``tool`` exchange is appended, or None.
        recorded: exchanges of a recorded run to answer from first (replay, an exported
            notebook), or None.
    """

    def __init__(self, servers: MCPServers | None, guard: BudgetGuard | None, *,
                 max_calls: int | None = None, timeout: float = 60.0,
                 recorder: Recorder | None = None,
                 recorded: Sequence[Mapping[str, Any]] | None = None) -> None:
        self.servers, self.guard, self.recorder = servers, guard, recorder
        self.max_calls, self.timeout = max_calls, timeout
        self._count = [0]  # shared with with_recorder()'s copies: one budget a run tree
        self._lock = threading.Lock()
        self._recorded: dict[str, list[Mapping[str, Any]]] = {}
        for e in recorded or ():
            if e.get("role") == "tool":
                key = _key(str(e.get("server")), str(e.get("tool")), e.get("arguments"))
                self._recorded.setdefault(key, []).append(e)

    @property
    def calls(self) -> int:
        """The tool calls made so far by the run tree (answered from the record too)."""
        return self._count[0]

    def with_recorder(self, recorder: Recorder) -> RunTools:
        """The same tools, budget and record recording into ``recorder`` (a candidate's)."""
        twin = copy.copy(self)
        twin.recorder = recorder
        return twin

    @property
    def tools(self) -> dict[str, list[ToolSpec]]:
        """The tools offered, by server (the started servers')."""
        return dict(self.servers.tools) if self.servers is not None else {}

    def groups(self, call: Callable[..., Any]) -> dict[str, ToolGroup]:
        """A :class:`~rlm_kernel.mcp.groups.ToolGroup` per server, bound to ``call`` (the
        run's ``mcp_call``): the started servers' tools, and (in a replay) the tools the
        record names."""
        groups: dict[str, dict[str, tuple[list[str], str]]] = {}
        for server, tools in recorded_tools(
                [e for entries in self._recorded.values() for e in entries]).items():
            groups[server] = {name: (params, "(answered from the record)")
                              for name, params in tools.items()}
        for server, specs in self.tools.items():
            groups[server] = {s.name: (_params(s.input_schema), s.description) for s in specs}
        return {server: ToolGroup(server, tools, call) for server, tools in groups.items()}

    def describe(self) -> list[str]:
        """The task message's lines for the tools (:func:`describe_tools`)."""
        return describe_tools(self.tools)

    def problems(self) -> list[str]:
        """One line per configured server that is not available (``name: why``)."""
        found = self.servers.problems if self.servers is not None else {}
        return [f"{name}: {why}" for name, why in found.items()]

    # -- a call ----------------------------------------------------------------------------
    def call(self, server: str, tool: str, arguments: Any = None, *, step: int = 0,
             depth: int = 0, notify: Callable[[Event], None] | None = None) -> Any:
        """``mcp_call(server, tool, arguments)``: call ``server``'s ``tool`` (see the
        module docstring for the order of the checks).

        Args:
            server: the server's name; tool: the tool's name.
            arguments: a dict of the tool's arguments (JSON data), or None.
            step: the calling run's step (for its cell's notice).
            depth: the calling run's depth (0: top level), recorded.
            notify: the calling run's observer, told a ``step_notice``; or None.

        Returns:
            The tool's structured content (a dict) when it has an output schema, else its
            text (``str``).

        Raises:
            MCPToolError: the call was refused (schema, budget, no such tool) or failed
                (the tool's error, a time-out, a lost server): one readable message.
            BudgetExceeded: the run's budget is used up or the run is over.
        """
        if not isinstance(server, str) or not isinstance(tool, str):
            raise MCPToolError(f"{CALL_NAME}(server, tool, arguments): server and tool are "
                               "names (str)")
        arguments = {} if arguments is None else arguments
        if not isinstance(arguments, Mapping):
            raise MCPToolError(f"{server}.{tool}: arguments are a dict, not "
                               f"{type(arguments).__name__}")
        if self.guard is not None:
            if self.guard.closed:
                raise MCPToolError(f"{server}.{tool}: the run is over; no more tool calls")
            self.guard.check()
        try:
            data = json.loads(json.dumps(dict(arguments)))
        except (TypeError, ValueError) as exc:
            raise MCPToolError(f"{server}.{tool}: the arguments are not JSON data ({exc})") \
                from None
        with self._lock:
            if self.max_calls is not None and self._count[0] >= self.max_calls:
                raise MCPToolError(f"{server}.{tool}: the run's budget of {self.max_calls} "
                                   "tool calls (max_tool_calls) is used up")
            self._count[0] += 1
            recorded = self._recorded.get(_key(server, tool, data))
            entry = recorded.pop(0) if recorded else None
        where = (step, depth, notify)
        if entry is not None:
            return self._answer(server, tool, data, entry, where, from_record=True)
        if self.servers is None:
            raise MCPToolError(f"{server}.{tool}: no MCP server is running and the record "
                               "holds no such call")
        spec = self.servers.spec(server, tool)
        problem = _unknown_arguments(spec.input_schema, data) or \
            _schema_problem(spec.input_schema, data)
        if problem is not None:
            raise MCPToolError(f"{server}.{tool}: the arguments do not fit its input "
                               f"schema, not sent: {problem}")
        timeout = self.timeout
        left = self.guard.seconds_left() if self.guard is not None else None
        if left is not None:
            timeout = max(min(timeout, left), MIN_SECONDS)
        t0 = time.monotonic()
        try:
            reply = self.servers.call(server, tool, data, timeout)
        except MCPToolError as exc:
            self._answer(server, tool, data, {"error": str(exc),
                                              "seconds": time.monotonic() - t0}, where)
            raise
        value: Any = reply.structured if reply.structured is not None else reply.text
        entry = {"seconds": reply.seconds}
        if reply.is_error:
            entry["error"] = f"{server}.{tool} failed: {reply.text}"
        else:
            entry["response"] = value
        return self._answer(server, tool, data, entry, where)

    def _answer(self, server: str, tool: str, arguments: dict[str, Any],
                entry: Mapping[str, Any], where: tuple[int, int, Any], *,
                from_record: bool = False) -> Any:
        """Redact, record (unless ``from_record``), tell the cell; return the result or
        raise the error."""
        redact = Redactor()
        error = entry.get("error")
        value = redact_data(entry.get("response"), redact)
        if isinstance(value, str):
            value = value[:RESULT_CHARS]
        error = redact(str(error)) if error is not None else None
        step, depth, notify = where
        if not from_record and self.recorder is not None:
            kept: dict[str, Any] = {"role": "tool", "depth": depth,
                                    "server": server, "tool": tool,
                                    "arguments": redact_data(arguments, redact),
                                    "seconds": round(float(entry.get("seconds") or 0), 3)}
            kept["error" if error is not None else "response"] = \
                error if error is not None else value
            self.recorder.record_entry(kept)
        if notify is not None:
            shown = json.dumps(redact_data(arguments, redact), ensure_ascii=False)
            result = error if error is not None else (
                value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
            text = (f"MCP {server}.{tool}({_cut(shown)})"
                    + (" [from the record]" if from_record else "")
                    + (f" failed: {_cut(result)}" if error is not None
                       else f" -> {_cut(result)}"))
            notify(StepNotice(step=step, text=text, reason="tool_call"))
        if error is not None:
            raise MCPToolError(error)
        return value


def _cut(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= NOTICE_CHARS else text[:NOTICE_CHARS - 1] + "…"


def _unknown_arguments(schema: Mapping[str, Any], data: Mapping[str, Any]) -> str | None:
    """The arguments ``schema`` does not name, as a refusal (a Python call with an
    unknown keyword fails too), or None.  A schema that allows more
    (``additionalProperties`` true or a schema) or names no properties takes anything."""
    props = schema.get("properties")
    more = schema.get("additionalProperties")
    if not isinstance(props, Mapping) or more not in (None, False):
        return None
    unknown = [name for name in data if name not in props]
    if not unknown:
        return None
    return (f"unexpected argument{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(repr, unknown))} (its arguments: {', '.join(_params(schema))})")


def _schema_problem(schema: Mapping[str, Any], data: Any) -> str | None:
    """Why ``data`` does not meet the JSON Schema ``schema`` (the best match of
    ``jsonschema``), or None; a schema that is itself not valid checks nothing."""
    import jsonschema

    try:
        cls = jsonschema.validators.validator_for(schema)
        error = jsonschema.exceptions.best_match(cls(schema).iter_errors(data))
    except jsonschema.exceptions.SchemaError as exc:
        log.warning("an MCP tool's input schema is not valid; its calls are not checked: %s",
                    exc.message)
        return None
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message
