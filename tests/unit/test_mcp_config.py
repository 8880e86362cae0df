"""`mcpServers` config files and `ServerConfig` transports: parsing only, no server runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest

from toolweave.adapters.mcp.config import ServerConfig
from toolweave.adapters.mcp.config_file import (
    MAX_CONFIG_BYTES,
    MCPConfigError,
    expand_variables,
    load_mcp_config,
)


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data, encoding="utf-8")
    return path


def test_stdio_http_and_sse_servers(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "mcpServers": {
                "notes": {
                    "command": "python",
                    "args": ["-m", "notes", "--flag"],
                    "env": {"KEY": "${HOME_DIR}", "LEVEL": "${LEVEL:-info}"},
                    "cwd": "servers",
                    "callTimeout": 5,
                    "trustAnnotations": False,
                    "alwaysAllow": ["x"],
                },
                "remote": {
                    "url": "https://example.test/mcp",
                    "headers": {"Authorization": "Bearer ${env:TOKEN}"},
                    "type": "streamable-http",
                },
                "legacy": {"url": "https://example.test/sse"},
                "old": {"url": "https://example.test/events", "transport": "sse"},
                "my server": {"command": "srv"},
                "off": {"command": "nope", "disabled": True},
            }
        },
    )
    configs = load_mcp_config(path, environ={"HOME_DIR": "/h", "TOKEN": "t0k"})
    by_name = {c.name: c for c in configs}
    assert list(by_name) == ["notes", "remote", "legacy", "old", "my_server"]
    notes = by_name["notes"]
    assert notes.command == ("python", "-m", "notes", "--flag")
    assert notes.env == {"KEY": "/h", "LEVEL": "info"}
    assert notes.cwd == str(tmp_path / "servers")
    assert (notes.transport, notes.call_timeout, notes.trust_annotations) == ("stdio", 5.0, False)
    remote = by_name["remote"]
    assert (remote.transport, remote.headers) == ("http", {"Authorization": "Bearer t0k"})
    assert by_name["legacy"].transport == "sse"
    assert by_name["old"].transport == "sse"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ('{"mcpServers": {', "not JSON (line 1, column"),
        ([1, 2], "expected a JSON object, got a list"),
        ({"servers": []}, 'expected an object under "mcpServers"'),
        ({"mcpServers": {"a": "python"}}, "server 'a': expected an object, got a string"),
        ({"mcpServers": {"a": {}}}, 'server \'a\': needs "command" (stdio) or "url"'),
        ({"mcpServers": {"a": {"command": "x", "url": "http://h"}}}, "not both"),
        ({"mcpServers": {"a": {"command": "x", "args": "y"}}}, "field 'args' must be a list"),
        ({"mcpServers": {"a": {"command": ["x"]}}}, "field 'command' must be a string"),
        ({"mcpServers": {"a": {"command": "x", "env": {"K": "${NOPE}"}}}}, "field 'env.K'"),
        ({"mcpServers": {"a": {"url": "http://h", "headers": {"A": "${input:t}"}}}}, "unsupported"),
        ({"mcpServers": {"a": {"url": "ftp://h"}}}, "server 'a': url must be http(s)"),
        ({"mcpServers": {"a": {"url": "http://h", "type": "ws"}}}, "unknown transport 'ws'"),
        ({"mcpServers": {"a": {"command": "x", "type": "sse"}}}, "transport 'sse' needs a url"),
        ({"mcpServers": {"a": {"command": "x", "callTimeout": 0}}}, "'callTimeout' must be a"),
        ({"mcpServers": {"a": {"command": "x", "trustAnnotations": 1}}}, "true or false"),
    ],
)
def test_bad_files_give_one_line_naming_server_and_field(
    tmp_path: Path, data: Any, message: str
) -> None:
    path = write(tmp_path, data)
    with pytest.raises(MCPConfigError) as caught:
        load_mcp_config(path, environ={})
    text = str(caught.value)
    assert message in text and str(path) in text and "\n" not in text


def test_missing_and_oversized_files(tmp_path: Path) -> None:
    with pytest.raises(MCPConfigError, match="cannot read it"):
        load_mcp_config(tmp_path / "absent.json")
    big = write(tmp_path, " " * (MAX_CONFIG_BYTES + 1))
    with pytest.raises(MCPConfigError, match="more than"):
        load_mcp_config(big)


def test_expand_variables() -> None:
    env = {"A": "1", "B": ""}
    assert expand_variables("x${A}y${env:B}z${C:-3}", env) == "x1yz3"
    assert expand_variables("no variables, $A stays", env) == "no variables, $A stays"
    with pytest.raises(ValueError, match=r"field 'value': environment variable C is not set"):
        expand_variables("${C}", env)


def test_server_config_transports_and_auth() -> None:
    assert ServerConfig(name="s", url="http://h/mcp").transport == "http"
    assert ServerConfig(name="s", url="http://h/sse/").transport == "sse"
    assert ServerConfig(name="s", url="http://h/sse", transport="http").transport == "http"
    assert ServerConfig(name="s", command=["x"]).transport == "stdio"
    auth = httpx2.BasicAuth("u", "p")
    assert ServerConfig(name="s", url="http://h/mcp", auth=auth).auth is auth
    with pytest.raises(ValueError, match=r"auth must be an httpx2\.Auth"):
        ServerConfig(name="s", url="http://h/mcp", auth=("u", "p"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="headers and auth need a url"):
        ServerConfig(name="s", command=["x"], headers={"A": "b"})
    secret = ServerConfig(name="s", url="http://h/mcp", headers={"Authorization": "Bearer t"})
    assert "Bearer" not in repr(secret)
