"""At most once per request: the side-effect calls one request has already made.

The plan-out agent keeps one `CallLedger` for all rounds of a request. A call of a
tool that is not read-only, identical (tool and canonical arguments) to one run in an
earlier round, is not run again: the executor reuses the earlier observation. A call
the user denied earlier in the request is denied again without asking.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolweave.tools import ToolResult

__all__ = ["CallLedger", "LedgerEntry", "canonical_call"]


def canonical_call(tool: str, arguments: Mapping[str, Any]) -> str:
    """One string per distinct call: the tool and its arguments as sorted, compact JSON."""
    text = json.dumps(
        dict(arguments), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
    )
    return f"{tool}{text}"


@dataclass(frozen=True)
class LedgerEntry:
    """A side-effect call that ran: in ``round``, as plan task ``task``, with ``observation``."""

    tool: str
    arguments: Mapping[str, Any]
    round: int
    task: int
    observation: ToolResult


class CallLedger:
    """The side effects of one request across its rounds (round 1 first)."""

    def __init__(self) -> None:
        self.round = 1
        self._ran: dict[str, LedgerEntry] = {}
        self._denied: dict[str, int] = {}

    def next_round(self) -> int:
        """Start the next round and return its number."""
        self.round += 1
        return self.round

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        """Every side-effect call that ran, in the order they were recorded."""
        return tuple(self._ran.values())

    def earlier(self, tool: str, arguments: Mapping[str, Any]) -> LedgerEntry | None:
        """The same call when it ran in an earlier round, else None."""
        entry = self._ran.get(canonical_call(tool, arguments))
        return entry if entry is not None and entry.round < self.round else None

    def denied_before(self, tool: str, arguments: Mapping[str, Any]) -> bool:
        """True when the user denied the same call earlier in this request."""
        return canonical_call(tool, arguments) in self._denied

    def record(
        self, tool: str, arguments: Mapping[str, Any], task: int, observation: ToolResult
    ) -> None:
        """Note a call that was started (whatever its outcome); the first one is kept."""
        key = canonical_call(tool, arguments)
        if key not in self._ran:
            self._ran[key] = LedgerEntry(tool, dict(arguments), self.round, task, observation)

    def deny(self, tool: str, arguments: Mapping[str, Any]) -> None:
        """Note a call the user denied."""
        self._denied.setdefault(canonical_call(tool, arguments), self.round)
