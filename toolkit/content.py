"""Content blocks (LangChain's standard shapes, as plain dicts) as the text a model reads.

A text-only model reads a text block as its text and anything binary as one bracketed
line that says what it was: ``[image image/png, 4033 bytes]``, ``[resource URI: MIME,
N bytes]``, ``[resource link NAME: URL]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["DATA_BLOCKS", "block_text", "decoded_size"]

#: Block types that carry data rather than text.
DATA_BLOCKS = frozenset({"image", "audio", "file", "video"})


def block_text(block: Mapping[str, Any]) -> str:
    """What the model reads for one block: its text, or one bracketed line for binary data."""
    kind = block.get("type")
    extras = block.get("extras") or {}
    uri = extras.get("uri") if isinstance(extras, Mapping) else None
    if kind == "text":
        return str(block.get("text", ""))
    mime = block.get("mime_type") or "binary"
    if "base64" in block:
        size = decoded_size(str(block["base64"]))
        if kind == "file" or uri:
            return f"[resource {uri or '(no uri)'}: {mime}, {size} bytes]"
        return f"[{kind} {mime}, {size} bytes]"
    if "url" in block:
        name = extras.get("name") if isinstance(extras, Mapping) else None
        label = f"resource link {name}" if name else "resource link"
        kind_note = f", {block['mime_type']}" if block.get("mime_type") else ""
        return f"[{label}: {block['url']}{kind_note}]"
    return f"[unsupported content of type {kind!r}]"


def decoded_size(data: str) -> int:
    """Bytes a base64 string decodes to, without decoding it."""
    stripped = data.strip()
    return max(0, len(stripped) * 3 // 4 - stripped[-2:].count("="))
