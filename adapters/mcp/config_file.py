"""``mcpServers`` config files, the format Claude Desktop, Cursor and VS Code use.

    {"mcpServers": {
        "notes":  {"command": "python", "args": ["-m", "notes"], "env": {"K": "v"}, "cwd": "."},
        "remote": {"url": "https://host/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        "legacy": {"url": "https://host/sse", "type": "sse"}
    }}

`load_mcp_config` reads one into `ServerConfig`s. The top-level key may also be
``servers`` (VS Code). A server has either ``command`` (with optional ``args``, ``env``,
``cwd``) or ``url`` (with optional ``headers``); ``type`` or ``transport`` is ``stdio``,
``http`` (also ``streamable-http``, ``streamableHttp``) or ``sse``, and is inferred when
left out. ``"disabled": true`` leaves a server out. Further optional keys, toolweave's
own: ``callTimeout`` and ``connectTimeout`` (seconds) and ``trustAnnotations``. Keys
other clients add (``alwaysAllow``, ``autoApprove``, ...) are ignored.

In ``command``, ``args``, ``env``, ``cwd``, ``url`` and ``headers`` values, ``${VAR}``
and ``${env:VAR}`` are replaced by the environment variable (``${VAR:-default}`` gives a
default); an unset variable is an error, so a token never goes out empty. A relative
``cwd`` is taken from the file's folder. A server name with characters a server name may
not hold (spaces, ``/``) has each run of them replaced by ``_``. Every problem raises
`MCPConfigError` in one line naming the file, the server and the field.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolweave.adapters.mcp.config import ServerConfig
from toolweave.adapters.mcp.convert import safe_tool_name
from toolweave.errors import ToolweaveError

__all__ = ["MAX_CONFIG_BYTES", "MCPConfigError", "expand_variables", "load_mcp_config"]

#: Largest config file read.
MAX_CONFIG_BYTES = 1 << 20

_VARIABLE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_ANY_VARIABLE = re.compile(r"\$\{[^}]*\}")
_TRANSPORT_KEYS = ("type", "transport")
_TIMEOUTS = {"callTimeout": "call_timeout", "connectTimeout": "connect_timeout"}


class MCPConfigError(ToolweaveError, ValueError):
    """An ``mcpServers`` file cannot be used; the message names the file, server and field."""


def load_mcp_config(
    path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None
) -> list[ServerConfig]:
    """The servers of an ``mcpServers`` file, in file order (disabled ones left out).

    ``environ`` is what ``${VAR}`` reads (default: this process's environment).
    """
    file = Path(path).expanduser()
    data = _read(file)
    servers = data.get("mcpServers", data.get("servers"))
    if not isinstance(servers, Mapping):
        raise MCPConfigError(f'{file}: expected an object under "mcpServers"')
    env = os.environ if environ is None else environ
    configs: list[ServerConfig] = []
    for name, entry in servers.items():
        where = f"{file}: server {name!r}"
        if not isinstance(entry, Mapping):
            raise MCPConfigError(f"{where}: expected an object, got {_kind(entry)}")
        if entry.get("disabled") is True:
            continue
        configs.append(_server(safe_tool_name(str(name)), entry, where, env, file.parent))
    return configs


def expand_variables(text: str, environ: Mapping[str, str], field: str = "value") -> str:
    """``text`` with ``${VAR}``, ``${env:VAR}`` and ``${VAR:-default}`` replaced.

    Raises `ValueError` naming ``field`` and the variable when one is not set.
    """

    def value(match: re.Match[str]) -> str:
        name, default = match[1], match[2]
        if name in environ:
            return environ[name]
        if default is not None:
            return default
        raise ValueError(f"field {field!r}: environment variable {name} is not set")

    for token in _ANY_VARIABLE.findall(text):
        if not _VARIABLE.fullmatch(token):
            raise ValueError(f"field {field!r}: unsupported variable {token[:60]}")
    return _VARIABLE.sub(value, text)


def _read(file: Path) -> dict[str, Any]:
    try:
        size = file.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise MCPConfigError(f"{file}: {size} bytes, more than {MAX_CONFIG_BYTES} allowed")
        text = file.read_text(encoding="utf-8")
    except MCPConfigError:
        raise
    except (OSError, UnicodeDecodeError) as exc:
        raise MCPConfigError(f"{file}: cannot read it: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MCPConfigError(
            f"{file}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from exc
    except RecursionError as exc:
        raise MCPConfigError(f"{file}: nested too deeply") from exc
    if not isinstance(data, dict):
        raise MCPConfigError(f"{file}: expected a JSON object, got {_kind(data)}")
    return data


def _server(
    name: str, entry: Mapping[str, Any], where: str, env: Mapping[str, str], base: Path
) -> ServerConfig:
    def text(field: str, value: Any) -> str:
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise MCPConfigError(f"{where}: field {field!r} must be a string, got {_kind(value)}")
        try:
            return expand_variables(str(value), env, field)
        except ValueError as exc:
            raise MCPConfigError(f"{where}: {exc}") from None

    def table(field: str) -> dict[str, str] | None:
        value = entry.get(field)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise MCPConfigError(f"{where}: field {field!r} must be an object, got {_kind(value)}")
        return {str(k): text(f"{field}.{k}", v) for k, v in value.items()}

    options: dict[str, Any] = {}
    command = entry.get("command")
    url = entry.get("url", entry.get("serverUrl"))
    if command is not None and url is not None:
        raise MCPConfigError(f'{where}: give either "command" or "url", not both')
    if command is not None:
        args = entry.get("args", [])
        if not isinstance(args, list):
            raise MCPConfigError(f"{where}: field 'args' must be a list, got {_kind(args)}")
        argv = [text("command", command)] + [text(f"args[{i}]", a) for i, a in enumerate(args)]
        if not argv[0].strip():
            raise MCPConfigError(f"{where}: field 'command' is empty")
        options["command"] = argv
        options["env"] = table("env")
        if entry.get("cwd") is not None:
            cwd = Path(text("cwd", entry["cwd"])).expanduser()
            options["cwd"] = str(cwd if cwd.is_absolute() else base / cwd)
    elif url is not None:
        options["url"] = text("url", url)
        options["headers"] = table("headers")
    else:
        raise MCPConfigError(f'{where}: needs "command" (stdio) or "url" (HTTP)')
    for key in _TRANSPORT_KEYS:
        if entry.get(key) is not None:
            options["transport"] = text(key, entry[key])
            break
    for key, option in _TIMEOUTS.items():
        value = entry.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise MCPConfigError(f"{where}: field {key!r} must be a positive number of seconds")
        options[option] = float(value)
    trust = entry.get("trustAnnotations")
    if trust is not None:
        if not isinstance(trust, bool):
            raise MCPConfigError(f"{where}: field 'trustAnnotations' must be true or false")
        options["trust_annotations"] = trust
    try:
        return ServerConfig(name=name, **options)
    except ValueError as exc:
        raise MCPConfigError(f"{where.split(': server')[0]}: {exc}") from None


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else type(value).__name__
    )
