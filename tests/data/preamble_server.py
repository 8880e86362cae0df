"""An MCP server (official SDK, low-level server) whose tools' descriptions open with
shared sentences, for the read-only tests of shared leads.

    list_files, make_dir   share a system preamble naming reading and writing
    get_token, get_key     share a lead that names a side effect alone
    status                 its own preamble, shared by no other tool

Every tool answers with its own name, so a test can see which one ran.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}
SYSTEM = (
    "This tool belongs to the store, which lets users create folders, "
    "read files and write them. Tool description: "
)
REVOKES = "Each call revokes the previous credential. "

TOOLS = [
    types.Tool(name="list_files", description=SYSTEM + "List the files.", input_schema=NO_ARGS),
    types.Tool(name="make_dir", description=SYSTEM + "Make a folder.", input_schema=NO_ARGS),
    types.Tool(name="get_token", description=REVOKES + "Get a new token.", input_schema=NO_ARGS),
    types.Tool(name="get_key", description=REVOKES + "Get a new key.", input_schema=NO_ARGS),
    types.Tool(
        name="status",
        description="This server can delete and read records. Show the server's state.",
        input_schema=NO_ARGS,
    ),
]


async def list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=f"ran {params.name}")])


async def serve() -> None:
    server = Server("preamble", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(serve)
