"""Start an `MCPHub` in a background thread, so its servers come up while the caller
imports the agent's modules and loads its model.

    starting = HubStart(configs, sampling=DeferredSampler())
    ...                              # load the model; resolve the sampler
    with starting.result() as hub:   # the hub, or the error that stopped it
        ...

A start that is not wanted any more (the caller failed or was interrupted) is ended with
`cancel`, which closes the hub once it is up, so no server is left running.
"""

from __future__ import annotations

import threading
from typing import Any

from toolweave.adapters.mcp.config import ServerConfig
from toolweave.adapters.mcp.hub import MCPHub

__all__ = ["HubStart"]


class HubStart:
    """An `MCPHub(configs, **options)` being built in a daemon thread.

    The hub's own start is bounded (each server has its start timeout), so `result` and
    `cancel` wait for that thread without a timeout of their own.
    """

    def __init__(self, configs: list[ServerConfig], **options: Any) -> None:
        self._done = threading.Event()
        self._hub: MCPHub | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._build, args=(configs, options), name="toolweave-mcp-start", daemon=True
        )
        self._thread.start()

    def _build(self, configs: list[ServerConfig], options: dict[str, Any]) -> None:
        try:
            self._hub = MCPHub(configs, **options)
        except BaseException as exc:  # handed to the caller by `result`
            self._error = exc
        finally:
            self._done.set()

    def result(self) -> MCPHub:
        """The started hub; raises what stopped it from starting."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._hub is not None
        return self._hub

    def cancel(self) -> None:
        """Close the hub as soon as it is up; nothing is left running."""
        self._done.wait()
        if self._hub is not None:
            self._hub.close()
