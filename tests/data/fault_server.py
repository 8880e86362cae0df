"""An MCP server (official SDK, low-level server) whose tools fail in every way a real
server can, for the fault-injection tests. Every tool with side effects appends one
line to the file named by ``FAULT_LOG`` *before* failing, so a test can count how
often it really ran.

    append        adds a line (not read-only)
    crash_after   adds a line, then kills the process
    hang_after    adds a line, then never answers
    garbage       writes bytes that are not JSON-RPC to stdout, then answers
    bad_output    adds a line, then answers structured content that breaks its own
                  outputSchema
    pid           the server's process id (read-only): a restart changes it
    fail          returns an error result
    raise_error   raises inside the handler
    count         how many lines the log holds (read-only)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

TEXT_ARG: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string", "description": "What to write."}},
    "required": ["text"],
}
NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}
WRITES = types.ToolAnnotations(read_only_hint=False, destructive_hint=False)
READS = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)

TOOLS = [
    types.Tool(
        name="append",
        description="Append a line of text to the log.",
        input_schema=TEXT_ARG,
        annotations=WRITES,
    ),
    types.Tool(
        name="crash_after",
        description="Append a line, then crash.",
        input_schema=TEXT_ARG,
        annotations=WRITES,
    ),
    types.Tool(
        name="hang_after",
        description="Append a line, then hang.",
        input_schema=TEXT_ARG,
        annotations=WRITES,
    ),
    types.Tool(name="garbage", description="Write junk.", input_schema=NO_ARGS, annotations=READS),
    types.Tool(
        name="bad_output",
        description="Append a line, then break the output schema.",
        input_schema=NO_ARGS,
        output_schema={
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
        },
        annotations=WRITES,
    ),
    types.Tool(
        name="fail", description="Return an error.", input_schema=NO_ARGS, annotations=READS
    ),
    types.Tool(name="raise_error", description="Raise.", input_schema=NO_ARGS, annotations=READS),
    types.Tool(
        name="count", description="Count log lines.", input_schema=NO_ARGS, annotations=READS
    ),
    types.Tool(
        name="pid", description="The server's process id.", input_schema=NO_ARGS, annotations=READS
    ),
]


def _log() -> Path:
    return Path(os.environ["FAULT_LOG"])


def _append(text: str) -> int:
    with _log().open("a", encoding="utf-8") as fh:
        fh.write(text.replace("\n", " ") + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return _count()


def _count() -> int:
    log = _log()
    return len(log.read_text(encoding="utf-8").splitlines()) if log.exists() else 0


def _text(value: str, **structured: Any) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=value)], structured_content=structured or None
    )


async def list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    name = params.name
    text = str((params.arguments or {}).get("text", ""))
    if name == "append":
        return _text(f"appended; {_append(text)} lines", lines=_count())
    if name == "crash_after":
        _append(text)
        print("fault server: crashing after the write", file=sys.stderr, flush=True)
        os._exit(3)
    if name == "hang_after":
        _append(text)
        await anyio.sleep(3600)
    if name == "garbage":
        sys.stdout.buffer.write(b"\x00this is not JSON-RPC {{{\n")
        sys.stdout.buffer.flush()
        return _text("garbage written")
    if name == "bad_output":
        _append("bad_output")
        return _text("n is a word", n="seven")
    if name == "fail":
        return types.CallToolResult(
            content=[types.TextContent(text="the disk is full")], is_error=True
        )
    if name == "raise_error":
        raise RuntimeError("handler blew up")
    if name == "count":
        return _text(str(_count()), lines=_count())
    if name == "pid":
        return _text(str(os.getpid()), pid=os.getpid())
    return types.CallToolResult(content=[types.TextContent(text=f"no tool {name}")], is_error=True)


async def serve() -> None:
    server = Server("fault", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(serve)
