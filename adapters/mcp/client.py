"""The MCP client: connect toolweave to MCP servers and run their tools.

    servers = ["python -m toolweave.adapters.demo_servers.notes", "http://localhost:8000/mcp"]
    with MCPHub(servers) as hub:
        hub.tools                                   # tuple[Tool, ...]
        hub.call("list_notes", {})                  # ToolResult, from sync code
        await hub.tool("list_notes").run({})        # or from any asyncio loop

        hub.list_resources(); hub.read_resource(uri)   # resources, named by server
        hub.list_prompts(); hub.get_prompt("server/name", {"arg": "value"})

    hub = MCPHub.from_config_file("mcp.json")         # an mcpServers file (Claude, Cursor)

Modules: `config` (`ServerConfig`: stdio, streamable HTTP with headers and auth, SSE),
`config_file` (``mcpServers`` files), `connection` (one persistent session per server,
restarted after a crash or a timeout), `hub` (several servers, naming, routing, the
background loop), `convert` and `content` (MCP types to `ToolSpec`, `MCPToolResult` and
LangChain content blocks), `catalog` (resources and prompts), `progress` (progress
notifications), `sampling` (answering a server's sampling request with a local model).

What reaches the model and what reaches the caller: a tool's own error, a timeout, a
crashed server, a result that breaks the tool's output schema (the call ran; the
session stays up) and an unknown tool name come back as error `ToolResult`s; a server
that cannot be started when the hub starts, and use of a closed hub, raise
`ToolServerError`.
"""

from __future__ import annotations

from toolweave.adapters.mcp.catalog import (
    PromptInfo,
    PromptMessage,
    ResourceContents,
    ResourceInfo,
)
from toolweave.adapters.mcp.config import ServerConfig, demo_server_configs
from toolweave.adapters.mcp.config_file import MCPConfigError, load_mcp_config
from toolweave.adapters.mcp.connection import MCPConnection, open_connection
from toolweave.adapters.mcp.convert import HINT_DEFAULTS, MCPToolResult, tool_result, tool_spec
from toolweave.adapters.mcp.hub import MCPHub, assign_names
from toolweave.adapters.mcp.progress import ProgressCallback, ProgressUpdate
from toolweave.adapters.mcp.sampling import (
    SamplingCallback,
    SamplingReply,
    SamplingRequest,
    chat_model_sampler,
)

__all__ = [
    "HINT_DEFAULTS",
    "MCPConfigError",
    "MCPConnection",
    "MCPHub",
    "MCPToolResult",
    "ProgressCallback",
    "ProgressUpdate",
    "PromptInfo",
    "PromptMessage",
    "ResourceContents",
    "ResourceInfo",
    "SamplingCallback",
    "SamplingReply",
    "SamplingRequest",
    "ServerConfig",
    "assign_names",
    "chat_model_sampler",
    "demo_server_configs",
    "load_mcp_config",
    "open_connection",
    "tool_result",
    "tool_spec",
]
