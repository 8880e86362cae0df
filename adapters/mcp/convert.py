"""MCP types to toolweave types: tool definitions to `ToolSpec`, call results to `ToolResult`.

Pure conversion, no I/O. Everything a server sends is untrusted: names that are not
valid tool names are rewritten, text is capped, and content we cannot show the model
(images, audio, binary resources) is described in one bracketed line instead.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

import mcp_types
from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from toolweave.readonly import DEFAULTED_KEY, ReadOnlyDecision, classify_tool
from toolweave.tools import ToolResult
from toolweave.toolspec import ToolSpec

__all__ = [
    "DEFAULTED_KEY",
    "DEFAULT_MAX_OUTPUT_CHARS",
    "HINT_DEFAULTS",
    "describe_content",
    "safe_tool_name",
    "spec_and_decision",
    "tool_annotations",
    "tool_result",
    "tool_spec",
]

#: Longest tool output (text, or structured content as JSON) passed on to the model.
DEFAULT_MAX_OUTPUT_CHARS = 20_000

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
    tool: mcp_types.Tool, name: str | None = None, *, trust_annotations: bool = True
) -> tuple[ToolSpec, ReadOnlyDecision]:
    """`tool_spec` and the read-only decision behind its ``read_only`` (with the reason)."""
    own = ToolSpec.from_dict(
        {
            "name": safe_tool_name(tool.name),
            "description": tool.description or "",
            "inputSchema": tool.input_schema,
            "annotations": tool_annotations(tool),
        }
    )
    decision = classify_tool(own, trust_annotations=trust_annotations)
    exposed = own.name if name is None else name
    spec = replace(own, name=exposed, read_only=decision.read_only)
    return spec, replace(decision, name=exposed)


def tool_result(result: CallToolResult, max_chars: int = DEFAULT_MAX_OUTPUT_CHARS) -> ToolResult:
    """Convert a call result: text blocks joined, other content described, output capped.

    An ``is_error`` result becomes an error observation the model can read.
    """
    text = "\n".join(describe_content(block) for block in result.content)
    structured = result.structured_content
    if structured is not None:
        size = len(json.dumps(structured, ensure_ascii=False, default=str))
        if size > max_chars:
            structured = None
            text += f"\n[structured content of {size} characters left out: too long]"
    text = _cap(text.strip("\n"), max_chars)
    if result.is_error:
        return ToolResult(
            text=text or "the tool reported an error without a message", is_error=True
        )
    return ToolResult(text=text, structured=structured)


def describe_content(block: ContentBlock) -> str:
    """Text for one content block; non-text content in one bracketed line."""
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent | AudioContent):
        return f"[{block.type} {block.mime_type}, {_decoded_size(block.data)} bytes]"
    if isinstance(block, ResourceLink):
        kind = f", {block.mime_type}" if block.mime_type else ""
        return f"[resource link {block.name}: {block.uri}{kind}]"
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if isinstance(resource, TextResourceContents):
            return resource.text
        if isinstance(resource, BlobResourceContents):
            kind = resource.mime_type or "binary"
            return f"[resource {resource.uri}: {kind}, {_decoded_size(resource.blob)} bytes]"
    return f"[unsupported content of type {getattr(block, 'type', type(block).__name__)!r}]"


def _decoded_size(data: str) -> int:
    """Bytes a base64 string decodes to, without decoding it."""
    stripped = data.strip()
    return max(0, len(stripped) * 3 // 4 - stripped[-2:].count("="))


def _cap(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}\n[output truncated: {len(text) - max_chars} more characters]"
