"""The resources and prompts of an `MCPHub`'s servers, listed and fetched across servers.

`HubCatalog` is a base class of `MCPHub` (the hub sets the attributes it declares).
Listings ask every server at once and keep server order; the first server that fails
raises. Resources and prompts are named by server (`ResourceInfo.server`,
`PromptInfo.qualified` is ``server/name``): a resource is read from the server that
listed it, and a prompt is found as ``server/prompt`` or by a name only one server has.
Each request is waited for with `HubCalls._blocking`, bounded by the servers' timeouts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

import anyio

from toolweave.adapters.mcp.catalog import (
    PromptInfo,
    PromptMessage,
    ResourceContents,
    ResourceInfo,
    prompt_info,
    prompt_messages,
    resource_contents,
    resource_info,
)
from toolweave.adapters.mcp.connection import MCPConnection
from toolweave.adapters.mcp.hub_calls import HubCalls
from toolweave.errors import ToolServerError

__all__ = ["HubCatalog"]

_Item = TypeVar("_Item")


class HubCatalog(HubCalls):
    """Resources and prompts of an `MCPHub`'s servers, besides its tools and calls."""

    _resource_servers: dict[str, str]
    _prompt_servers: dict[str, list[str]]

    if TYPE_CHECKING:

        @property
        def servers(self) -> tuple[str, ...]: ...

    def list_resources(self) -> list[ResourceInfo]:
        """Every server's resources (servers without resources add none); blocking, bounded.

        Raises `ToolServerError` when a server cannot list them.
        """
        listed = self._blocking(self._list_resources, pages=True)
        self._resource_servers = {}
        for item in listed:
            self._resource_servers.setdefault(item.uri, item.server)
        return listed

    def read_resource(self, uri: str, *, server: str | None = None) -> ResourceContents:
        """The contents of resource ``uri`` of ``server`` (default: the server that listed
        it in `list_resources`, or the only server); blocking, bounded.

        Raises `ToolServerError` when it cannot be read, `KeyError` for an unknown server.
        """
        name = server or self._resource_servers.get(uri) or self._only_server("resource", uri)
        connection = self._connection(name)
        config = self._configs[name]

        async def read() -> ResourceContents:
            result = await connection.read_resource(uri)
            return resource_contents(name, uri, result, config.max_content_bytes)

        return self._blocking(read, server=name)

    def list_prompts(self) -> list[PromptInfo]:
        """Every server's prompts (servers without prompts add none); blocking, bounded.

        Raises `ToolServerError` when a server cannot list them.
        """
        listed = self._blocking(self._list_prompts, pages=True)
        self._prompt_servers = {}
        for item in listed:
            self._prompt_servers.setdefault(item.name, []).append(item.server)
        return listed

    def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> list[PromptMessage]:
        """Prompt ``name`` (``server/prompt``, or a prompt name only one server has in
        `list_prompts`, or any name when there is one server), filled with ``arguments``.

        Raises `ToolServerError` when the server refuses or fails, `KeyError` when the
        name names no server.
        """
        server, _, prompt = name.partition("/")
        if not prompt or server not in self._configs:
            server, prompt = self._prompt_server(name), name
        connection = self._connection(server)
        config = self._configs[server]

        async def get() -> list[PromptMessage]:
            result = await connection.get_prompt(prompt, arguments)
            return prompt_messages(result, config.max_content_bytes)

        return self._blocking(get, server=server)

    # -- inside the hub's loop -------------------------------------------------------

    async def _list_resources(self) -> list[ResourceInfo]:
        async def listing(name: str, connection: MCPConnection) -> list[ResourceInfo]:
            return [resource_info(name, r) for r in await connection.list_resources()]

        return await self._from_every_server(listing)

    async def _list_prompts(self) -> list[PromptInfo]:
        async def listing(name: str, connection: MCPConnection) -> list[PromptInfo]:
            return [prompt_info(name, p) for p in await connection.list_prompts()]

        return await self._from_every_server(listing)

    async def _from_every_server(
        self, listing: Callable[[str, MCPConnection], Awaitable[list[_Item]]]
    ) -> list[_Item]:
        """`listing` of every server at once, in server order; the first failure raises."""
        found: dict[str, list[_Item]] = {}
        errors: dict[str, ToolServerError] = {}

        async def one(name: str, connection: MCPConnection) -> None:
            try:
                found[name] = await listing(name, connection)
            except ToolServerError as exc:
                errors[name] = exc

        async with anyio.create_task_group() as group:
            for name, connection in self._connections.items():
                group.start_soon(one, name, connection)
        if errors:
            raise next(errors[name] for name in self._configs if name in errors)
        return [item for name in self._configs for item in found.get(name, [])]

    # -- from the caller's thread ----------------------------------------------------

    def _connection(self, server: str) -> MCPConnection:
        connection = self._connections.get(server)
        if connection is None:
            known = ", ".join(self.servers)
            raise KeyError(f"no MCP server {server!r}; the servers are: {known}")
        return connection

    def _only_server(self, what: str, name: str) -> str:
        if len(self.servers) == 1:
            return self.servers[0]
        raise KeyError(f"which server has {what} {name!r}? give server= (or list them first)")

    def _prompt_server(self, name: str) -> str:
        servers = self._prompt_servers.get(name)
        if servers and len(servers) == 1:
            return servers[0]
        if servers:
            raise KeyError(f"prompt {name!r} is on {', '.join(servers)}: name it server/{name}")
        return self._only_server("prompt", name)
