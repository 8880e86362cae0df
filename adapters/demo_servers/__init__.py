"""Demo MCP servers bundled with toolweave, installed as ``toolweave.adapters.demo_servers``.

Each is a small stateful assistant back end (files, notes, contacts, calendar,
messages, weather) with honest tool annotations. Run one over stdio with
``python -m toolweave.adapters.demo_servers.notes``, or over streamable HTTP with
``python -m toolweave.adapters.demo_servers.notes --http 8000`` (endpoint ``/mcp``).

State lives in JSON files under ``$TOOLWEAVE_DEMO_STATE`` (default: a
``toolweave-demo-state`` directory in the system temp dir), seeded with realistic
data on first use, so a restarted server finds what it wrote.
``toolweave.adapters.mcp.client.demo_server_configs`` builds the client configs.
"""

from __future__ import annotations

import json
from importlib import resources

__all__ = ["DEMO_SERVERS", "STATE_ENV", "plan_examples"]

#: Environment variable naming the directory the demo servers keep their state in.
STATE_ENV = "TOOLWEAVE_DEMO_STATE"

#: Server name -> module to run with ``python -m``.
DEMO_SERVERS: dict[str, str] = {
    name: f"toolweave.adapters.demo_servers.{name}"
    for name in ("files", "notes", "contacts", "calendar", "messages", "weather")
}


def plan_examples() -> list[tuple[str, str]]:
    """(request, plan) examples over the demo tools, for a plan-out Planner's prompt."""
    text = resources.files(__name__).joinpath("plan_examples.json").read_text("utf-8")
    return [(item["query"], item["plan"]) for item in json.loads(text)]
