"""The state of one MCP session, how it is stopped, and how its end is described.

A `Session` is one server process (or HTTP session) and the events of the task that
owns its contexts (see `MCPConnection`). `finish_session` stops one within
`CLOSE_TIMEOUT`; `stderr_note` and `describe_error` turn what is known about a failure
(the HTTP status, the server's last words on stderr, an exception) into text for the user.
"""

from __future__ import annotations

import os
from contextlib import suppress
from dataclasses import dataclass, field
from typing import IO

import anyio
import mcp_types
from mcp import Client, MCPError
from mcp_types import CONNECTION_CLOSED

__all__ = [
    "CLOSE_TIMEOUT",
    "Session",
    "describe_error",
    "finish_session",
    "read_tail",
    "stderr_note",
]

#: How long a session gets to shut down (the SDK escalates stdin close, SIGTERM, SIGKILL).
CLOSE_TIMEOUT = 10.0


@dataclass(eq=False)
class Session:
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
            self.stderr_tail = read_tail(self.stderr)
            self.stderr.close()
            self.stderr = None


async def finish_session(session: Session) -> None:
    """Stop a session and wait for its task; cancel it if the polite way takes too long."""
    session.stop("the connection was closed")
    with anyio.move_on_after(CLOSE_TIMEOUT):
        await session.done.wait()
    if not session.done.is_set():
        session.scope.cancel()
        with anyio.move_on_after(CLOSE_TIMEOUT):
            await session.done.wait()


def stderr_note(session: Session) -> str:
    if session.http_status is not None:
        return f"; the server answered {session.http_status}"
    tail = read_tail(session.stderr) if session.stderr is not None else session.stderr_tail
    return f"; its last words on stderr: {tail}" if tail else ""


def read_tail(file: IO[str], lines: int = 3, chars: int = 400) -> str:
    """The last few non-empty lines a server wrote to stderr, on one line."""
    with suppress(OSError, ValueError):
        fd = file.fileno()
        size = os.fstat(fd).st_size
        data = os.pread(fd, 4096, max(0, size - 4096)).decode("utf-8", "replace")
        kept = [line.strip() for line in data.splitlines() if line.strip()][-lines:]
        return " | ".join(kept)[-chars:]
    return ""


def describe_error(exc: BaseException | None) -> str:
    """One line for an exception, looking inside exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if exc is None:
        return "unknown error"
    if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
        return "the server closed the connection"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
