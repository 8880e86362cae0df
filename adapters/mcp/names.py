"""Names of the servers behind an `MCPHub` and of the tools it exposes.

Server names must be unique: a name `ServerConfig.parse` derived is made unique
(``notes``, ``notes_2``); two servers given the same name explicitly raise
`ServerNameError`. Tool names stay as the servers give them, made safe, except when two
servers expose the same name: then each of those tools becomes ``<server>_<tool>``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace

from toolweave.adapters.mcp.config import ServerConfig
from toolweave.adapters.mcp.convert import safe_tool_name
from toolweave.errors import ToolServerError

__all__ = ["ServerNameError", "assign_names", "unique_server_names"]


class ServerNameError(ToolServerError, ValueError):
    """Two servers were given the same name explicitly (``NAME=command`` or ``name=``)."""


def unique_server_names(configs: Sequence[ServerConfig]) -> list[ServerConfig]:
    """``configs`` with unique names: a derived name that is taken gets ``_2``, ``_3``, ...

    Raises `ServerNameError` when two servers were given the same name explicitly.
    """
    explicit = Counter(c.name for c in configs if not c.name_derived)
    repeated = sorted(name for name, n in explicit.items() if n > 1)
    if repeated:
        raise ServerNameError(
            repeated[0],
            "two servers have this name; give each a different one (NAME=command)",
        )
    taken = set(explicit)
    out: list[ServerConfig] = []
    for config in configs:
        if config.name_derived:
            name, suffix = config.name, 1
            while name in taken:
                suffix += 1
                name = f"{config.name}_{suffix}"
            config = replace(config, name=name) if name != config.name else config
        taken.add(config.name)
        out.append(config)
    return out


def assign_names(listings: Mapping[str, Sequence[str]]) -> dict[tuple[str, str], str]:
    """Exposed name of each ``(server, tool)``: the tool's own name made safe, unless
    another server has it too; then ``<server>_<tool>`` (with ``_2``, ... if still taken).

    A name a server lists twice keeps its first definition only.
    """
    counts = Counter(safe_tool_name(t) for tools in listings.values() for t in dict.fromkeys(tools))
    names: dict[tuple[str, str], str] = {}
    taken: set[str] = set()
    clashes: list[tuple[str, str]] = []
    for server, tools in listings.items():
        for tool in tools:
            base = safe_tool_name(tool)
            if (server, tool) in names:
                continue
            if counts[base] > 1:
                clashes.append((server, tool))
                continue
            names[server, tool] = base
            taken.add(base)
    for server, tool in clashes:
        if (server, tool) in names:
            continue
        candidate = base = f"{safe_tool_name(server)}_{safe_tool_name(tool)}"
        suffix = 1
        while candidate in taken:
            suffix += 1
            candidate = f"{base}_{suffix}"
        names[server, tool] = candidate
        taken.add(candidate)
    return names
