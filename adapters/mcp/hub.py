"""Several MCP servers behind one catalogue of `Tool`s, usable from sync and async code.

`MCPHub` runs an event loop in a background thread (an anyio blocking portal) that
owns every `MCPConnection`. Its tools' ``run`` coroutines can be awaited from any
asyncio event loop, and `MCPHub.call` serves plain synchronous code; both hand the
call to the hub's loop and wait, bounded, for the answer.

Tool names stay as the servers give them, except when two servers expose the same
name: then each of those tools becomes ``<server>_<tool>``. Server names must be unique;
see `toolweave.adapters.mcp.names`. The base classes of `MCPHub` hold the tool calls
with their time bounds (`hub_calls`) and the resources and prompts (`hub_catalog`).

Which tools are read-only is decided per tool on the server's own tool name (before
renaming), with each server's ``trust_annotations``, then ``read_only_overrides``
(keyed by exposed name) win; see docs/read-only.md.

Resources and prompts are named by server (`ResourceInfo.server`, `PromptInfo.qualified`
is ``server/name``). ``progress`` receives every call's progress notifications (a call
may add its own callback), and ``sampling`` answers the servers' sampling requests
(`toolweave.adapters.mcp.sampling`); both are optional. See docs/mcp.md.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from types import TracebackType
from typing import Any

import anyio
import anyio.to_thread
import mcp_types
from anyio.abc import TaskGroup, TaskStatus
from anyio.from_thread import BlockingPortal, start_blocking_portal

from toolweave.adapters.mcp.config import ServerConfig
from toolweave.adapters.mcp.connection import CLOSE_TIMEOUT, MCPConnection
from toolweave.adapters.mcp.convert import spec_and_decision
from toolweave.adapters.mcp.hub_calls import MAX_LISTING_PAGES as MAX_LISTING_PAGES
from toolweave.adapters.mcp.hub_calls import WAIT_MARGIN
from toolweave.adapters.mcp.hub_catalog import HubCatalog
from toolweave.adapters.mcp.names import ServerNameError, assign_names, unique_server_names
from toolweave.adapters.mcp.progress import ProgressCallback
from toolweave.adapters.mcp.sampling import SamplingCallback, sdk_sampling_callback
from toolweave.errors import ToolServerError, ToolSpecError
from toolweave.readonly import ReadOnlyDecision, check_overrides
from toolweave.readonly_leads import shared_leads
from toolweave.tools import Tool

__all__ = ["MCPHub", "ServerNameError", "assign_names", "unique_server_names"]

logger = logging.getLogger(__name__)


class MCPHub(HubCatalog):
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
            # A preamble the server's tools share is not any one tool's words.
            leads = shared_leads([d.description or "" for d in server_tools])
            for definition, lead in zip(server_tools, leads, strict=True):
                exposed = names.get((server, definition.name))
                if exposed is None or exposed in routes:
                    continue
                try:
                    spec, decision = spec_and_decision(
                        definition, exposed, trust_annotations=trust, shared_lead=lead
                    )
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
            future.result(timeout=bound + WAIT_MARGIN)
        except TimeoutError:
            future.cancel()
            raise ToolServerError(
                ", ".join(self._configs), "the servers did not list their tools in time"
            ) from None


_OPEN_HUBS: weakref.WeakSet[MCPHub] = weakref.WeakSet()


@atexit.register
def _close_open_hubs() -> None:
    """Do not leave server processes behind when a program forgets to close its hub."""
    for hub in list(_OPEN_HUBS):
        hub.close()
