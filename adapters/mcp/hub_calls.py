"""Requests handed from the caller's thread to an `MCPHub`'s loop, each waited for, bounded.

`HubCalls` is a base class of `MCPHub` (the hub sets the attributes it declares). A tool
call (`call`, `acall`, or a tool's ``run``) is routed on the hub's loop to the server that
exposes the tool, and waited for at most that server's connect and call timeouts plus
`WAIT_MARGIN`; a wait that runs out comes back as an error result, as do unknown names.
Other requests (`_blocking`) are bounded by the servers' timeouts the same way, and raise
`ToolServerError` when the wait runs out. A closed hub raises `ToolServerError`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

from anyio.from_thread import BlockingPortal

from toolweave.adapters.mcp.config import ServerConfig
from toolweave.adapters.mcp.connection import MAX_TOOL_PAGES, MCPConnection
from toolweave.adapters.mcp.progress import ProgressCallback, sdk_progress_callback
from toolweave.errors import ToolServerError
from toolweave.tools import ToolResult, ToolRunner

__all__ = ["MAX_LISTING_PAGES", "WAIT_MARGIN", "HubCalls"]

#: Slack on top of a server's own timeouts before a caller stops waiting for the hub.
WAIT_MARGIN = 10.0
#: Pages a resource or prompt listing may take, for the bound on waiting for it.
MAX_LISTING_PAGES = MAX_TOOL_PAGES

_T = TypeVar("_T")


class HubCalls:
    """Tool calls of an `MCPHub`, and the bounded wait for anything run on its loop."""

    _configs: dict[str, ServerConfig]
    _connections: dict[str, MCPConnection]
    _routes: dict[str, tuple[str, str]]
    _progress: ProgressCallback | None
    _portal: BlockingPortal
    _closed: bool

    def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        progress: ProgressCallback | None = None,
    ) -> ToolResult:
        """Run tool ``name`` and wait for its result (blocking; never call from the hub's loop).

        Tool failures, timeouts, crashed servers and unknown names come back as error
        results; only a closed hub raises (`ToolServerError`). ``progress`` receives this
        call's progress notifications, besides the hub's own callback.
        """
        future = self._submit(name, arguments, progress)
        try:
            return future.result(timeout=self._wait_bound(name))
        except TimeoutError:
            future.cancel()
            return ToolResult.error(self._no_answer(name))

    async def acall(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        progress: ProgressCallback | None = None,
    ) -> ToolResult:
        """`call` for asyncio code: awaitable from any running asyncio event loop."""
        future = self._submit(name, arguments, progress)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), self._wait_bound(name))
        except TimeoutError:
            return ToolResult.error(self._no_answer(name))

    def _runner(self, name: str) -> ToolRunner:
        async def run(arguments: Mapping[str, Any]) -> ToolResult:
            return await self.acall(name, arguments)

        return run

    # -- inside the hub's loop -------------------------------------------------------

    async def _dispatch(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        progress: ProgressCallback | None = None,
    ) -> ToolResult:
        route = self._routes.get(name)
        if route is None:
            known = ", ".join(sorted(self._routes))
            return ToolResult.error(f"unknown tool {name!r}; the tools are: {known[:1000]}")
        server, tool = route
        callbacks = [c for c in (self._progress, progress) if c is not None]
        on_progress = sdk_progress_callback(server, name, *callbacks) if callbacks else None
        return await self._connections[server].call_tool(tool, arguments, progress=on_progress)

    # -- from the caller's thread ----------------------------------------------------

    def _submit(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        progress: ProgressCallback | None = None,
    ) -> Future[ToolResult]:
        self._check_open()
        try:
            return self._portal.start_task_soon(self._dispatch, name, arguments, progress)
        except RuntimeError as exc:  # the portal stopped under us
            raise ToolServerError(self._server_of(name), "the MCP hub is closed") from exc

    def _blocking(
        self,
        make: Callable[[], Awaitable[_T]],
        *,
        server: str | None = None,
        pages: bool = False,
    ) -> _T:
        """Run ``make()`` on the hub's loop and wait, bounded by the servers' timeouts."""
        self._check_open()
        configs = [self._configs[server]] if server else list(self._configs.values())
        per_request = max((c.call_timeout for c in configs), default=0.0)
        requests = MAX_LISTING_PAGES if pages else 1
        connect = max((c.connect_timeout for c in configs), default=0.0)
        who = server or ", ".join(self._configs)
        try:
            future = self._portal.start_task_soon(make)
        except RuntimeError as exc:
            raise ToolServerError(who, "the MCP hub is closed") from exc
        try:
            return future.result(timeout=connect + requests * per_request + WAIT_MARGIN)
        except TimeoutError:
            future.cancel()
            raise ToolServerError(who, "no answer from the MCP hub in time") from None

    def _wait_bound(self, name: str) -> float:
        config = self._configs.get(self._server_of(name))
        if config is None:
            return WAIT_MARGIN
        return config.connect_timeout + config.call_timeout + WAIT_MARGIN

    def _no_answer(self, name: str) -> str:
        server = self._server_of(name)
        return str(ToolServerError(server, f"no answer for {name!r} from the MCP hub in time"))

    def _server_of(self, name: str) -> str:
        route = self._routes.get(name)
        return route[0] if route else "?"

    def _check_open(self) -> None:
        if self._closed:
            raise ToolServerError(", ".join(self._configs), "the MCP hub is closed")
