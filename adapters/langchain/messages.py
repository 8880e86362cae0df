"""LangChain messages in, template messages out; decoder results in, `AIMessage`s out.

The chat model renders a LangChain conversation with the model's own chat template:
system messages become the system prompt (in front of the tool list when tools are
bound), an `AIMessage`'s tool calls are written back in the call format the decoders
produce, and tool results become ``tool`` turns; where the template lists the tools
itself, calls go to ``tool_calls`` and results carry their call id and tool name.
Results come back as `AIMessage`s with ``tool_calls`` (unique ids),
``invalid_tool_calls``, ``usage_metadata`` and ``response_metadata``, exactly the fields
LangChain agents read.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.ai import InputTokenDetails, UsageMetadata
from langchain_core.messages.tool import InvalidToolCall, ToolCall

from toolweave.content import DATA_BLOCKS, block_text
from toolweave.errors import ToolweaveError
from toolweave.formats import CallFormat, SyntaxFormat
from toolweave.prompting.chat_template import assistant_calls_message, tool_result_message
from toolweave.results import CallResult
from toolweave.toolspec import ToolCall as TwCall

__all__ = [
    "PROVIDER",
    "ai_message",
    "call_id",
    "final_chunk",
    "message_text",
    "response_metadata",
    "split_system",
    "template_messages",
    "usage_metadata",
]


def call_id() -> str:
    """A fresh tool-call id, unique across processes."""
    return f"call_{uuid.uuid4().hex[:24]}"


#: Content blocks that repeat what `AIMessage.tool_calls` or hidden reasoning carry.
_SKIPPED_BLOCKS = frozenset(
    {"tool_use", "tool_call", "tool_call_chunk", "function_call", "reasoning", "thinking"}
)


def message_text(message: BaseMessage) -> str:
    """The text of a message whose content may be a string or a list of content blocks
    (text blocks are kept, tool-call and reasoning blocks skipped, a tool result's images,
    audio and files described in one line each, others refused)."""
    content = message.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    described: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, Mapping) and block.get("type") in _SKIPPED_BLOCKS:
            continue
        elif (
            isinstance(block, Mapping)
            and block.get("type") in DATA_BLOCKS
            and isinstance(message, ToolMessage)
        ):
            described.append(block_text(block))  # a tool's image: the model reads a line
        elif isinstance(block, Mapping):
            raise ToolweaveError(
                f"content blocks of type {block.get('type')!r} are not supported by a "
                "text-only model"
            )
    text = "".join(parts)
    missing = [d for d in described if d not in text]  # the observation may say it already
    return "\n".join([text, *missing]) if missing else text


def split_system(messages: Sequence[BaseMessage]) -> tuple[str | None, list[BaseMessage]]:
    """Join the system messages (wherever they are) and return the rest in order."""
    system = [message_text(m) for m in messages if isinstance(m, SystemMessage)]
    rest = [m for m in messages if not isinstance(m, SystemMessage)]
    return ("\n\n".join(system) if system else None), rest


def template_messages(
    messages: Sequence[BaseMessage], fmt: CallFormat, *, tool_calls: bool = False
) -> list[dict[str, Any]]:
    """Non-system messages as dicts for a chat template.

    By default an `AIMessage`'s calls are written into its text in `fmt` and a tool
    result is a ``tool`` turn of text: what toolweave's own tool prompt shows. With
    ``tool_calls`` (a template that lists the tools itself) the calls go to the message's
    ``tool_calls`` (OpenAI shape, their ids) and each result carries its
    ``tool_call_id`` and the tool's name, which the template renders its own way."""
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # call id -> tool name, for results that do not say
    as_string = isinstance(fmt, SyntaxFormat) and fmt.syntax.arguments_as_string
    for m in messages:
        if isinstance(m, HumanMessage):
            out.append({"role": "user", "content": message_text(m)})
        elif isinstance(m, AIMessage):
            text = message_text(m)
            calls = [TwCall(c["name"], dict(c["args"])) for c in m.tool_calls]
            if calls and tool_calls:
                ids = [c.get("id") or call_id() for c in m.tool_calls]
                names.update((i, c.name) for i, c in zip(ids, calls, strict=True))
                out.append(
                    assistant_calls_message(calls, text, ids=ids, arguments_as_string=as_string)
                )
                continue
            if calls:
                written = fmt.serialize(calls)
                text = f"{text}\n{written}" if text else written
            out.append({"role": "assistant", "content": text})
        elif isinstance(m, ToolMessage):
            if tool_calls:
                name = m.name or names.get(m.tool_call_id, "")
                out.append(tool_result_message(name, message_text(m), m.tool_call_id))
            else:
                out.append({"role": "tool", "content": message_text(m)})
        elif isinstance(m, SystemMessage):
            out.append({"role": "system", "content": message_text(m)})
        else:
            raise ToolweaveError(f"unsupported message type {type(m).__name__}")
    if not out:
        raise ToolweaveError("no messages to answer")
    return out


