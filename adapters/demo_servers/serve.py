"""What every demo server shares: annotation presets, the reply shape and ``main``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic.json_schema import SkipJsonSchema

__all__ = ["ADDS", "CHANGES", "READS", "REMOVES", "Omittable", "main", "reply"]

T = TypeVar("T")

#: An argument that may be left out: ``None`` in Python, no ``null`` in the JSON Schema.
Omittable = T | SkipJsonSchema[None]  # type: ignore[misc]  # pydantic generic alias

#: Looks things up, changes nothing.
READS = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
#: Adds something new; calling twice adds twice.
ADDS = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
#: Overwrites existing data; calling twice with the same arguments changes nothing more.
CHANGES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
#: Deletes something; a second call finds nothing left to delete.
REMOVES = CHANGES


def reply(data: dict[str, Any]) -> CallToolResult:
    """The result of a tool: compact JSON text for the model, the same data structured."""
    text = json.dumps(data, ensure_ascii=False)
    return CallToolResult(content=[TextContent(text=text)], structured_content=data)


def main(app: MCPServer[Any], argv: Sequence[str] | None = None) -> None:
    """Serve ``app`` over stdio, or over streamable HTTP with ``--http PORT``."""
    parser = argparse.ArgumentParser(
        prog=f"python -m toolweave.adapters.demo_servers.{app.name}",
        description=f"The {app.name!r} demo MCP server (stdio unless --http is given).",
    )
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on PORT")
    parser.add_argument("--host", default="127.0.0.1", help="interface for --http")
    args = parser.parse_args(argv)
    if args.http is None:
        app.run()
    else:
        app.run("streamable-http", host=args.host, port=args.http)
