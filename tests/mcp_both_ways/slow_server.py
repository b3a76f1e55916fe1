"""A small MCP server for the cases a third-party server does not offer on demand: a tool
that takes its time, one that kills its own server, one that returns a secret it read
from its environment.  Built on the SDK's ``MCPServer``; run as ``python slow_server.py
[stdio | http PORT]``."""

from __future__ import annotations

import os
import sys
import time

from mcp.server import MCPServer

server = MCPServer("slow")


@server.tool()
def wait(seconds: float) -> str:
    """Sleep ``seconds``, then say so."""
    time.sleep(seconds)
    return f"waited {seconds:g} s"


@server.tool()
def crash() -> str:
    """End this server's process at once."""
    os._exit(3)


@server.tool()
def env(name: str) -> str:
    """The value of the environment variable ``name`` in this server, or "(unset)"."""
    return os.environ.get(name, "(unset)")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
