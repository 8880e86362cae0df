"""Resources and prompts of MCP servers, named by server: `ResourceInfo`, `PromptInfo`.

Pure conversion of the SDK's listings and results; contents become LangChain standard
content blocks (see `toolweave.adapters.mcp.content`), with binary data capped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import mcp_types

from toolweave.adapters.mcp.content import Block, block_text, content_blocks, resource_blocks

__all__ = [
    "PromptArgumentInfo",
    "PromptInfo",
    "PromptMessage",
    "ResourceContents",
    "ResourceInfo",
    "prompt_info",
    "prompt_messages",
    "resource_contents",
    "resource_info",
]


@dataclass(frozen=True)
class ResourceInfo:
    """A resource a server lists: its URI, name and, when given, description and type."""

    server: str
    uri: str
    name: str
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None


@dataclass(frozen=True)
class ResourceContents:
    """What reading a resource gave: content blocks, and their text for a model."""

    server: str
    uri: str
    blocks: tuple[Block, ...] = field(repr=False)

    @property
    def text(self) -> str:
        return "\n".join(block_text(block) for block in self.blocks)


@dataclass(frozen=True)
class PromptArgumentInfo:
    name: str
    description: str | None = None
    required: bool = False


@dataclass(frozen=True)
class PromptInfo:
    """A prompt a server lists; ``qualified`` (``server/name``) names it across servers."""

    server: str
    name: str
    description: str | None = None
    arguments: tuple[PromptArgumentInfo, ...] = ()

    @property
    def qualified(self) -> str:
        return f"{self.server}/{self.name}"


@dataclass(frozen=True)
class PromptMessage:
    """One message of a filled prompt: role ``user`` or ``assistant`` and its blocks."""

    role: str
    blocks: tuple[Block, ...] = field(repr=False)

    @property
    def text(self) -> str:
        return "\n".join(block_text(block) for block in self.blocks)

    def to_langchain(self) -> Any:
        """A LangChain ``HumanMessage`` or ``AIMessage`` (text only: a string; else blocks)."""
        from langchain_core.messages import AIMessage, HumanMessage

        if all(block.get("type") == "text" for block in self.blocks):
            content: Any = self.text
        else:
            content = [dict(block) for block in self.blocks]
        return AIMessage(content) if self.role == "assistant" else HumanMessage(content)


def resource_info(server: str, resource: mcp_types.Resource) -> ResourceInfo:
    return ResourceInfo(
        server=server,
        uri=str(resource.uri),
        name=resource.name,
        description=resource.description,
        mime_type=resource.mime_type,
        size=resource.size,
    )


def resource_contents(
    server: str, uri: str, result: mcp_types.ReadResourceResult, max_bytes: int
) -> ResourceContents:
    return ResourceContents(server, uri, tuple(resource_blocks(result.contents, max_bytes)))


def prompt_info(server: str, prompt: mcp_types.Prompt) -> PromptInfo:
    arguments = tuple(
        PromptArgumentInfo(a.name, a.description, bool(a.required)) for a in prompt.arguments or ()
    )
    return PromptInfo(server, prompt.name, prompt.description, arguments)


def prompt_messages(result: mcp_types.GetPromptResult, max_bytes: int) -> list[PromptMessage]:
    """The prompt's messages; binary data capped at ``max_bytes`` over the whole prompt."""
    out: list[PromptMessage] = []
    budget = max_bytes
    for message in result.messages:
        blocks = content_blocks([message.content], budget)
        budget -= sum(len(str(b.get("base64", ""))) * 3 // 4 for b in blocks)
        out.append(PromptMessage(message.role, tuple(blocks)))
    return out
