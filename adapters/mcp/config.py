"""How to reach an MCP server: `ServerConfig`, for stdio subprocesses, streamable HTTP and SSE."""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx2

from toolweave.adapters.mcp.convert import (
    DEFAULT_MAX_CONTENT_BYTES,
    DEFAULT_MAX_OUTPUT_CHARS,
    safe_tool_name,
)

__all__ = ["TRANSPORTS", "ServerConfig", "demo_server_configs"]

_NAMED = re.compile(r"([A-Za-z0-9_.-]+)=(.+)", re.DOTALL)

#: Transport names: ``stdio`` (a subprocess), ``http`` (streamable HTTP), ``sse`` (the older
#: HTTP+SSE transport). Spellings other clients use are accepted as aliases.
TRANSPORTS = ("stdio", "http", "sse")
_ALIASES = {
    "stdio": "stdio",
    "http": "http",
    "streamable_http": "http",
    "streamable-http": "http",
    "streamablehttp": "http",
    "sse": "sse",
}


@dataclass(frozen=True)
class ServerConfig:
    """How to reach one MCP server: ``command`` (stdio subprocess) or ``url`` (HTTP).

    ``env`` is added to the small safe environment the SDK gives a subprocess (PATH,
    HOME, ...), not to this process's whole environment. ``transport`` is ``"stdio"``
    for a command; for a url it is ``"http"`` (streamable HTTP) unless given as ``"sse"``
    or the url's path ends in ``/sse``. ``headers`` are sent with every HTTP request and
    ``auth`` is an ``httpx2.Auth`` (the HTTP client the MCP SDK uses), for example a
    bearer-token or OAuth flow. Timeouts are in seconds: ``connect_timeout`` bounds
    start-up and handshake, ``call_timeout`` each request. ``max_output_chars`` caps the
    text one call passes on to the model, ``max_content_bytes`` the images, audio and
    binary resources one result keeps.

    ``trust_annotations`` says whether the server's tool annotations (``readOnlyHint``,
    ``destructiveHint``) count when deciding which tools are read-only; with False only
    names and descriptions decide (docs/read-only.md). ``name_derived`` is True when
    `parse` made the name up from the command or URL: `MCPHub` may then rename the
    server (``name_2``, ...) when another server has the same name.
    """

    name: str
    command: Sequence[str] = ()
    url: str | None = None
    env: Mapping[str, str] | None = field(default=None, hash=False)
    cwd: str | None = None
    transport: str | None = None
    headers: Mapping[str, str] | None = field(default=None, hash=False, repr=False)
    auth: httpx2.Auth | None = field(default=None, hash=False, compare=False, repr=False)
    call_timeout: float = 30.0
    connect_timeout: float = 20.0
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS
    max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES
    trust_annotations: bool = True
    name_derived: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "command", tuple(self.command))
        if self.env is not None:
            object.__setattr__(self, "env", {str(k): str(v) for k, v in self.env.items()})
        if self.headers is not None:
            object.__setattr__(self, "headers", {str(k): str(v) for k, v in self.headers.items()})
        if not self.name or safe_tool_name(self.name) != self.name:
            raise ValueError(
                f"server name must be letters, digits, '_', '.' or '-', got {self.name!r}"
            )
        if bool(self.command) == bool(self.url):
            raise ValueError(f"server {self.name!r}: give either a command or a url")
        if self.url and urlsplit(self.url).scheme not in ("http", "https"):
            raise ValueError(f"server {self.name!r}: url must be http(s), got {self.url!r}")
        object.__setattr__(self, "transport", self._transport_name())
        if not self.url and (self.headers or self.auth is not None):
            raise ValueError(f"server {self.name!r}: headers and auth need a url")
        if self.auth is not None and not isinstance(self.auth, httpx2.Auth):
            raise ValueError(
                f"server {self.name!r}: auth must be an httpx2.Auth, got {type(self.auth).__name__}"
            )
        if self.call_timeout <= 0 or self.connect_timeout <= 0 or self.max_output_chars <= 0:
            raise ValueError(f"server {self.name!r}: timeouts and max_output_chars must be > 0")
        if self.max_content_bytes < 0:
            raise ValueError(f"server {self.name!r}: max_content_bytes must be >= 0")

    def _transport_name(self) -> str:
        if self.transport is None:
            if not self.url:
                return "stdio"
            return "sse" if urlsplit(self.url).path.rstrip("/").endswith("/sse") else "http"
        kind = _ALIASES.get(self.transport.strip().lower())
        if kind is None:
            known = ", ".join(TRANSPORTS)
            raise ValueError(
                f"server {self.name!r}: unknown transport {self.transport!r}; known: {known}"
            )
        if (kind == "stdio") != (not self.url):
            need = "a command" if kind == "stdio" else "a url"
            raise ValueError(f"server {self.name!r}: transport {kind!r} needs {need}")
        return kind

    @classmethod
    def parse(cls, text: str, *, name: str | None = None, **options: Any) -> ServerConfig:
        """Read ``"python -m server --flag"``, ``"http://host:port/mcp"`` or ``"NAME=..."``.

        Without a name one is derived: the module after ``-m``, else the first argument's
        stem, else the URL's host and port. ``options`` are further `ServerConfig` fields.
        """
        text = text.strip()
        named = _NAMED.fullmatch(text)
        if named and name is None:
            name, text = named[1], named[2].strip()
        options.setdefault("name_derived", not name)
        if urlsplit(text).scheme in ("http", "https"):
            return cls(name=name or _name_from_url(text), url=text, **options)
        argv = shlex.split(text)
        if not argv:
            raise ValueError("empty server command")
        return cls(name=name or _name_from_command(argv), command=argv, **options)


def _name_from_command(argv: Sequence[str]) -> str:
    if "-m" in argv[:-1]:
        return safe_tool_name(argv[argv.index("-m") + 1].rsplit(".", 1)[-1])
    for arg in argv[1:]:
        if not arg.startswith("-"):
            return safe_tool_name(os.path.splitext(os.path.basename(arg.rstrip("/")))[0])
    return safe_tool_name(os.path.basename(argv[0]))


def _name_from_url(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or "server"
    return safe_tool_name(f"{host}_{parts.port}" if parts.port else host)


def demo_server_configs(
    state_dir: str | os.PathLike[str] | None = None,
    *,
    names: Iterable[str] | None = None,
    call_timeout: float = 30.0,
) -> list[ServerConfig]:
    """Configs that start the bundled demo servers (``toolweave.adapters.demo_servers``) over stdio.

    ``state_dir`` holds their JSON state (default: ``$TOOLWEAVE_DEMO_STATE``, else a
    fixed directory under the system temp dir); ``names`` picks some of them.
    """
    from toolweave.adapters.demo_servers import DEMO_SERVERS, STATE_ENV

    wanted = set(DEMO_SERVERS) if names is None else set(names)
    unknown = wanted - set(DEMO_SERVERS)
    if unknown:
        known = ", ".join(DEMO_SERVERS)
        raise ValueError(f"unknown demo servers {sorted(unknown)}; known: {known}")
    directory = state_dir if state_dir is not None else os.environ.get(STATE_ENV)
    env = {STATE_ENV: os.fspath(directory)} if directory is not None else None
    return [
        ServerConfig(
            name=name,
            command=(sys.executable, "-m", module),
            env=env,
            call_timeout=call_timeout,
        )
        for name, module in DEMO_SERVERS.items()
        if name in wanted
    ]
