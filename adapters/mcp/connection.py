"""One persistent MCP session per server, restarted when it breaks.

`MCPConnection` keeps one session to a server (see `ServerConfig`) open across calls.
The SDK's transports and sessions are async context managers that must be entered and
left in the same task, so each session lives in a task of its own that owns the
contexts until it is told to stop; calls from other tasks of the same event loop use
the session meanwhile.

A call that times out or finds the server gone returns an error `ToolResult` naming
the server and the problem, and the session is torn down; the next call starts a new
one. A call is never sent twice: a tool that is not read-only must not run twice.
A result whose structured content breaks the tool's ``outputSchema`` is an answer, not
a broken session: it comes back as an error `ToolResult` saying that the call ran, why
the result does not fit and what it returned (capped), and the session stays up.

Besides tools, a connection lists and reads resources and lists and gets prompts (each
request bounded by ``call_timeout``, listings by `MAX_TOOL_PAGES` pages), passes a
call's progress notifications to a callback, and answers the server's sampling
requests with the SDK sampling callback it was given.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from types import TracebackType
from typing import IO, Any, Protocol, Self, TypeVar

import anyio
import httpx2
import mcp_types
from anyio.abc import TaskGroup
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client.session import SamplingFnT
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED

from toolweave.adapters.mcp.config import ServerConfig
from toolweave.adapters.mcp.convert import tool_result
from toolweave.errors import ToolServerError
from toolweave.tools import ToolResult

__all__ = ["MCPConnection", "open_connection"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
_PageT = TypeVar("_PageT", mcp_types.ListResourcesResult, mcp_types.ListPromptsResult)

#: A server listing more pages of tools than this is treated as broken.
MAX_TOOL_PAGES = 100
#: How long a session gets to shut down (the SDK escalates stdin close, SIGTERM, SIGKILL).
CLOSE_TIMEOUT = 10.0
#: How long an HTTP stream may stay silent before the connection counts as lost.
HTTP_READ_TIMEOUT = 300.0


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
        self._current: _Session | None = None
        self._sessions: set[_Session] = set()
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
        return await self._checked(client, name, result)

    async def _checked(
        self, client: Client, name: str, result: mcp_types.CallToolResult
    ) -> ToolResult:
        """The result, or an error observation when it breaks the tool's output schema.

        The SDK's own check (``validate_tool_result``) decides; a mismatch says the call
        ran, why the result does not fit, and what it returned. The session stays up:
        the server answered the protocol correctly, and the call is never sent again.
        """
        converted = tool_result(result, self.config.max_output_chars, self.config.max_content_bytes)
        if result.is_error:
            return converted
        try:
            with anyio.fail_after(self.config.call_timeout):
                await client.session.validate_tool_result(name, result)
        except Exception as exc:
            verdict = (
                "its result does not match the tool's output schema"
                if isinstance(exc, RuntimeError)
                else "its result could not be checked against the tool's output schema"
            )
            # converted.text is capped already; structured content alone is capped here.
            shown = converted.text or _cap(
                _json_text(result.structured_content), self.config.max_output_chars
            )
            problem = (
                f"{name!r} ran, but {verdict} ({_schema_problem(exc)}); "
                f"it returned: {shown or '(nothing)'}"
            )
            return ToolResult.error(str(ToolServerError(self.name, problem)))
        return converted

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
                group.start_soon(_finish, session)

    async def _session(self) -> tuple[_Session, Client]:
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

    async def _start(self) -> tuple[_Session, Client]:
        """Start a session and list its tools (which primes the SDK's output schemas)."""
        session = _Session()
        self._sessions.add(session)
        self._task_group.start_soon(self._own, session)
        try:
            with anyio.move_on_after(self.config.connect_timeout):
                await session.ready.wait()
            if not session.ready.is_set():
                problem = f"did not {self._start_verb} within {self.config.connect_timeout:g} s"
                raise ToolServerError(self.name, problem + _stderr_note(session))
            if session.client is None or session.stopped.is_set():
                problem = f"could not {self._start_verb}: {_describe(session.error)}"
                raise ToolServerError(self.name, problem + _stderr_note(session))
            session.tools = await self._walk_pages(session, session.client)
        except BaseException as exc:  # a failure, or the caller gave up: no orphan session
            session.stop(exc.problem if isinstance(exc, ToolServerError) else "start abandoned")
            if not session.ready.is_set():
                session.scope.cancel()
            raise
        return session, session.client

    async def _walk_pages(self, session: _Session, client: Client) -> list[mcp_types.Tool]:
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

    async def _own(self, session: _Session) -> None:
        """Hold one session's contexts, from start until it is told to stop."""
        try:
            with session.scope:
                client = Client(
                    self._transport(session), cache=None, sampling_callback=self._sampling
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

    @asynccontextmanager
    async def _transport(self, session: _Session) -> AsyncIterator[tuple[_WatchedReadStream, Any]]:
        """The SDK transport, with its read side watched so a vanished server stops the session."""
        config = self.config
        if config.url:
            gone = "the server closed the connection"
            async with self._http_transport(session) as (read_stream, write_stream):
                yield _WatchedReadStream(read_stream, lambda: session.stop(gone)), write_stream
            return
        # Closed by the session's owner when the session ends (see _Session.close_stderr).
        session.stderr = tempfile.TemporaryFile(  # noqa: SIM115
            "w+", encoding="utf-8", errors="replace"
        )
        params = StdioServerParameters(
            command=config.command[0],
            args=list(config.command[1:]),
            env=dict(config.env) if config.env else None,
            cwd=config.cwd,
        )
        exited = "the server process exited"
        async with stdio_client(params, errlog=session.stderr) as (read_stream, write_stream):
            yield _WatchedReadStream(read_stream, lambda: session.stop(exited)), write_stream

    @asynccontextmanager
    async def _http_transport(self, session: _Session) -> AsyncIterator[tuple[Any, Any]]:
        """Streamable HTTP or SSE, with the config's headers and auth, bounded waits.

        The last HTTP error status is kept on the session: the SDK reports a refused
        request without it, and "401 Unauthorized" is what a user needs to read.
        """
        config = self.config
        assert config.url is not None

        async def note_status(response: httpx2.Response) -> None:
            if response.status_code >= 400:
                session.http_status = f"HTTP {response.status_code} {response.reason_phrase}"

        def client(
            headers: dict[str, str] | None = None,
            timeout: httpx2.Timeout | None = None,
            auth: httpx2.Auth | None = None,
        ) -> httpx2.AsyncClient:
            http = create_mcp_http_client(headers=headers, timeout=timeout, auth=auth)
            http.event_hooks["response"].append(note_status)
            return http

        headers = dict(config.headers) if config.headers else None
        if config.transport == "sse":
            async with sse_client(
                config.url,
                headers=headers,
                timeout=config.connect_timeout,
                sse_read_timeout=HTTP_READ_TIMEOUT,
                httpx_client_factory=client,
                auth=config.auth,
            ) as streams:
                yield streams
            return
        timeout = httpx2.Timeout(config.connect_timeout, read=HTTP_READ_TIMEOUT)
        http = client(headers=headers, timeout=timeout, auth=config.auth)
        async with http, streamable_http_client(config.url, http_client=http) as streams:
            yield streams

    def _failure(self, session: _Session, request: str, exc: Exception) -> str:
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
                f"stopped while handling {request!r} ({session.reason}){_stderr_note(session)}; "
                f"it will be {again} on the next call"
            )
        if isinstance(exc, MCPError):
            return f"rejected {request!r}: {exc.message}"
        self._stop(session, f"failed on {request!r}")
        return f"failed on {request!r}: {_describe(exc)}; it will be {again} on the next call"

    def _stop(self, session: _Session, reason: str) -> None:
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


@dataclass(eq=False)
class _Session:
    """One server process (or HTTP session) and the events of the task that owns it."""

    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    ready: anyio.Event = field(default_factory=anyio.Event)
    stopped: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    client: Client | None = None
    tools: list[mcp_types.Tool] | None = None
    error: BaseException | None = None
    reason: str | None = None
    stderr: IO[str] | None = None
    stderr_tail: str = ""
    http_status: str | None = None

    def stop(self, reason: str) -> None:
        """Ask the owning task to leave the contexts; the first reason given is kept."""
        if self.reason is None:
            self.reason = reason
        self.stopped.set()

    def close_stderr(self) -> None:
        if self.stderr is not None:
            self.stderr_tail = _read_tail(self.stderr)
            self.stderr.close()
            self.stderr = None


class _Receiver(Protocol):
    """The read side of an SDK transport."""

    async def receive(self) -> SessionMessage | Exception: ...

    async def aclose(self) -> None: ...


class _WatchedReadStream:
    """A transport's read stream that reports its end (server gone) to a callback."""

    def __init__(self, inner: _Receiver, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


async def _finish(session: _Session) -> None:
    """Stop a session and wait for its task; cancel it if the polite way takes too long."""
    session.stop("the connection was closed")
    with anyio.move_on_after(CLOSE_TIMEOUT):
        await session.done.wait()
    if not session.done.is_set():
        session.scope.cancel()
        with anyio.move_on_after(CLOSE_TIMEOUT):
            await session.done.wait()


def _stderr_note(session: _Session) -> str:
    if session.http_status is not None:
        return f"; the server answered {session.http_status}"
    tail = _read_tail(session.stderr) if session.stderr is not None else session.stderr_tail
    return f"; its last words on stderr: {tail}" if tail else ""


def _read_tail(file: IO[str], lines: int = 3, chars: int = 400) -> str:
    """The last few non-empty lines a server wrote to stderr, on one line."""
    with suppress(OSError, ValueError):
        fd = file.fileno()
        size = os.fstat(fd).st_size
        data = os.pread(fd, 4096, max(0, size - 4096)).decode("utf-8", "replace")
        kept = [line.strip() for line in data.splitlines() if line.strip()][-lines:]
        return " | ".join(kept)[-chars:]
    return ""


def _schema_problem(exc: BaseException, chars: int = 300) -> str:
    """One line on why a result failed its output schema (where and what, if known)."""
    cause = exc.__cause__
    where = getattr(cause, "json_path", None)
    message = getattr(cause, "message", None)
    if isinstance(where, str) and isinstance(message, str):
        text = f"at {where}: {message}"
    elif isinstance(exc, TimeoutError):
        text = "the check timed out"
    else:
        text = _describe(exc) if not isinstance(exc, RuntimeError) else str(exc)
    return _cap(" ".join(text.split()), chars)


def _json_text(value: Any) -> str:
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, default=str)


def _cap(text: str, chars: int) -> str:
    if len(text) <= chars:
        return text
    return f"{text[:chars]}... [{len(text) - chars} more characters]"


def _describe(exc: BaseException | None) -> str:
    """One line for an exception, looking inside exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if exc is None:
        return "unknown error"
    if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
        return "the server closed the connection"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
