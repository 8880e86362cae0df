"""MCP types to toolweave types: tool definitions to `ToolSpec`, call results to `ToolResult`.

Pure conversion, no I/O. Everything a server sends is untrusted: names that are not
valid tool names are rewritten, text is capped. A result keeps every content block as a
LangChain standard block (`MCPToolResult.blocks`, see `content`); the text the model
reads describes images, audio and binary resources in one bracketed line each.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

import mcp_types
from mcp_types import CallToolResult, ContentBlock

from toolweave.adapters.mcp.content import Block, block_text, content_blocks
from toolweave.readonly import DEFAULTED_KEY, ReadOnlyDecision, classify_tool
from toolweave.tools import ToolResult
from toolweave.toolspec import ToolSpec

__all__ = [
    "DEFAULTED_KEY",
    "DEFAULT_MAX_CONTENT_BYTES",
    "DEFAULT_MAX_OUTPUT_CHARS",
    "HINT_DEFAULTS",
    "MCPToolResult",
    "describe_content",
    "safe_tool_name",
    "spec_and_decision",
    "tool_annotations",
    "tool_result",
    "tool_spec",
]

#: Longest tool output (text, or structured content as JSON) passed on to the model.
DEFAULT_MAX_OUTPUT_CHARS = 20_000
#: Most bytes of images, audio and binary resources (decoded) one result keeps.
DEFAULT_MAX_CONTENT_BYTES = 10_000_000

#: The MCP specification's value for each behaviour hint a server leaves unset.
HINT_DEFAULTS: dict[str, bool] = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}

_INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_tool_name(name: str) -> str:
    """``name`` with every run of characters a tool name may not hold replaced by ``_``."""
    cleaned = _INVALID_NAME_CHARS.sub("_", name).strip("_")
    return cleaned or "tool"


def tool_annotations(tool: mcp_types.Tool) -> dict[str, Any]:
    """The tool's annotations in camelCase, with the spec defaults for unset hints.

    ``title`` comes from the annotations, else from the tool definition; it is left out
    when neither has one. ``x-defaulted`` lists the hints the server left unset, so the
    read-only classifier can tell a server's claim from the spec's default.
    """
    given: dict[str, Any] = {}
    if tool.annotations is not None:
        given = tool.annotations.model_dump(by_alias=True, exclude_none=True, mode="json")
    annotations: dict[str, Any] = {}
    title = given.pop("title", None) or tool.title
    if title:
        annotations["title"] = title
    defaulted: list[str] = []
    for hint, default in HINT_DEFAULTS.items():
        value = given.pop(hint, None)
        annotations[hint] = value if isinstance(value, bool) else default
        if not isinstance(value, bool):
            defaulted.append(hint)
    annotations.update(given)
    if defaulted:
        annotations[DEFAULTED_KEY] = defaulted
    return annotations


def tool_spec(
    tool: mcp_types.Tool, name: str | None = None, *, trust_annotations: bool = True
) -> ToolSpec:
    """Build the spec of an MCP tool, exposed as ``name`` (default: its own name, made safe).

    ``read_only`` is decided by `toolweave.readonly.classify_tool` on the server's own
    tool name, before any renaming (a prefix such as ``browser_`` must not change the
    answer): a side effect in the name or description beats ``readOnlyHint: true``,
    and ``trust_annotations=False`` ignores the hints. Raises `ToolSpecError` when the
    input schema is unusable.
    """
    return spec_and_decision(tool, name, trust_annotations=trust_annotations)[0]


def spec_and_decision(
    tool: mcp_types.Tool,
    name: str | None = None,
    *,
    trust_annotations: bool = True,
    shared_lead: str = "",
) -> tuple[ToolSpec, ReadOnlyDecision]:
    """`tool_spec` and the read-only decision behind its ``read_only`` (with the reason).

    ``shared_lead``: the opening the description shares with the server's other tools
    (`toolweave.readonly_leads.shared_leads`), not read as this tool's words.
    """
    own = ToolSpec.from_dict(
        {
            "name": safe_tool_name(tool.name),
            "description": tool.description or "",
            "inputSchema": tool.input_schema,
            "annotations": tool_annotations(tool),
        }
    )
    decision = classify_tool(own, trust_annotations=trust_annotations, shared_lead=shared_lead)
    exposed = own.name if name is None else name
    spec = replace(own, name=exposed, read_only=decision.read_only)
    return spec, replace(decision, name=exposed)


@dataclass(frozen=True, eq=False)
class MCPToolResult(ToolResult):
    """A `ToolResult` from an MCP server that keeps the server's content blocks.

    ``blocks`` are LangChain standard content blocks (`toolweave.adapters.mcp.content`):
    images, audio and resources with their data. ``text`` is what the model reads. It
    equals any `ToolResult` with the same text, structured content and error flag.
    """

    blocks: tuple[Block, ...] = field(default=(), repr=False)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolResult):
            return NotImplemented
        mine = (self.text, self.structured, self.is_error)
        return mine == (other.text, other.structured, other.is_error)

    __hash__ = ToolResult.__hash__


def tool_result(
    result: CallToolResult,
    max_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
    max_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
) -> MCPToolResult:
    """Convert a call result: blocks kept (binary data capped), text joined and capped.

    An ``is_error`` result becomes an error observation the model can read.
    """
    blocks = content_blocks(result.content, max_bytes)
    text = "\n".join(block_text(block) for block in blocks)
    structured = result.structured_content
    if structured is not None:
        size = len(json.dumps(structured, ensure_ascii=False, default=str))
        if size > max_chars:
            structured = None
            text += f"\n[structured content of {size} characters left out: too long]"
    text = _cap(text.strip("\n"), max_chars)
    if result.is_error:
        text = text or "the tool reported an error without a message"
        return MCPToolResult(text=text, is_error=True, blocks=tuple(blocks))
    return MCPToolResult(text=text, structured=structured, blocks=tuple(blocks))


def describe_content(block: ContentBlock) -> str:
    """Text for one content block; non-text content in one bracketed line."""
    return block_text(content_blocks([block], DEFAULT_MAX_CONTENT_BYTES)[0])


def _cap(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}\n[output truncated: {len(text) - max_chars} more characters]"
