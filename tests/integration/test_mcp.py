"""The MCP client against real servers started as subprocesses: no mocks.

`tests/data/faulty_mcp_server.py` paginates its tool list and has tools that fail,
raise, hang and crash; the bundled demo servers provide realistic, stateful tools.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest

from toolweave.adapters.demo_servers import DEMO_SERVERS, STATE_ENV
from toolweave.adapters.mcp.client import (
    HINT_DEFAULTS,
    MCPConfigError,
    MCPHub,
    ServerConfig,
    assign_names,
    demo_server_configs,
    open_connection,
)
from toolweave.errors import ToolServerError

DATA = Path(__file__).resolve().parents[1] / "data"
FAULTY = DATA / "faulty_mcp_server.py"
BEARER = DATA / "bearer_http_server.py"
FAULTY_TOOLS = [
    "echo",
    "pid",
    "fail",
    "raise_error",
    "hang",
    "crash",
    "image",
    "big",
    "filler_0",
    "filler_1",
    "filler_2",
]


def faulty(name: str = "faulty", *args: str, call_timeout: float = 10.0) -> ServerConfig:
    return ServerConfig(
        name=name, command=[sys.executable, str(FAULTY), *args], call_timeout=call_timeout
    )


def children() -> set[int]:
    """Live (not zombie) child processes of this test process."""
    pids: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            listed = (task / "children").read_text()
        except FileNotFoundError:  # a thread that ended while we looked
            continue
        pids.update(int(pid) for pid in listed.split())
    return {pid for pid in pids if _alive(pid)}


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture(scope="module")
def hub() -> Iterator[MCPHub]:
    with MCPHub([faulty("faulty", "--page-size", "4", call_timeout=1.5)]) as shared:
        yield shared


@pytest.fixture(scope="module")
def demo_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MCPHub]:
    with MCPHub(demo_server_configs(tmp_path_factory.mktemp("demo-state"))) as shared:
        yield shared


# -- configuration and naming -----------------------------------------------------------


def test_server_config_parse() -> None:
    config = ServerConfig.parse("python -m toolweave.adapters.demo_servers.notes --flag")
    assert config.name == "notes"
    assert config.command == ("python", "-m", "toolweave.adapters.demo_servers.notes", "--flag")
    assert config.transport == "stdio"
    assert ServerConfig.parse("npx -y @acme/server-files /tmp").name == "server-files"
    remote = ServerConfig.parse("http://127.0.0.1:8123/mcp", call_timeout=5)
    assert (remote.name, remote.url, remote.call_timeout) == ("127.0.0.1_8123", remote.url, 5)
    assert remote.transport == "http"
    named = ServerConfig.parse("docs=python server.py 'two words'")
    assert named.name == "docs"
    assert named.command == ("python", "server.py", "two words")
    with pytest.raises(ValueError, match="either a command or a url"):
        ServerConfig(name="x")
    with pytest.raises(ValueError, match="server name"):
        ServerConfig(name="bad name", command=["x"])
    with pytest.raises(ValueError, match="empty"):
        ServerConfig.parse("   ")


def test_assign_names_prefixes_only_collisions() -> None:
    names = assign_names(
        {"a": ["search", "read", "a_search"], "b": ["search", "write"], "c": ["my tool"]}
    )
    assert names == {
        ("a", "read"): "read",
        ("a", "a_search"): "a_search",
        ("b", "write"): "write",
        ("c", "my tool"): "my_tool",
        ("a", "search"): "a_search_2",  # "a_search" is a real tool of server a
        ("b", "search"): "b_search",
    }


# -- listing, calling, failing -----------------------------------------------------------


def test_lists_every_page_with_annotation_defaults(hub: MCPHub) -> None:
    assert [tool.name for tool in hub.tools] == FAULTY_TOOLS  # 11 tools over 3 pages
    echo = hub.tool("echo")
    assert echo.source == "mcp:faulty"
    assert echo.origin.name == "echo"
    assert echo.spec.read_only is True  # the server says so
    assert dict(echo.spec.annotations) == {
        "title": "Echo",
        "readOnlyHint": True,
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": True,
        "x-defaulted": ["destructiveHint", "idempotentHint", "openWorldHint"],
    }
    assert dict(hub.tool("pid").spec.annotations)["openWorldHint"] is False
    fail = hub.tool("fail").spec
    assert dict(fail.annotations) == {**HINT_DEFAULTS, "x-defaulted": list(HINT_DEFAULTS)}
    # Unset hints are defaults, not the server's claim: name and description decide.
    assert fail.read_only is True  # "Returns an error result."
    assert hub.tool("crash").spec.read_only is False  # "Kills its own process."
    assert echo.spec.required == ("text",)


def test_call_returns_text_and_structured_content(hub: MCPHub) -> None:
    result = hub.call("echo", {"text": "hello"})
    assert not result.is_error
    assert result.text == "faulty: hello"
    assert result.structured == {"label": "faulty", "text": "hello"}


def test_error_results_and_raising_tools(hub: MCPHub) -> None:
    failed = hub.call("fail", {})
    assert failed.is_error
    assert failed.text == "the frobnicator is out of order"
    raised = hub.call("raise_error", {})
    assert raised.is_error
    assert "tool server 'faulty'" in raised.text and "raise_error" in raised.text
    unknown = hub.call("no_such_tool", {})
    assert unknown.is_error and "unknown tool 'no_such_tool'" in unknown.text
    assert not hub.call("echo", {"text": "still here"}).is_error


def test_non_text_content_is_described_and_long_output_capped(hub: MCPHub) -> None:
    image = hub.call("image", {})
    assert image.text == "a one-pixel image:\n[image image/png, 70 bytes]"
    big = hub.call("big", {})
    assert big.text.startswith("x" * 20_000)
    assert big.text.endswith("[output truncated: 30000 more characters]")


def test_hanging_tool_times_out_and_the_server_restarts(hub: MCPHub) -> None:
    before = hub.call("pid", {}).structured["pid"]
    started = time.monotonic()
    result = hub.call("hang", {})
    assert time.monotonic() - started < 5
    assert result.is_error
    assert result.text == (
        "tool server 'faulty': did not answer 'hang' within 1.5 s; "
        "it will be restarted on the next call"
    )
    after = hub.call("pid", {})
    assert not after.is_error
    assert after.structured["pid"] != before


def test_crash_gives_an_error_result_and_the_next_call_restarts(hub: MCPHub) -> None:
    before = hub.call("pid", {}).structured["pid"]
    result = hub.call("crash", {})
    assert result.is_error
    assert "tool server 'faulty'" in result.text
    assert "the server process exited" in result.text
    assert "crashing on purpose" in result.text  # the server's stderr
    assert "restarted on the next call" in result.text
    after = hub.call("pid", {})
    assert not after.is_error and after.structured["pid"] != before
    assert not _alive(before)


def test_connection_used_directly_from_async_code() -> None:
    async def main() -> tuple[int, int, list[str]]:
        async with open_connection(faulty()) as connection:
            names = [tool.name for tool in await connection.list_tools()]
            await connection.call_tool("crash")
            result = await connection.call_tool("echo", {"text": "again"})
            assert result.text == "faulty: again"
            return connection.starts, len(names), names[:2]

    assert anyio.run(main) == (2, len(FAULTY_TOOLS), ["echo", "pid"])


# -- several servers ---------------------------------------------------------------------


def test_name_collisions_are_prefixed_and_routed() -> None:
    servers = [
        faulty("alpha", "--only", "echo,pid", "--extra-tool", "alpha_only", "--label", "A"),
        faulty("beta", "--only", "echo", "--extra-tool", "beta_only", "--label", "B"),
    ]
    with MCPHub(servers) as two:
        assert sorted(tool.name for tool in two.tools) == [
            "alpha_echo",
            "alpha_only",
            "beta_echo",
            "beta_only",
            "pid",
        ]
        assert two.call("alpha_echo", {"text": "x"}).text == "A: x"
        assert two.call("beta_echo", {"text": "x"}).text == "B: x"
        assert two.tool("beta_echo").source == "mcp:beta"
        assert two.call("beta_only", {}).text == "beta_only"


def test_other_servers_keep_working_while_one_is_broken(tmp_path: Path) -> None:
    servers = [faulty(), *demo_server_configs(tmp_path, names=["notes"])]
    with MCPHub(servers) as mixed:
        assert mixed.call("crash", {}).is_error
        notes = mixed.call("list_notes", {})
        assert not notes.is_error and "Groceries" in notes.text
        assert mixed.call("echo", {"text": "back"}).text == "faulty: back"


def test_a_server_that_cannot_start(tmp_path: Path) -> None:
    missing = ServerConfig(name="ghost", command=[str(tmp_path / "no-such-server")])
    with pytest.raises(ToolServerError, match=r"ghost.*could not start"):
        MCPHub([missing])
    with MCPHub([missing, faulty("ok")], skip_failed=True) as partial:
        assert set(partial.errors) == {"ghost"}
        assert partial.servers == ("ok",)
        assert partial.call("echo", {"text": "fine"}).text == "faulty: fine"


def test_async_use_from_a_running_event_loop(tmp_path: Path) -> None:
    async def main() -> list[str]:
        async with await MCPHub.open([faulty()]) as shared:
            echo = shared.tool("echo")
            results = await asyncio.gather(
                echo.run({"text": "one"}), echo.run({"text": "two"}), shared.acall("pid", {})
            )
            return [result.text for result in results[:2]]

    assert asyncio.run(main()) == ["faulty: one", "faulty: two"]


def test_no_child_processes_are_left_after_close() -> None:
    before = children()
    hub = MCPHub([faulty("one", call_timeout=1), faulty("two", "--only", "echo")])
    started = children() - before
    assert len(started) == 2
    hung = hub.call("hang", {})  # leaves a hung server shutting down in the background
    assert "did not answer 'hang'" in hung.text
    assert not hub.call("one_echo", {"text": "restarted"}).is_error
    hub.close()
    assert children() - before == set()
    with pytest.raises(ToolServerError, match="closed"):
        hub.call("pid", {})
    hub.close()  # closing twice is fine


# -- demo servers ------------------------------------------------------------------------


def test_demo_servers_have_honest_annotations(demo_hub: MCPHub) -> None:
    assert demo_hub.servers == tuple(DEMO_SERVERS)
    hints = {tool.name: dict(tool.spec.annotations) for tool in demo_hub.tools}
    read_only = {name for name, h in hints.items() if h["readOnlyHint"]}
    assert read_only == {
        "list_files", "read_file", "search_files", "list_notes", "search_notes", "read_note",
        "search_contacts", "get_contact", "list_events", "find_free_slots", "list_inbox",
        "read_message", "current_weather", "forecast", "geocode", "distance",
    }  # fmt: skip
    assert hints["create_note"]["destructiveHint"] is False
    assert hints["delete_note"]["destructiveHint"] is True
    assert hints["delete_note"]["idempotentHint"] is True
    assert hints["move_file"]["idempotentHint"] is False
    assert hints["send_message"]["openWorldHint"] is True
    assert all(not h["openWorldHint"] for n, h in hints.items() if n != "send_message")


def test_demo_servers_answer(demo_hub: MCPHub) -> None:
    calls = {
        "read_file": {"path": "todo.txt"},
        "search_contacts": {"query": "atlas"},
        "find_free_slots": {"day": "today", "duration_minutes": 60},
        "list_inbox": {"unread_only": True},
        "distance": {"from_city": "London", "to_city": "Paris"},
    }
    results = {name: demo_hub.call(name, arguments) for name, arguments in calls.items()}
    assert all(not result.is_error for result in results.values()), results
    assert "renew passport" in results["read_file"].structured["content"]
    assert len(results["search_contacts"].structured["contacts"]) == 2
    assert results["distance"].structured["distance"] == 343
    escape = demo_hub.call("read_file", {"path": "../notes.json"})
    assert escape.is_error and "outside the files folder" in escape.text


def test_demo_state_persists_across_restarts(tmp_path: Path) -> None:
    configs = demo_server_configs(tmp_path, names=["notes"])
    with MCPHub(configs) as first:
        created = first.call("create_note", {"title": "Parking", "body": "Level 3, row F"})
        note_id = created.structured["id"]
    assert (tmp_path / "notes.json").exists()
    with MCPHub(configs) as second:
        read = second.call("read_note", {"note_id": note_id})
        assert read.structured["body"] == "Level 3, row F"


def test_streamable_http_transport(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", DEMO_SERVERS["weather"], "--http", str(port)],
        env={**os.environ, STATE_ENV: str(tmp_path)},
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
        with MCPHub([f"weather=http://127.0.0.1:{port}/mcp"]) as remote:
            assert {tool.name for tool in remote.tools} == {
                "current_weather",
                "forecast",
                "geocode",
                "distance",
            }
            result = remote.call("geocode", {"city": "Tokyo"})
            assert result.structured == {
                "city": "Tokyo",
                "country": "Japan",
                "latitude": 35.68,
                "longitude": 139.69,
            }
    finally:
        server.terminate()
        server.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_for_port(port: int, server: subprocess.Popen[bytes], seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while True:
        with socket.socket() as attempt:
            if attempt.connect_ex(("127.0.0.1", port)) == 0:
                return
        assert time.monotonic() < deadline and server.poll() is None, "server did not start"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def bearer_url() -> Iterator[str]:
    """The loopback streamable-HTTP server that wants ``Authorization: Bearer s3cret``."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(BEARER), str(port), "s3cret"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, server)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.terminate()
        server.wait(timeout=10)


