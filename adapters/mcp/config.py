"""How to reach an MCP server: `ServerConfig`, for stdio subprocesses and streamable HTTP."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from toolweave.adapters.mcp.convert import DEFAULT_MAX_OUTPUT_CHARS, safe_tool_name

__all__ = ["ServerConfig"]

_NAMED = re.compile(r"([A-Za-z0-9_.-]+)=(.+)", re.DOTALL)


@dataclass(frozen=True)
class ServerConfig:
    """How to reach one MCP server: ``command`` (stdio subprocess) or ``url`` (streamable HTTP).

    ``env`` is added to the small safe environment the SDK gives a subprocess (PATH,
    HOME, ...), not to this process's whole environment. Timeouts are in seconds:
    ``connect_timeout`` bounds start-up and handshake, ``call_timeout`` each request.
    ``max_output_chars`` caps what one call passes on to the model.

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
    call_timeout: float = 30.0
    connect_timeout: float = 20.0
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS
    trust_annotations: bool = True
    name_derived: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "command", tuple(self.command))
        if self.env is not None:
            object.__setattr__(self, "env", dict(self.env))
        if not self.name or safe_tool_name(self.name) != self.name:
            raise ValueError(
                f"server name must be letters, digits, '_', '.' or '-', got {self.name!r}"
            )
        if bool(self.command) == bool(self.url):
            raise ValueError(f"server {self.name!r}: give either a command or a url")
        if self.url and urlsplit(self.url).scheme not in ("http", "https"):
            raise ValueError(f"server {self.name!r}: url must be http(s), got {self.url!r}")
        if self.call_timeout <= 0 or self.connect_timeout <= 0 or self.max_output_chars <= 0:
            raise ValueError(f"server {self.name!r}: timeouts and max_output_chars must be > 0")

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

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"


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
