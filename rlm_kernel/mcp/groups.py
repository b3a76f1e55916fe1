"""What model code holds of an MCP server: a :class:`ToolGroup`, its tools as methods
(``git.git_log(repo_path=".")``).

A group holds names and descriptions only, never a connection: calling one of its tools
calls the run's host function ``mcp_call(server, tool, arguments)``, which checks, counts,
records and makes the call on the host (:mod:`rlm_kernel.engine.session.mcp_tools`).
In-process the group holds that function; behind the process wall the group is copied
into the worker (it carries the executors' ``__rlm_portable__`` mark) and finds the
worker's ``mcp_call``, the host's stub, when called: model code gets data, and the host
makes every call.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["CALL_NAME", "ToolGroup"]

CALL_NAME = "mcp_call"
"""The reserved name of the run's host function that makes a tool call."""


def _worker_call() -> Callable[..., Any]:
    """The isolated worker's ``mcp_call`` (the host's stub).

    Raises:
        NameError: there is none (outside a run, or model code deleted it this step).
    """
    worker = sys.modules.get("rlm_kernel.executors.worker")
    namespace = None if worker is None else worker.current_namespace()
    call = None if namespace is None else namespace.get(CALL_NAME)
    if not callable(call):
        raise NameError(f"{CALL_NAME} is not bound: MCP tools are called inside a run")
    return call


class _Tool:
    """One tool of a group, as model code calls it."""

    def __init__(self, group: ToolGroup, name: str, params: Sequence[str], doc: str) -> None:
        self._group, self.__name__, self._params = group, name, tuple(params)
        self.__doc__ = doc

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) > len(self._params):
            raise TypeError(f"{self._group.server}.{self.__name__} takes at most "
                            f"{len(self._params)} positional arguments "
                            f"({', '.join(self._params)}); name them")
        arguments = dict(zip(self._params, args, strict=False))
        for key, value in kwargs.items():
            if key in arguments:
                raise TypeError(f"{self._group.server}.{self.__name__} got {key!r} twice")
            arguments[key] = value
        return self._group._caller()(self._group.server, self.__name__, arguments)

    def __repr__(self) -> str:
        return f"<MCP tool {self._group.server}.{self.__name__}({', '.join(self._params)})>"


class ToolGroup:
    """The tools of one MCP server as model code sees them: ``group.tool(...)``; also
    ``group("tool", ...)`` for a tool whose name is not a Python name.

    Args:
        server: the server's name (the configuration's key; the group's name).
        tools: ``{tool name: (parameter names in the schema's order, description)}``.
        call: the host function that makes a call (in-process), or None: the worker's
            ``mcp_call`` when called (a copy in the isolated worker).
    """

    __rlm_portable__ = True  # executors.workfolder.PORTABLE: copied, not served

    def __init__(self, server: str, tools: Mapping[str, tuple[Sequence[str], str]],
                 call: Callable[..., Any] | None = None) -> None:
        self.server = server
        self._tools = {name: (tuple(params), str(doc)) for name, (params, doc) in tools.items()}
        self._call = call

    def _caller(self) -> Callable[..., Any]:
        return self._call if self._call is not None else _worker_call()

    def __getattr__(self, name: str) -> _Tool:
        tools = self.__dict__.get("_tools") or {}
        if name in tools:
            params, doc = tools[name]
            return _Tool(self, name, params, doc)
        raise AttributeError(f"MCP server {self.__dict__.get('server')!r} has no tool "
                             f"{name!r} (its tools: {', '.join(tools)})")

    def __call__(self, tool: str, /, **arguments: Any) -> Any:
        if tool not in self._tools:
            raise AttributeError(f"MCP server {self.server!r} has no tool {tool!r} "
                                 f"(its tools: {', '.join(self._tools)})")
        return self._caller()(self.server, tool, arguments)

    def __dir__(self) -> list[str]:
        return sorted(n for n in self._tools if n.isidentifier())

    def __reduce__(self) -> tuple[Any, ...]:
        return (ToolGroup, (self.server, self._tools))

    def __repr__(self) -> str:
        lines = [f"<MCP server {self.server}: {len(self._tools)} tools>"]
        for name, (params, doc) in self._tools.items():
            first = doc.strip().splitlines()[0] if doc.strip() else ""
            lines.append(f"  {name}({', '.join(params)})" + (f": {first[:100]}" if first else ""))
        return "\n".join(lines)
