"""Runnable tools: a `ToolSpec` plus the async callable that executes it.

Every tool source (MCP servers, LangChain tools, plain Python functions) becomes a
`Tool`; executors, the chat model and the plan-out pipeline only ever see this type.
A tool's `run` takes the call's arguments and returns a `ToolResult`; failures the
model should read (a tool error, a timeout, a crashed server) come back as a result
with `is_error=True`, so an agent can act on them instead of crashing.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolweave.toolspec import ToolSpec

__all__ = ["Tool", "ToolResult", "ToolRunner"]


@dataclass(frozen=True)
class ToolResult:
    """What a tool returned: text for the model, structured content when the tool has it.

    ``is_error`` marks an error observation (the tool failed, timed out or was
    unreachable); ``text`` then explains the failure in words the model can act on.
    """

    text: str
    structured: Any = None
    is_error: bool = False

    @classmethod
    def error(cls, message: str) -> ToolResult:
        return cls(text=message, is_error=True)

    def observation(self) -> str:
        """The text an agent shows the model: the text, else the structured content as JSON."""
        if self.text or self.structured is None:
            return self.text
        return json.dumps(self.structured, ensure_ascii=False)


#: The callable behind a tool: arguments in, result out (never raises for tool failures).
ToolRunner = Callable[[Mapping[str, Any]], Awaitable[ToolResult]]


@dataclass(frozen=True)
class Tool:
    """A tool the model can call and an executor can run.

    ``source`` says where it comes from (``"mcp:<server>"``, ``"langchain"``,
    ``"python"``); ``origin`` keeps the original object (a LangChain tool, an MCP tool
    definition) for adapters that need to convert back.
    """

    spec: ToolSpec
    run: ToolRunner
    source: str = "python"
    origin: Any = field(default=None, compare=False, repr=False)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def read_only(self) -> bool:
        """True only when the spec was classified read-only (unknown counts as not)."""
        return self.spec.read_only is True
