"""A deliberately misbehaving MCP server for the client tests (low-level SDK server).

It lists its tools a few per page, and has tools that hang, crash the process, raise,
return error results, images and oversized text. Options:

    --page-size N      tools per tools/list page (default 4)
    --only A,B         expose only these tools (plus --extra-tool ones)
    --extra-tool NAME  add a tool NAME that answers with its own name (repeatable)
    --label TEXT       included in echo's answer, to tell servers apart
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}
READS = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)

TOOLS = [
    types.Tool(
        name="echo",
        description="Echo the text back, with the server label.",
        input_schema={
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
        annotations=types.ToolAnnotations(title="Echo", read_only_hint=True),
    ),
    types.Tool(
        name="pid", description="The server's process id.", input_schema=NO_ARGS, annotations=READS
    ),
    types.Tool(name="fail", description="Returns an error result.", input_schema=NO_ARGS),
    types.Tool(name="raise_error", description="Raises inside the handler.", input_schema=NO_ARGS),
    types.Tool(name="hang", description="Never answers.", input_schema=NO_ARGS),
    types.Tool(name="crash", description="Kills its own process.", input_schema=NO_ARGS),
    types.Tool(name="image", description="Returns a tiny PNG.", input_schema=NO_ARGS),
    types.Tool(name="big", description="Returns 50,000 characters.", input_schema=NO_ARGS),
    *(
        types.Tool(name=f"filler_{n}", description=f"Filler tool {n}.", input_schema=NO_ARGS)
        for n in range(3)
    ),
]


def build(args: argparse.Namespace) -> Server[Any]:
    tools = [t for t in TOOLS if not args.only or t.name in args.only.split(",")]
    tools += [
        types.Tool(name=name, description=f"Answers {name}.", input_schema=NO_ARGS)
        for name in args.extra_tool
    ]

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + args.page_size
        cursor = str(end) if end < len(tools) else None
        return types.ListToolsResult(tools=tools[start:end], next_cursor=cursor)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        name = params.name
        arguments = params.arguments or {}
        if name == "echo":
            text = f"{args.label}: {arguments.get('text', '')}"
            return types.CallToolResult(
                content=[types.TextContent(text=text)],
                structured_content={"label": args.label, "text": arguments.get("text", "")},
            )
        if name == "pid":
            return types.CallToolResult(
                content=[types.TextContent(text=str(os.getpid()))],
                structured_content={"pid": os.getpid()},
            )
        if name == "fail":
            return types.CallToolResult(
                content=[types.TextContent(text="the frobnicator is out of order")], is_error=True
            )
        if name == "raise_error":
            raise RuntimeError("handler blew up")
        if name == "hang":
            await anyio.sleep(3600)
        if name == "crash":
            print("faulty server: crashing on purpose", file=sys.stderr, flush=True)
            os._exit(3)
        if name == "image":
            png = (
                "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhf"
                "DwAChwGA60e6kgAAAABJRU5ErkJggg=="
            )
            return types.CallToolResult(
                content=[
                    types.TextContent(text="a one-pixel image:"),
                    types.ImageContent(data=png, mime_type="image/png"),
                ]
            )
        if name == "big":
            return types.CallToolResult(content=[types.TextContent(text="x" * 50_000)])
        return types.CallToolResult(content=[types.TextContent(text=name)])

    return Server("faulty", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve(server: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--page-size", type=int, default=4)
    parser.add_argument("--only", default="")
    parser.add_argument("--extra-tool", action="append", default=[])
    parser.add_argument("--label", default="faulty")
    anyio.run(serve, build(parser.parse_args()))