#: ``response_metadata["model_provider"]`` of every message this package makes.
PROVIDER = "toolweave"


def usage_metadata(result: CallResult) -> UsageMetadata:
    """LangChain's usage fields: prompt tokens in (``cache_read``: those whose KV state
    was reused from an earlier prompt instead of prefilled), response tokens out."""
    n_in, n_out = result.stats.prompt_tokens, len(result.tokens)
    cached = min(result.stats.cached_tokens, n_in)
    return UsageMetadata(
        input_tokens=n_in,
        output_tokens=n_out,
        total_tokens=n_in + n_out,
        input_token_details=InputTokenDetails(cache_read=cached),
    )


def response_metadata(result: CallResult, model_name: str) -> dict[str, Any]:
    """The metadata every response carries: provider, model, finish reason, mode."""
    finish = result.finish_reason
    if result.calls and finish == "stop":
        finish = "tool_calls"
    return {
        "model_provider": PROVIDER,
        "model_name": model_name,
        "finish_reason": finish,
        "mode": result.mode,
    }


def ai_message(
    result: CallResult,
    *,
    model_name: str,
    ids: Sequence[str] = (),
    content: str | None = None,
) -> AIMessage:
    """An `AIMessage` for a decoder result; ``ids`` are reused for its calls in order
    (so streamed chunks and the final message agree), fresh ones are made otherwise."""
    tool_calls: list[ToolCall] = []
    for i, c in enumerate(result.calls):
        cid = ids[i] if i < len(ids) else call_id()
        tool_calls.append(ToolCall(name=c.name, args=dict(c.arguments), id=cid, type="tool_call"))
    invalid: list[InvalidToolCall] = [
        InvalidToolCall(
            name=bad.name,
            args=bad.text,
            id=call_id(),
            error=bad.error,
            type="invalid_tool_call",
        )
        for bad in result.invalid
    ]
    text = content if content is not None else ("" if result.calls else result.text)
    return AIMessage(
        content=text,
        tool_calls=tool_calls,
        invalid_tool_calls=invalid,
        usage_metadata=usage_metadata(result),
        response_metadata={
            **response_metadata(result, model_name),
            "stats": result.stats.to_dict(),
            "provisional": [json.loads(json.dumps(c.to_dict())) for c in result.provisional],
        },
    )


def final_chunk(chunk: AIMessageChunk, result: CallResult, model_name: str) -> AIMessageChunk:
    """The last chunk of a stream: `chunk` with the response's usage and metadata (only
    here, so merging the chunks adds nothing up twice)."""
    return AIMessageChunk(
        content=chunk.content,
        tool_call_chunks=chunk.tool_call_chunks,
        usage_metadata=usage_metadata(result),
        response_metadata=response_metadata(result, model_name),
        chunk_position="last",
    )
