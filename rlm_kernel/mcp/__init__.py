"""MCP servers as tool sources: the servers of an ``mcpServers`` configuration started
once per process, their tools listed and called, through the official ``mcp`` SDK's
client (stdio and streamable HTTP).

- :func:`load_servers` reads the configuration (the ``mcpServers`` JSON format the common
  MCP clients share, a file or the same as a dict) into :class:`ServerEntry` values.
- :class:`MCPServers` holds the started servers of one process and makes the calls;
  :func:`shared_servers` gives the one set of a process for a configuration (a kernel, an
  ``rlm run``, a batch worker start them once, and they are closed at exit).

The run's side (the functions model code calls, the checks, the budget, the record) is
:mod:`rlm_kernel.engine.session.mcp_tools`.  Importing this package loads no SDK: the
SDK is imported when servers start.
"""

from .servers import (
    MCPServers,
    MCPToolError,
    ServerEntry,
    ToolReply,
    ToolSpec,
    load_servers,
    shared_servers,
)

__all__ = ["MCPServers", "MCPToolError", "ServerEntry", "ToolReply", "ToolSpec",
           "load_servers", "shared_servers"]
