"""MCP content blocks as LangChain standard content blocks (plain dicts), and back to text.

Every MCP content block keeps its data: text as a ``text`` block, images and audio as
``image``/``audio`` blocks with ``base64`` and ``mime_type``, resource links as ``image``
(for an image MIME type) or ``file`` blocks with the ``url``, embedded text resources
as ``text`` blocks, embedded binary resources as ``file`` blocks with ``base64``. A
resource's URI (and a link's name) is kept under ``extras``. These are the shapes
``langchain_core.messages.content`` defines, so a multimodal chat model reads them as is.

Binary data is bounded: once a result's images, audio and blobs pass ``max_bytes``
(decoded), further ones become a text block saying what was left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mcp_types import (
    AudioContent,
    BlobResourceContents,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from toolweave.content import block_text, decoded_size

__all__ = [
    "Block",
    "block_text",
    "content_blocks",
    "decoded_size",
    "resource_blocks",
]

#: A LangChain standard content block, as a plain dict.
Block = dict[str, Any]


def content_blocks(blocks: Iterable[ContentBlock], max_bytes: int) -> list[Block]:
    """LangChain blocks for MCP content blocks, binary data capped at ``max_bytes`` in all."""
    out: list[Block] = []
    budget = max_bytes
    for block in blocks:
        converted = _block(block)
        size = _binary_size(converted)
        if size:
            if size > budget:
                out.append(_left_out(converted, size))
                continue
            budget -= size
        out.append(converted)
    return out


def resource_blocks(
    contents: Iterable[TextResourceContents | BlobResourceContents], max_bytes: int
) -> list[Block]:
    """LangChain blocks for the contents of a read resource, capped as `content_blocks`."""
    return content_blocks(
        (EmbeddedResource(type="resource", resource=item) for item in contents), max_bytes
    )


def _block(block: ContentBlock) -> Block:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageContent | AudioContent):
        return {"type": block.type, "base64": block.data, "mime_type": block.mime_type}
    if isinstance(block, ResourceLink):
        mime = block.mime_type or None
        kind = "image" if mime and mime.startswith("image/") else "file"
        link: Block = {"type": kind, "url": str(block.uri)}
        if mime:
            link["mime_type"] = mime
        link["extras"] = {"uri": str(block.uri), "name": block.name}
        return link
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        extras = {"uri": str(resource.uri)}
        if isinstance(resource, TextResourceContents):
            return {"type": "text", "text": resource.text, "extras": extras}
        if isinstance(resource, BlobResourceContents):
            blob: Block = {"type": "file", "base64": resource.blob, "extras": extras}
            blob["mime_type"] = resource.mime_type or "application/octet-stream"
            return blob
    kind = getattr(block, "type", type(block).__name__)
    return {"type": "text", "text": f"[unsupported content of type {kind!r}]"}


def _binary_size(block: Block) -> int:
    return decoded_size(str(block["base64"])) if "base64" in block else 0


def _left_out(block: Block, size: int) -> Block:
    described = block_text(block)
    return {"type": "text", "text": f"{described[:-1]}, left out: over the size cap]"}
