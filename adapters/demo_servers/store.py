"""Where the demo servers keep their state: one JSON file per server, seeded on first use."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolweave.adapters.demo_servers import STATE_ENV

__all__ = ["JsonStore", "call_counts", "count_call", "state_dir"]


def state_dir() -> Path:
    """``$TOOLWEAVE_DEMO_STATE``, else ``<tmp>/toolweave-demo-state``; created if missing."""
    directory = Path(
        os.environ.get(STATE_ENV) or Path(tempfile.gettempdir()) / "toolweave-demo-state"
    )
    directory.mkdir(parents=True, exist_ok=True)
    return directory


class JsonStore:
    """A server's state as one JSON object, loaded on first use and saved atomically.

    Not thread-safe: the demo tools are ``async def`` so they run one at a time on the
    server's event loop.
    """

    def __init__(self, name: str, seed: Callable[[], dict[str, Any]]) -> None:
        self.name = name
        self._seed = seed
        self._data: dict[str, Any] | None = None

    @property
    def path(self) -> Path:
        return state_dir() / f"{self.name}.json"

    @property
    def data(self) -> dict[str, Any]:
        if self._data is None:
            path = self.path
            if path.exists():
                self._data = json.loads(path.read_text(encoding="utf-8"))
            else:
                self._data = self._seed()
                self.save()
        return self._data

    def save(self) -> None:
        """Write the state; a crash mid-write leaves the previous file intact."""
        path = self.path
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{self.name}.")
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            json.dump(self.data, file, ensure_ascii=False, indent=1)
        os.replace(temporary, path)

    def next_id(self, prefix: str) -> str:
        """A fresh id such as ``n7``; the counter is part of the state."""
        counters = self.data.setdefault("next_ids", {})
        number = counters.get(prefix, 1)
        counters[prefix] = number + 1
        return f"{prefix}{number}"


def _calls_path(server: str) -> Path:
    return state_dir() / f"{server}.calls.json"


def count_call(server: str, tool: str) -> None:
    """Count one call of a side-effect tool of ``server``, before it acts, in
    ``<state dir>/<server>.calls.json`` (saved atomically), so a client can check how
    often the server really ran each tool."""
    counts = call_counts(server)
    counts[tool] = counts.get(tool, 0) + 1
    path = _calls_path(server)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{server}.calls.")
    with os.fdopen(handle, "w", encoding="utf-8") as file:
        json.dump(counts, file)
    os.replace(temporary, path)


def call_counts(server: str, directory: Path | None = None) -> dict[str, int]:
    """How often each side-effect tool of ``server`` was called (state dir: ``directory``,
    else the servers' own)."""
    path = (directory / f"{server}.calls.json") if directory is not None else _calls_path(server)
    if not path.exists():
        return {}
    counts: dict[str, int] = json.loads(path.read_text(encoding="utf-8"))
    return counts
