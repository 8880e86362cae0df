"""MCP content, progress and sampling conversions: pure logic, no server, no model."""

from __future__ import annotations

import base64
import io
from typing import Any

import anyio
import mcp_types as t
import pytest
from rich.console import Console

from toolweave.adapters.cli.display import RunTrace
from toolweave.adapters.langchain.tools import tool_message_content
from toolweave.adapters.mcp.content import block_text, content_blocks
from toolweave.adapters.mcp.convert import MCPToolResult, tool_result
from toolweave.adapters.mcp.progress import ProgressUpdate, sdk_progress_callback
from toolweave.adapters.mcp.sampling import (
    MAX_SAMPLING_TOKENS,
    SamplingReply,
    SamplingRequest,
    sampling_request,
    sdk_sampling_callback,
)
from toolweave.tools import ToolResult

DATA = base64.b64encode(b"\x00" * 300).decode()


def test_every_block_keeps_its_data() -> None:
    blocks = content_blocks(
        [
            t.TextContent(text="hello"),
            t.ImageContent(data=DATA, mime_type="image/png"),
            t.AudioContent(data=DATA, mime_type="audio/wav"),
            t.ResourceLink(name="pic", uri="file:///a.png", mime_type="image/png"),
            t.ResourceLink(name="doc", uri="file:///a.txt"),
            t.EmbeddedResource(
                type="resource", resource=t.TextResourceContents(uri="res://t", text="body")
            ),
            t.EmbeddedResource(
                type="resource",
                resource=t.BlobResourceContents(uri="res://b", blob=DATA, mime_type="x/y"),
            ),
        ],
        max_bytes=10_000,
    )
    assert blocks == [
        {"type": "text", "text": "hello"},
        {"type": "image", "base64": DATA, "mime_type": "image/png"},
        {"type": "audio", "base64": DATA, "mime_type": "audio/wav"},
        {
            "type": "image",
            "url": "file:///a.png",
            "mime_type": "image/png",
            "extras": {"uri": "file:///a.png", "name": "pic"},
        },
        {"type": "file", "url": "file:///a.txt", "extras": {"uri": "file:///a.txt", "name": "doc"}},
        {"type": "text", "text": "body", "extras": {"uri": "res://t"}},
        {"type": "file", "base64": DATA, "mime_type": "x/y", "extras": {"uri": "res://b"}},
    ]
    assert [block_text(b) for b in blocks] == [
        "hello",
        "[image image/png, 300 bytes]",
        "[audio audio/wav, 300 bytes]",
        "[resource link pic: file:///a.png, image/png]",
        "[resource link doc: file:///a.txt]",
        "body",
        "[resource res://b: x/y, 300 bytes]",
    ]


def test_binary_data_past_the_cap_is_described_not_kept() -> None:
    images = [t.ImageContent(data=DATA, mime_type="image/png")] * 3
    blocks = content_blocks(images, max_bytes=700)
    assert [b["type"] for b in blocks] == ["image", "image", "text"]
    assert blocks[2]["text"] == "[image image/png, 300 bytes, left out: over the size cap]"


def test_tool_result_text_blocks_and_langchain_content() -> None:
    result = tool_result(
        t.CallToolResult(
            content=[t.TextContent(text="see:"), t.ImageContent(data=DATA, mime_type="image/png")],
            structured_content={"n": 1},
        )
    )
    assert isinstance(result, MCPToolResult)
    assert result == ToolResult(text="see:\n[image image/png, 300 bytes]", structured={"n": 1})
    assert tool_message_content(result) == [
        {"type": "text", "text": "see:\n[image image/png, 300 bytes]"},
        {"type": "image", "base64": DATA, "mime_type": "image/png"},
    ]
    assert tool_message_content(ToolResult(text="plain")) == "plain"


def test_progress_update_line_and_failing_callbacks() -> None:
    assert ProgressUpdate("s", "op", 3, 5, "copying  files").line() == "op 3/5 (60%): copying files"
    assert ProgressUpdate("s", "op", 7).line() == "op 7"
    seen: list[ProgressUpdate] = []

    def broken(update: ProgressUpdate) -> None:
        raise RuntimeError("display gone")

    on_progress = sdk_progress_callback("s", "op", broken, seen.append)
    anyio.run(on_progress, 1.0, 2.0, "x" * 500)
    (update,) = seen
    assert (update.progress, update.total, len(update.message or "")) == (1.0, 2.0, 200)


def test_run_trace_prints_progress_lines_throttled() -> None:
    out = io.StringIO()
    trace = RunTrace(Console(file=out, width=200, highlight=False))
    for step in range(1, 5):
        trace.progress(ProgressUpdate("s", "op", step, 4))
    lines = [line.split("s ", 1)[1] for line in out.getvalue().splitlines()]
    assert lines == ["  progress: op 1/4 (25%)", "  progress: op 4/4 (100%)"]
    assert [e["progress"] for e in trace.events] == [1, 2, 3, 4]
    quiet = RunTrace(Console(file=io.StringIO()), quiet=True)
    quiet.progress(ProgressUpdate("s", "op", 1, 4))
    assert quiet.console.file.getvalue() == ""  # type: ignore[attr-defined]


def _params(**fields: Any) -> t.CreateMessageRequestParams:
    messages = [
        t.SamplingMessage(role="user", content=t.TextContent(text="hi")),
        t.SamplingMessage(role="assistant", content=t.TextContent(text="hello")),
        t.SamplingMessage(
            role="user",
            content=[t.TextContent(text="this:"), t.ImageContent(data=DATA, mime_type="image/png")],
        ),
    ]
    return t.CreateMessageRequestParams(messages=messages, **{"max_tokens": 10, **fields})


def test_sampling_request_is_plain_text_and_bounded() -> None:
    request = sampling_request("srv", _params(max_tokens=10**6, system_prompt="be nice"))
    assert request.messages == (
        ("user", "hi"),
        ("assistant", "hello"),
        ("user", "this:\n[image image/png, 300 bytes]"),
    )
    assert (request.max_tokens, request.system_prompt) == (MAX_SAMPLING_TOKENS, "be nice")


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_sampling_callbacks_answer(kind: str) -> None:
    def sync(request: SamplingRequest) -> str:
        return f"{len(request.messages)} messages"

    async def asynchronous(request: SamplingRequest) -> SamplingReply:
        return SamplingReply(f"{request.server} asked", model="m", stop_reason="maxTokens")

    answer = sdk_sampling_callback("srv", sync if kind == "sync" else asynchronous, timeout=5)
    result = anyio.run(answer, None, _params())
    assert isinstance(result, t.CreateMessageResult)
    assert result.content == t.TextContent(text="3 messages" if kind == "sync" else "srv asked")


def test_sampling_failures_and_timeouts_become_errors() -> None:
    def broken(request: SamplingRequest) -> str:
        raise RuntimeError("no model")

    async def slow(request: SamplingRequest) -> str:
        await anyio.sleep(5)
        return "late"

    failed = anyio.run(sdk_sampling_callback("srv", broken, timeout=5), None, _params())
    assert isinstance(failed, t.ErrorData) and "RuntimeError: no model" in failed.message
    late = anyio.run(sdk_sampling_callback("srv", slow, timeout=0.2), None, _params())
    assert isinstance(late, t.ErrorData) and "did not answer within 0.2 s" in late.message