class Bearer(httpx2.Auth):
    def __init__(self, token: str) -> None:
        self.token = token

    def auth_flow(self, request: httpx2.Request) -> Iterator[httpx2.Request]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        yield request


def test_http_headers_reach_the_server(bearer_url: str) -> None:
    headers = {"Authorization": "Bearer s3cret", "X-Client": "toolweave-test"}
    config = ServerConfig(name="bearer", url=bearer_url, headers=headers, call_timeout=10)
    assert "s3cret" not in repr(config)  # headers carry secrets: not shown
    with MCPHub([config]) as hub:
        assert hub.call("whoami", {}).structured == {"client": "toolweave-test"}


def test_http_auth_object_and_a_refused_token(bearer_url: str) -> None:
    config = ServerConfig(name="bearer", url=bearer_url, auth=Bearer("s3cret"), call_timeout=10)
    with MCPHub([config]) as hub:
        assert hub.call("whoami", {}).structured == {"client": None}
    wrong = ServerConfig(
        name="bearer", url=bearer_url, auth=Bearer("wrong"), connect_timeout=10, call_timeout=5
    )
    started = time.monotonic()
    with pytest.raises(ToolServerError, match=r"bearer.*could not connect.*401") as caught:
        MCPHub([wrong])
    assert "\n" not in str(caught.value)
    assert time.monotonic() - started < 15


def test_config_file_with_two_stdio_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TW_TEST_STATE", str(tmp_path / "state"))
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    name: {
                        "command": sys.executable,
                        "args": ["-m", DEMO_SERVERS[name]],
                        "env": {STATE_ENV: "${TW_TEST_STATE}"},
                        "callTimeout": 10,
                    }
                    for name in ("notes", "weather")
                }
                | {"off": {"command": "does-not-exist", "disabled": True}}
            }
        ),
        encoding="utf-8",
    )
    with MCPHub.from_config_file(config) as hub:
        assert hub.servers == ("notes", "weather")
        created = hub.call("create_note", {"title": "Seat", "body": "row F"})
        assert not created.is_error
        assert hub.call("geocode", {"city": "Tokyo"}).structured["country"] == "Japan"
    assert any((tmp_path / "state").iterdir())  # the expanded variable reached the servers
    monkeypatch.delenv("TW_TEST_STATE")
    with pytest.raises(MCPConfigError, match=r"server 'notes'.*env.*TW_TEST_STATE is not set"):
        MCPHub.from_config_file(config)
