"""The MCP client against the reference server, ``@modelcontextprotocol/server-everything``.

The server runs over stdio (and SSE once) with node; it is installed with npm into
``$TOOLWEAVE_NPM_PREFIX`` (default ``~/.cache/toolweave/npm``) when missing. Without
node or npm, or when the install fails, the tests are skipped with the reason.
Sampling requests are answered by the real embedded model through `chat_model_sampler`.
"""

from __future__ import annotations

import base64
import io
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage
from rich.console import Console

from toolweave.adapters.cli.display import RunTrace
from toolweave.adapters.langchain.chat_model import ChatToolweave
from toolweave.adapters.langchain.tools import to_langchain
from toolweave.adapters.mcp.client import (
    MCPHub,
    MCPToolResult,
    ProgressUpdate,
    ServerConfig,
    chat_model_sampler,
)
from toolweave.adapters.mcp.sampling import DeferredSampler
from toolweave.adapters.mcp.starting import HubStart

PACKAGE = "@modelcontextprotocol/server-everything"
PREFIX = Path(
    os.environ.get("TOOLWEAVE_NPM_PREFIX", Path.home() / ".cache" / "toolweave" / "npm")
).expanduser()
ENTRY = PREFIX / "node_modules" / PACKAGE / "dist" / "index.js"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _server_entry() -> Path:
    """The server's entry script, installed on first use; skips with the reason if it cannot."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None:
        pytest.skip("node is not installed: the reference MCP server needs it")
    if not ENTRY.exists():
        if npm is None:
            pytest.skip(f"npm is not installed, and {PACKAGE} is not in {PREFIX}")
        try:
            subprocess.run(
                ["npm", "install", "--prefix", str(PREFIX), "--no-audit", "--no-fund", PACKAGE],
                check=True,
                capture_output=True,
                timeout=300,
            )
        except (subprocess.SubprocessError, OSError) as exc:
            pytest.skip(f"could not install {PACKAGE} into {PREFIX}: {exc}")
    if not ENTRY.exists():
        pytest.skip(f"{PACKAGE} has no {ENTRY.relative_to(PREFIX)} after installing")
    return ENTRY


@pytest.fixture(scope="module")
def progress_seen() -> list[ProgressUpdate]:
    return []


@pytest.fixture(scope="module")
def everything(progress_seen: list[ProgressUpdate]) -> Iterator[MCPHub]:
    entry = _server_entry()
    model = ChatToolweave(n_ctx=1024, max_tokens=24)
    config = ServerConfig(name="everything", command=["node", str(entry), "stdio"], call_timeout=60)
    with MCPHub(
        [config], progress=progress_seen.append, sampling=chat_model_sampler(model, max_tokens=24)
    ) as hub:
        yield hub


def test_images_keep_their_data(everything: MCPHub) -> None:
    result = everything.call("get-tiny-image", {})
    assert isinstance(result, MCPToolResult) and not result.is_error
    assert "[image image/png, 4033 bytes]" in result.text  # what a text-only model reads
    (image,) = [block for block in result.blocks if block["type"] == "image"]
    assert image["mime_type"] == "image/png"
    assert base64.b64decode(image["base64"]).startswith(PNG_MAGIC)

    lc = to_langchain(everything.tool("get-tiny-image"))
    call = {"name": "get-tiny-image", "args": {}, "id": "c1", "type": "tool_call"}
    message = lc.invoke(call)
    assert isinstance(message, ToolMessage) and message.status == "success"
    assert isinstance(message.content, list)
    text, *data = message.content
    assert isinstance(text, dict) and text == {"type": "text", "text": result.text}
    assert data == [image]
    assert [b["type"] for b in message.content_blocks] == ["text", "image"]
    assert message.artifact is None


def test_structured_content_is_the_artifact(everything: MCPHub) -> None:
    lc = to_langchain(everything.tool("get-structured-content"))
    call = {
        "name": "get-structured-content",
        "args": {"location": "New York"},
        "id": "c2",
        "type": "tool_call",
    }
    message = lc.invoke(call)
    structured = message.artifact["structured_content"]
    assert set(message.artifact) == {"structured_content"}
    assert set(structured) == {"temperature", "conditions", "humidity"}
    assert isinstance(message.content, str) and str(structured["temperature"]) in message.content


def test_embedded_resources_and_links_are_kept(everything: MCPHub) -> None:
    text = everything.call("get-resource-reference", {"resourceType": "Text", "resourceId": 2})
    (resource,) = [b for b in text.blocks if b.get("extras")]
    assert resource["type"] == "text"
    assert resource["extras"] == {"uri": "demo://resource/dynamic/text/2"}
    assert resource["text"] in text.text

    blob = everything.call("get-resource-reference", {"resourceType": "Blob", "resourceId": 3})
    (file,) = [b for b in blob.blocks if b["type"] == "file"]
    assert file["extras"] == {"uri": "demo://resource/dynamic/blob/3"}
    assert base64.b64decode(file["base64"])  # the data, not a description
    assert "[resource demo://resource/dynamic/blob/3: " in blob.text

    links = everything.call("get-resource-links", {"count": 2})
    urls = [b["url"] for b in links.blocks if "url" in b]
    assert len(urls) == 2 and all(url.startswith("demo://resource/") for url in urls)
    assert all(f": {url}" in links.text for url in urls)


def test_binary_data_is_capped(everything: MCPHub) -> None:
    entry = _server_entry()
    small = ServerConfig(
        name="small", command=["node", str(entry), "stdio"], max_content_bytes=1000
    )
    with MCPHub([small]) as hub:
        result = hub.call("get-tiny-image", {})
    assert not [b for b in result.blocks if b["type"] == "image"]
    assert "[image image/png, 4033 bytes, left out: over the size cap]" in result.text


def test_resources_list_and_read(everything: MCPHub) -> None:
    resources = everything.list_resources()
    assert resources and {r.server for r in resources} == {"everything"}
    document = next(r for r in resources if r.uri.endswith("architecture.md"))
    assert document.mime_type == "text/markdown"
    contents = everything.read_resource(document.uri)
    assert contents.server == "everything" and len(contents.text) > 100
    assert contents.blocks[0]["extras"] == {"uri": document.uri}


def test_prompts_list_and_get(everything: MCPHub) -> None:
    prompts = {p.qualified: p for p in everything.list_prompts()}
    args = prompts["everything/args-prompt"]
    assert [(a.name, a.required) for a in args.arguments] == [("city", True), ("state", False)]
    (message,) = everything.get_prompt("everything/args-prompt", {"city": "Oslo"})
    assert message.role == "user" and "Oslo" in message.text
    assert message.to_langchain().content == message.text

    first, second = everything.get_prompt(
        "resource-prompt", {"resourceType": "Text", "resourceId": "1"}
    )
    assert "Text resource with id: 1" in first.text
    assert second.blocks[0]["extras"] == {"uri": "demo://resource/dynamic/text/1"}


def test_progress_reaches_the_callbacks_and_the_display(
    everything: MCPHub, progress_seen: list[ProgressUpdate]
) -> None:
    out = io.StringIO()
    trace = RunTrace(Console(file=out, width=200, highlight=False))
    progress_seen.clear()
    name = "trigger-long-running-operation"
    result = everything.call(name, {"duration": 0.4, "steps": 4}, progress=trace.progress)
    assert not result.is_error and "Steps: 4" in result.text
    assert [(u.progress, u.total) for u in progress_seen] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert {(u.server, u.tool) for u in progress_seen} == {("everything", name)}
    assert [e["progress"] for e in trace.events if e["kind"] == "tool_progress"] == [1, 2, 3, 4]
    lines = [line for line in out.getvalue().splitlines() if "progress:" in line]
    assert lines and lines[-1].endswith(f"progress: {name} 4/4 (100%)")


def test_sampling_is_answered_by_the_local_model(everything: MCPHub) -> None:
    started = time.monotonic()
    result = everything.call("trigger-sampling-request", {"prompt": "Say hello.", "maxTokens": 16})
    assert not result.is_error, result.text
    assert "LLM sampling result" in result.text
    assert '"model": "' in result.text
    # Cut at the 16 tokens asked, or the model's own end of turn before them.
    assert '"stopReason": "maxTokens"' in result.text or '"stopReason": "endTurn"' in result.text
    reply = result.text.split('"text": "', 1)[1].split('"', 1)[0]
    assert reply.strip()  # the model wrote something
    assert time.monotonic() - started < 60


def test_a_sampling_request_waits_for_the_model_then_is_answered() -> None:
    config = ServerConfig(
        name="everything", command=["node", str(_server_entry()), "stdio"], call_timeout=30
    )
    deferred = DeferredSampler()
    with HubStart([config], sampling=deferred).result() as hub:
        later = threading.Timer(0.5, deferred.resolve, args=(lambda request: "answered later",))
        later.start()
        result = hub.call("trigger-sampling-request", {"prompt": "Say hello.", "maxTokens": 8})
        later.join()
    assert not result.is_error, result.text
    assert "answered later" in result.text
    refusing = DeferredSampler()
    refusing.resolve(None)
    with HubStart([config], sampling=refusing).result() as hub:
        result = hub.call("trigger-sampling-request", {"prompt": "Say hello.", "maxTokens": 8})
    assert "no model to answer sampling requests" in result.text


def test_sse_transport() -> None:
    entry = _server_entry()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        ["node", str(entry), "sse"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            with socket.socket() as attempt:
                if attempt.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline and server.poll() is None, "server did not start"
            time.sleep(0.1)
        config = ServerConfig(name="legacy", url=f"http://127.0.0.1:{port}/sse", call_timeout=10)
        assert config.transport == "sse"
        with MCPHub([config]) as hub:
            assert hub.call("echo", {"message": "over sse"}).text == "Echo: over sse"
    finally:
        server.terminate()
        server.wait(timeout=10)
