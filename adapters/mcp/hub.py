"""Several MCP servers behind one catalogue of `Tool`s, usable from sync and async code.

`MCPHub` runs an event loop in a background thread (an anyio blocking portal) that
owns every `MCPConnection`. Its tools' ``run`` coroutines can be awaited from any
asyncio event loop, and `MCPHub.call` serves plain synchronous code; both hand the
call to the hub's loop and wait, bounded, for the answer.

Tool names stay as the servers give them, except when two servers expose the same
name: then each of those tools becomes ``<server>_<tool>``. Server names must be unique:
a name `ServerConfig.parse` derived is made unique (``notes``, ``notes_2``); two servers
given the same name explicitly raise `ServerNameError`.

Which tools are read-only is decided per tool on the server's own tool name (before
renaming), with each server's ``trust_annotations``, then ``read_only_overrides``
(keyed by exposed name) win; see docs/read-only.md.

Resources and prompts are named by server (`ResourceInfo.server`, `PromptInfo.qualified`
is ``server/name``). ``progress`` receives every call's progress notifications (a call
may add its own callback), and ``sampling`` answers the servers' sampling requests
(`toolweave.adapters.mcp.sampling`); both are optional. See docs/mcp.md.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from contextlib import suppress
from dataclasses import replace
from types import TracebackType
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import mcp_types
from anyio.abc import TaskGroup, TaskStatus
from anyio.from_thread import BlockingPortal, start_blocking_portal

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
from toolweave.adapters.mcp.config import ServerConfig
from toolweave.adapters.mcp.connection import CLOSE_TIMEOUT, MAX_TOOL_PAGES, MCPConnection
from toolweave.adapters.mcp.convert import safe_tool_name, spec_and_decision
from toolweave.adapters.mcp.progress import ProgressCallback, sdk_progress_callback
from toolweave.adapters.mcp.sampling import SamplingCallback, sdk_sampling_callback
from toolweave.errors import ToolServerError, ToolSpecError
from toolweave.readonly import ReadOnlyDecision, check_overrides
from toolweave.tools import Tool, ToolResult, ToolRunner

__all__ = ["MCPHub", "ServerNameError", "assign_names", "unique_server_names"]

logger = logging.getLogger(__name__)

#: Slack on top of a server's own timeouts before a caller stops waiting for the hub.
_WAIT_MARGIN = 10.0

_T = TypeVar("_T")
_Item = TypeVar("_Item")
#: Pages a resource or prompt listing may take, for the bound on waiting for it.
MAX_LISTING_PAGES = MAX_TOOL_PAGES


class ServerNameError(ToolServerError, ValueError):
    """Two servers were given the same name explicitly (``NAME=command`` or ``name=``)."""


class MCPHub:
    """Tools of several MCP servers, one persistent session each.

    Starting the hub starts every server and lists its tools; a server that cannot be
    started raises `ToolServerError`, or with ``skip_failed`` is left out and recorded
    in `errors`. Calls of one server's tools never wait on another server. Close the
    hub (``with``, ``async with``, `close` or `aclose`) to stop every server process.

    ``read_only_overrides`` maps exposed tool names to a forced read-only answer; a
    name that is no tool raises `ToolSpecError`, or is logged as a warning when a
    server was skipped or on a ``refresh`` (the tool may come back).

    ``progress`` is called with a `ProgressUpdate` for each progress notification of
    any call (on the hub's thread: keep it quick). ``sampling`` answers the servers'
    ``sampling/createMessage`` requests (see `chat_model_sampler`); without it the hub
    does not offer sampling and servers cannot ask.
    """

    def __init__(
        self,
        servers: Iterable[ServerConfig | str],
        *,
        skip_failed: bool = False,
        read_only_overrides: Mapping[str, bool] | None = None,
        progress: ProgressCallback | None = None,
        sampling: SamplingCallback | None = None,
    ) -> None:
        configs = unique_server_names(
            [s if isinstance(s, ServerConfig) else ServerConfig.parse(s) for s in servers]
        )
        self._configs = {config.name: config for config in configs}
        self._progress = progress
        self._sampling = sampling
        self._resource_servers: dict[str, str] = {}
        self._prompt_servers: dict[str, list[str]] = {}
        self._overrides = {name: bool(value) for name, value in (read_only_overrides or {}).items()}
        self._decisions: dict[str, ReadOnlyDecision] = {}
        self._connections: dict[str, MCPConnection] = {}
        self._tools: tuple[Tool, ...] = ()
        self._routes: dict[str, tuple[str, str]] = {}
        #: Servers left out by ``skip_failed``, with the reason.
        self.errors: dict[str, ToolServerError] = {}
        self._closed = False
        self._close_lock = threading.Lock()
        self._stopping: anyio.Event | None = None
        self._portal_context = start_blocking_portal(name="toolweave-mcp")
        self._portal: BlockingPortal = self._portal_context.__enter__()
        _OPEN_HUBS.add(self)
        try:
            _, self._task_group = self._portal.start_task(self._supervise)
            self._load(skip_failed, refresh=False)
        except BaseException:
            self.close()
            raise

    @classmethod
    async def open(
        cls,
        servers: Iterable[ServerConfig | str],
        *,
        skip_failed: bool = False,
        read_only_overrides: Mapping[str, bool] | None = None,
        progress: ProgressCallback | None = None,
        sampling: SamplingCallback | None = None,
    ) -> MCPHub:
        """Start a hub without blocking the caller's event loop."""
        configs = list(servers)
        return await anyio.to_thread.run_sync(
            lambda: cls(
                configs,
                skip_failed=skip_failed,
                read_only_overrides=read_only_overrides,
                progress=progress,
                sampling=sampling,
            )
        )

    @classmethod
    def from_config_file(cls, path: str | os.PathLike[str], **options: Any) -> MCPHub:
        """A hub for the servers of an ``mcpServers`` file (`load_mcp_config`).

        ``options`` are the other `MCPHub` arguments (``skip_failed``, ``sampling``, ...).
        """
        from toolweave.adapters.mcp.config_file import load_mcp_config

        return cls(load_mcp_config(path), **options)

    @property
    def servers(self) -> tuple[str, ...]:
        """Names of the servers whose tools the hub serves."""
        return tuple(name for name in self._configs if name not in self.errors)

    @property
    def tools(self) -> tuple[Tool, ...]:
        """Every tool of every server, under its exposed name."""
        return self._tools

    @property
    def read_only_decisions(self) -> dict[str, ReadOnlyDecision]:
        """Why each exposed tool is read-only or not (source and reason), by exposed name."""
        return dict(self._decisions)

    def list_tools(self, *, refresh: bool = False) -> list[Tool]:
        """The tools; ``refresh`` asks every server for its list again first."""
        if refresh:
            self._check_open()
            self._load(skip_failed=bool(self.errors), refresh=True)
        return list(self._tools)

    def tool(self, name: str) -> Tool:
        """The tool exposed as ``name``; `KeyError` if there is none."""
        for tool in self._tools:
            if tool.name == name:
                return tool
        raise KeyError(name)

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

    def close(self) -> None:
        """Stop every server and the hub's loop; waits for the processes (bounded)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        _OPEN_HUBS.discard(self)
        try:
            self._portal.start_task_soon(self._shutdown).result(timeout=2 * CLOSE_TIMEOUT + 5)
        except Exception:
            logger.warning("MCP servers did not shut down cleanly", exc_info=True)
        finally:
            with suppress(RuntimeError):  # the portal has already stopped
                self._portal.call(self._portal.stop, True)
            self._portal_context.__exit__(None, None, None)

    async def aclose(self) -> None:
        """`close` without blocking the caller's event loop."""
        await anyio.to_thread.run_sync(self.close)

    def __enter__(self) -> MCPHub:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> MCPHub:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- inside the hub's loop -------------------------------------------------------

    async def _supervise(self, *, task_status: TaskStatus[TaskGroup]) -> None:
        """Hold the task group the session tasks run in, until the hub closes."""
        self._stopping = anyio.Event()
        async with anyio.create_task_group() as task_group:
            task_status.started(task_group)
            await self._stopping.wait()
            task_group.cancel_scope.cancel()

    async def _list_all(self, skip_failed: bool, refresh: bool) -> None:
        listings: dict[str, list[mcp_types.Tool]] = {}
        errors: dict[str, ToolServerError] = {}

        async def list_one(config: ServerConfig) -> None:
            connection = self._connections.get(config.name)
            if connection is None:
                connection = self._new_connection(config)
                self._connections[config.name] = connection
            try:
                listings[config.name] = await connection.list_tools(refresh=refresh)
            except ToolServerError as exc:
                errors[config.name] = exc
                await connection.aclose()
                del self._connections[config.name]

        async with anyio.create_task_group() as group:
            for config in self._configs.values():
                group.start_soon(list_one, config)
        if errors and not skip_failed:
            raise next(errors[name] for name in self._configs if name in errors)
        self._tools, self._routes, self._decisions = self._expose(
            {name: listings[name] for name in self._configs if name in listings}
        )
        self.errors = errors
        try:
            check_overrides(self._overrides, self._routes)
        except ToolSpecError as exc:
            if refresh or errors:  # the tool may belong to a server that is down
                logger.warning("MCP hub: %s", exc)
            else:
                raise

    def _expose(
        self, listings: Mapping[str, Sequence[mcp_types.Tool]]
    ) -> tuple[tuple[Tool, ...], dict[str, tuple[str, str]], dict[str, ReadOnlyDecision]]:
        names = assign_names(
            {server: [t.name for t in tools] for server, tools in listings.items()}
        )
        tools: list[Tool] = []
        routes: dict[str, tuple[str, str]] = {}
        decisions: dict[str, ReadOnlyDecision] = {}
        for server, server_tools in listings.items():
            trust = self._configs[server].trust_annotations
            for definition in server_tools:
                exposed = names.get((server, definition.name))
                if exposed is None or exposed in routes:
                    continue
                try:
                    spec, decision = spec_and_decision(definition, exposed, trust_annotations=trust)
                except ToolSpecError as exc:
                    logger.warning("MCP server %r: skipping tool: %s", server, exc)
                    continue
                if exposed in self._overrides:
                    value = self._overrides[exposed]
                    reason = f"user override {exposed}={str(value).lower()}"
                    decision = ReadOnlyDecision(exposed, value, "override", reason)
                    spec = spec.with_read_only(value)
                tools.append(Tool(spec, self._runner(exposed), f"mcp:{server}", definition))
                routes[exposed] = (server, definition.name)
                decisions[exposed] = decision
        return tuple(tools), routes, decisions

    def _new_connection(self, config: ServerConfig) -> MCPConnection:
        sampling = None
        if self._sampling is not None:
            sampling = sdk_sampling_callback(
                config.name, self._sampling, timeout=config.call_timeout
            )
        return MCPConnection(config, self._task_group, sampling=sampling)

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

    def _runner(self, name: str) -> ToolRunner:
        async def run(arguments: Mapping[str, Any]) -> ToolResult:
            return await self.acall(name, arguments)

        return run

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

    async def _shutdown(self) -> None:
        async with anyio.create_task_group() as group:
            for connection in self._connections.values():
                group.start_soon(connection.aclose)
        if self._stopping is not None:
            self._stopping.set()

    # -- from the caller's thread ----------------------------------------------------

    def _load(self, skip_failed: bool, refresh: bool) -> None:
        bound = max(
            (c.connect_timeout + 2 * c.call_timeout for c in self._configs.values()), default=0
        )
        future = self._portal.start_task_soon(self._list_all, skip_failed, refresh)
        try:
            future.result(timeout=bound + _WAIT_MARGIN)
        except TimeoutError:
            future.cancel()
            raise ToolServerError(
                ", ".join(self._configs), "the servers did not list their tools in time"
            ) from None

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
            return future.result(timeout=connect + requests * per_request + _WAIT_MARGIN)
        except TimeoutError:
            future.cancel()
            raise ToolServerError(who, "no answer from the MCP hub in time") from None

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

    def _wait_bound(self, name: str) -> float:
        config = self._configs.get(self._server_of(name))
        if config is None:
            return _WAIT_MARGIN
        return config.connect_timeout + config.call_timeout + _WAIT_MARGIN

    def _no_answer(self, name: str) -> str:
        server = self._server_of(name)
        return str(ToolServerError(server, f"no answer for {name!r} from the MCP hub in time"))

    def _server_of(self, name: str) -> str:
        route = self._routes.get(name)
        return route[0] if route else "?"

    def _check_open(self) -> None:
        if self._closed:
            raise ToolServerError(", ".join(self._configs), "the MCP hub is closed")


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


_OPEN_HUBS: weakref.WeakSet[MCPHub] = weakref.WeakSet()


@atexit.register
def _close_open_hubs() -> None:
    """Do not leave server processes behind when a program forgets to close its hub."""
    for hub in list(_OPEN_HUBS):
        hub.close()
