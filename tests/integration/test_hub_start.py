"""`HubStart`: servers start in the background while the model loads (as `toolweave run`
does); a server that cannot start is raised, and nothing is left running after `cancel`.
A sampling request that comes before the model (`DeferredSampler`) is tested against the
reference server in `test_mcp_everything`."""

from __future__ import annotations

import sys

import pytest

from toolweave.adapters.mcp.client import ServerConfig
from toolweave.adapters.mcp.starting import HubStart
from toolweave.errors import ToolServerError


def test_a_server_that_cannot_start_is_raised_by_result() -> None:
    broken = ServerConfig(name="broken", command=[sys.executable, "-c", "import sys; sys.exit(3)"])
    starting = HubStart([broken])
    with pytest.raises(ToolServerError, match="broken"):
        starting.result()
    starting.cancel()  # nothing to close: returns at once


def test_cancel_closes_a_hub_that_came_up() -> None:
    weather = ServerConfig.parse(f"{sys.executable} -m toolweave.adapters.demo_servers.weather")
    starting = HubStart([weather])
    starting.cancel()
    hub = starting.result()
    assert hub.tools  # it started, and was closed by cancel
    with pytest.raises(ToolServerError):
        hub.call("current_weather", {"city": "Paris"})
