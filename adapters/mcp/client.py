"""The MCP client: connect toolweave to MCP servers and run their tools.

    servers = ["python -m toolweave.adapters.demo_servers.notes", "http://localhost:8000/mcp"]
    with MCPHub(servers) as hub:
        hub.tools                                   # tuple[Tool, ...]
        hub.call("list_notes", {})                  # ToolResult, from sync code
        await hub.tool("list_notes").run({})        # or from any asyncio loop

Modules: `config` (`ServerConfig`), `connection` (one persistent session per server,
restarted after a crash or a timeout), `hub` (several servers, naming, routing, the
background loop), `convert` (MCP types to `ToolSpec` and `ToolResult`).

What reaches the model and what reaches the caller: a tool's own error, a timeout, a
crashed server, a result that breaks the tool's output schema (the call ran; the
session stays up) and an unknown tool name come back as error `ToolResult`s; a server
that cannot be started when the hub starts, and use of a closed hub, raise
`ToolServerError`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from toolweave.adapters.mcp.config import ServerConfig
from toolweave.adapters.mcp.connection import MCPConnection, open_connection
from toolweave.adapters.mcp.convert import HINT_DEFAULTS, tool_result, tool_spec
from toolweave.adapters.mcp.hub import MCPHub, assign_names

__all__ = [
    "HINT_DEFAULTS",
    "MCPConnection",
    "MCPHub",
    "ServerConfig",
    "assign_names",
    "demo_server_configs",
    "open_connection",
    "tool_result",
    "tool_spec",
]


def demo_server_configs(
    state_dir: str | os.PathLike[str] | None = None,
    *,
    names: Iterable[str] | None = None,
    call_timeout: float = 30.0,
) -> list[ServerConfig]:
    """Configs that start the bundled demo servers (``toolweave.adapters.demo_servers``) over stdio.

    ``state_dir`` holds their JSON state (default: ``$TOOLWEAVE_DEMO_STATE``, else a
    fixed directory under the system temp dir); ``names`` picks some of them.
    """
    from toolweave.adapters.demo_servers import DEMO_SERVERS, STATE_ENV

    wanted = set(DEMO_SERVERS) if names is None else set(names)
    unknown = wanted - set(DEMO_SERVERS)
    if unknown:
        known = ", ".join(DEMO_SERVERS)
        raise ValueError(f"unknown demo servers {sorted(unknown)}; known: {known}")
    directory = state_dir if state_dir is not None else os.environ.get(STATE_ENV)
    env = {STATE_ENV: os.fspath(directory)} if directory is not None else None
    return [
        ServerConfig(
            name=name,
            command=(sys.executable, "-m", module),
            env=env,
            call_timeout=call_timeout,
        )
        for name, module in DEMO_SERVERS.items()
        if name in wanted
    ]
