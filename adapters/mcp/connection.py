"""One persistent MCP session per server, restarted when it breaks.

`MCPConnection` keeps one session to a server (see `ServerConfig`) open across calls.
The SDK's transports and sessions are async context managers that must be entered and
left in the same task, so each session lives in a task of its own that owns the
contexts until it is told to stop; calls from other tasks of the same event loop use
the session meanwhile. The session's state lives in `Session` (see
`toolweave.adapters.mcp.session`), its transport in `toolweave.adapters.mcp.transport`.

A call that times out or finds the server gone returns an error `ToolResult` naming
the server and the problem, and the session is torn down; the next call starts a new
one. A call is never sent twice: a tool that is not read-only must not run twice.
A result that breaks the tool's ``outputSchema`` is checked in
`toolweave.adapters.mcp.output_check`.

Besides tools, a connection lists and reads resources and lists and gets prompts (each
request bounded by ``call_timeout``, listings by `MAX_TOOL_PAGES` pages), passes a
call's progress notifications to a callback, and answers the server's sampling
requests with the SDK sampling callback it was given.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
import mcp_types
from anyio.abc import TaskGroup
from mcp import Client, MCPError
from mcp.client.session import SamplingFnT
from mcp.shared.dispatcher import ProgressFnT
from mcp_types import CONNECTION_CLOSED

from toolweave.adapters.mcp.config import ServerConfig
from toolweave.adapters.mcp.output_check import checked_result
from toolweave.adapters.mcp.session import (
    CLOSE_TIMEOUT,
    Session,
    describe_error,
    finish_session,
    stderr_note,
)
from toolweave.adapters.mcp.transport import open_transport
from toolweave.errors import ToolServerError
from toolweave.tools import ToolResult

__all__ = ["CLOSE_TIMEOUT", "MAX_TOOL_PAGES", "MCPConnection", "open_connection"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
_PageT = TypeVar("_PageT", mcp_types.ListResourcesResult, mcp_types.ListPromptsResult)

#: A server listing more pages of tools than this is treated as broken.
MAX_TOOL_PAGES = 100


class MCPConnection:
    """One server, one persistent session, restarted on the call after a failure.

    Lives in one event loop: create it, call it and close it from tasks of that loop.
    Session tasks run in ``task_group``, which must outlive the connection; for
    stand-alone use, `open_connection` provides one.
    """

    def __init__(
        self,
        config: ServerConfig,
        task_group: TaskGroup,
        *,
        sampling: SamplingFnT | None = None,
    ) -> None:
        self.config = config
        self._task_group = task_group
        self._sampling = sampling
        self._lock = anyio.Lock()
        self._current: Session | None = None
        self._sessions: set[Session] = set()
        self._closed = False
        #: Sessions started so far (1 after the first call, 2 after one restart, ...).
        self.starts = 0

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def _start_verb(self) -> str:
        return "connect" if self.config.url else "start"

    async def list_tools(self, *, refresh: bool = False) -> list[mcp_types.Tool]:
        """All the server's tool definitions, following pagination cursors.

        The listing is taken when a session starts (so the SDK knows every tool's output
        schema); ``refresh`` asks the server again. Raises `ToolServerError` when the
        server cannot be reached or misbehaves.
        """
        session, client = await self._session()
        if refresh or session.tools is None:
            session.tools = await self._walk_pages(session, client)
        return list(session.tools)

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        progress: ProgressFnT | None = None,
    ) -> ToolResult:
        """Call tool ``name`` once; every failure comes back as an error `ToolResult`.

        ``progress`` receives the server's progress notifications for this call.
        """
        try:
            session, client = await self._session()
        except ToolServerError as exc:
            return ToolResult.error(str(exc))
        request = mcp_types.CallToolRequest(
            params=mcp_types.CallToolRequestParams(name=name, arguments=dict(arguments or {}))
        )
        try:
            with anyio.fail_after(self.config.call_timeout):
                # The raw request, not Client.call_tool (it may resend a call) nor the
                # session's call_tool (it raises on a result that breaks the tool's output
                # schema, losing a result whose side effects already happened).
                result = await client.session.send_request(
                    request, mcp_types.CallToolResult, progress_callback=progress
                )
        except Exception as exc:
            return ToolResult.error(
                str(ToolServerError(self.name, self._failure(session, name, exc)))
            )
        return await checked_result(self.config, client, name, result)

    async def list_resources(self) -> list[mcp_types.Resource]:
        """The server's resources (every page); none when it offers no resources."""
        _, client = await self._session()
        if client.server_capabilities.resources is None:
            return []
        pages = await self._pages(
            "resources/list", lambda cursor: client.list_resources(cursor=cursor)
        )
        return [item for page in pages for item in page.resources]

    async def read_resource(self, uri: str) -> mcp_types.ReadResourceResult:
        """The contents of resource ``uri``; `ToolServerError` when it cannot be read."""
        return await self._request(
            "resources/read", lambda client: client.read_resource(uri, cache_mode="bypass")
        )

    async def list_prompts(self) -> list[mcp_types.Prompt]:
        """The server's prompts (every page); none when it offers no prompts."""
        _, client = await self._session()
        if client.server_capabilities.prompts is None:
            return []
        pages = await self._pages("prompts/list", lambda cursor: client.list_prompts(cursor=cursor))
        return [item for page in pages for item in page.prompts]

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> mcp_types.GetPromptResult:
        """Prompt ``name`` filled with ``arguments``; `ToolServerError` on failure."""
        values = {str(k): str(v) for k, v in (arguments or {}).items()}
        return await self._request(
            "prompts/get", lambda client: client.get_prompt(name, values or None)
        )

    async def _request(self, what: str, send: Callable[[Client], Awaitable[_T]]) -> _T:
        """One request on the live session, bounded by ``call_timeout``."""
        session, client = await self._session()
        try:
            with anyio.fail_after(self.config.call_timeout):
                return await send(client)
        except Exception as exc:
            raise ToolServerError(self.name, self._failure(session, what, exc)) from exc

    async def _pages(
        self, what: str, fetch: Callable[[str | None], Awaitable[_PageT]]
    ) -> list[_PageT]:
        """Every page of a paginated listing, at most `MAX_TOOL_PAGES` of them."""
        pages: list[_PageT] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_TOOL_PAGES):

            async def send(_client: Client, at: str | None = cursor) -> _PageT:
                return await fetch(at)

            page = await self._request(what, send)
            pages.append(page)
            cursor = page.next_cursor
            if cursor is None:
                return pages
            if cursor in seen:
                raise ToolServerError(self.name, f"{what} pagination repeats a cursor")
            seen.add(cursor)
        raise ToolServerError(self.name, f"{what} lists more than {MAX_TOOL_PAGES} pages")

    async def aclose(self) -> None:
        """Stop every session of this server and wait for them (bounded)."""
        self._closed = True
        self._current = None
        async with anyio.create_task_group() as group:
            for session in list(self._sessions):
                group.start_soon(finish_session, session)

    async def _session(self) -> tuple[Session, Client]:
        """The live session and its client, started (bounded wait) when there is none."""
        async with self._lock:
            if self._closed:
                raise ToolServerError(self.name, "the connection is closed")
            session = self._current
            if session is not None and session.client is not None and not session.stopped.is_set():
                return session, session.client
            session, client = await self._start()
            self._current = session
            self.starts += 1
            return session, client

    async def _start(self) -> tuple[Session, Client]:
        """Start a session and list its tools (which primes the SDK's output schemas)."""
        session = Session()
        self._sessions.add(session)
        self._task_group.start_soon(self._own, session)
        try:
            with anyio.move_on_after(self.config.connect_timeout):
                await session.ready.wait()
            if not session.ready.is_set():
                problem = f"did not {self._start_verb} within {self.config.connect_timeout:g} s"
                raise ToolServerError(self.name, problem + stderr_note(session))
            if session.client is None or session.stopped.is_set():
                problem = f"could not {self._start_verb}: {describe_error(session.error)}"
                raise ToolServerError(self.name, problem + stderr_note(session))
            session.tools = await self._walk_pages(session, session.client)
        except BaseException as exc:  # a failure, or the caller gave up: no orphan session
            session.stop(exc.problem if isinstance(exc, ToolServerError) else "start abandoned")
            if not session.ready.is_set():
                session.scope.cancel()
            raise
        return session, session.client

    async def _walk_pages(self, session: Session, client: Client) -> list[mcp_types.Tool]:
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_TOOL_PAGES):
            try:
                with anyio.fail_after(self.config.call_timeout):
                    page = await client.list_tools(cursor=cursor)
            except Exception as exc:
                raise ToolServerError(self.name, self._failure(session, "tools/list", exc)) from exc
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                return tools
            if cursor in seen:
                self._stop(session, "tool list pagination repeats a cursor")
                raise ToolServerError(self.name, "tool list pagination repeats a cursor")
            seen.add(cursor)
        self._stop(session, "too many pages of tools")
        raise ToolServerError(self.name, f"lists more than {MAX_TOOL_PAGES} pages of tools")

    async def _own(self, session: Session) -> None:
        """Hold one session's contexts, from start until it is told to stop."""
        try:
            with session.scope:
                client = Client(
                    open_transport(self.config, session),
                    cache=None,
                    sampling_callback=self._sampling,
                )
                async with client:
                    session.client = client
                    session.ready.set()
                    await session.stopped.wait()
        except Exception as exc:
            session.error = exc
            logger.debug("MCP server %r session ended with an error", self.name, exc_info=True)
        finally:
            session.stop("the session ended")
            session.ready.set()
            session.close_stderr()
            session.done.set()
            self._sessions.discard(session)

    def _failure(self, session: Session, request: str, exc: Exception) -> str:
        """Describe why ``request`` failed and stop the session unless it is still usable."""
        again = "reconnected" if self.config.url else "restarted"
        if isinstance(exc, TimeoutError):
            problem = f"did not answer {request!r} within {self.config.call_timeout:g} s"
            self._stop(session, problem)
            return f"{problem}; it will be {again} on the next call"
        if session.stopped.is_set() or (
            isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED
        ):
            self._stop(session, "the connection was lost")
            return (
                f"stopped while handling {request!r} ({session.reason}){stderr_note(session)}; "
                f"it will be {again} on the next call"
            )
        if isinstance(exc, MCPError):
            return f"rejected {request!r}: {exc.message}"
        self._stop(session, f"failed on {request!r}")
        return f"failed on {request!r}: {describe_error(exc)}; it will be {again} on the next call"

    def _stop(self, session: Session, reason: str) -> None:
        session.stop(reason)
        if self._current is session:
            self._current = None


@asynccontextmanager
async def open_connection(config: ServerConfig) -> AsyncIterator[MCPConnection]:
    """An `MCPConnection` with its own task group, closed (server stopped) on exit."""
    async with anyio.create_task_group() as task_group:
        connection = MCPConnection(config, task_group)
        try:
            yield connection
        finally:
            await connection.aclose()
