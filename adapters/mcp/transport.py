"""The SDK transport of one MCP session: stdio, streamable HTTP or SSE, watched for its end.

`open_transport` opens the transport a `ServerConfig` asks for: a subprocess whose
stderr is kept on the `Session` (for error messages), or an HTTP client with the
config's headers and auth whose last error status is kept on the session. Its read side
is wrapped in a `WatchedReadStream`, so a server that vanishes stops the session.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Protocol, Self

import anyio
import httpx2
from mcp import StdioServerParameters, stdio_client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage

from toolweave.adapters.mcp.config import ServerConfig
from toolweave.adapters.mcp.session import Session

__all__ = ["HTTP_READ_TIMEOUT", "WatchedReadStream", "open_transport"]

#: How long an HTTP stream may stay silent before the connection counts as lost.
HTTP_READ_TIMEOUT = 300.0


@asynccontextmanager
async def open_transport(
    config: ServerConfig, session: Session
) -> AsyncIterator[tuple[WatchedReadStream, Any]]:
    """The SDK transport, with its read side watched so a vanished server stops the session."""
    if config.url:
        gone = "the server closed the connection"
        async with _http_transport(config, session) as (read_stream, write_stream):
            yield WatchedReadStream(read_stream, lambda: session.stop(gone)), write_stream
        return
    # Closed by the session's owner when the session ends (see Session.close_stderr).
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
        yield WatchedReadStream(read_stream, lambda: session.stop(exited)), write_stream


@asynccontextmanager
async def _http_transport(config: ServerConfig, session: Session) -> AsyncIterator[tuple[Any, Any]]:
    """Streamable HTTP or SSE, with the config's headers and auth, bounded waits.

    The last HTTP error status is kept on the session: the SDK reports a refused
    request without it, and "401 Unauthorized" is what a user needs to read.
    """
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


class _Receiver(Protocol):
    """The read side of an SDK transport."""

    async def receive(self) -> SessionMessage | Exception: ...

    async def aclose(self) -> None: ...


class WatchedReadStream:
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
