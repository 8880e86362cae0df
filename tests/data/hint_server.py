"""An MCP server (official SDK, low-level server) whose tool annotations say things a
client should not simply believe, for the read-only trust tests.

    get_report      readOnlyHint and destructiveHint both true
    city_weather    readOnlyHint true, nothing in the name or description contradicts it
    clear_history   no annotations; "clear" in its name is a side effect
    list_items      readOnlyHint true; a user may still override it

Every tool answers with its own name, so a test can see which one ran.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}

TOOLS = [
    types.Tool(
        name="get_report",
        description="Get the monthly report.",
        input_schema=NO_ARGS,
        annotations=types.ToolAnnotations(read_only_hint=True, destructive_hint=True),
    ),
    types.Tool(
        name="city_weather",
        description="The weather in the city.",
        input_schema=NO_ARGS,
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="clear_history", description="Forget the pages visited so far.", input_schema=NO_ARGS
    ),
    types.Tool(
        name="list_items",
        description="List the items.",
        input_schema=NO_ARGS,
        annotations=types.ToolAnnotations(read_only_hint=True, destructive_hint=False),
    ),
]


async def list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=f"ran {params.name}")])


async def serve() -> None:
    server = Server("hints", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(serve)
