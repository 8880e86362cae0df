"""A streamable-HTTP MCP server on loopback that wants a bearer token and a custom header.

    python bearer_http_server.py PORT TOKEN

Every request without ``Authorization: Bearer TOKEN`` gets 401; the ``whoami`` tool
returns the ``X-Client`` header the request carried, so a test can see that the
client's headers reach the server.
"""

from __future__ import annotations

import sys
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send


class BearerOnly:
    """ASGI middleware: 401 unless the request carries the expected bearer token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and Request(scope).headers.get("authorization") != self.expected:
            await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def build() -> MCPServer:
    server = MCPServer("bearer")

    @server.tool(description="Who is calling: the X-Client header of the request.")
    def whoami(ctx: Context) -> dict[str, Any]:
        request = ctx.request_context.request
        headers = getattr(request, "headers", {}) or {}
        return {"client": headers.get("x-client")}

    return server


def main() -> None:
    port, token = int(sys.argv[1]), sys.argv[2]
    app = BearerOnly(build().streamable_http_app(), token)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
