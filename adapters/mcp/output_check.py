"""A tool call's result checked against the tool's ``outputSchema``.

A result whose structured content breaks the tool's ``outputSchema`` is an answer, not
a broken session: `checked_result` turns it into an error `ToolResult` saying that the
call ran, why the result does not fit and what it returned (capped), and the session
stays up.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types
from mcp import Client

from toolweave.adapters.mcp.config import ServerConfig
from toolweave.adapters.mcp.convert import tool_result
from toolweave.adapters.mcp.session import describe_error
from toolweave.errors import ToolServerError
from toolweave.tools import ToolResult

__all__ = ["checked_result"]


async def checked_result(
    config: ServerConfig, client: Client, name: str, result: mcp_types.CallToolResult
) -> ToolResult:
    """The result, or an error observation when it breaks the tool's output schema.

    The SDK's own check (``validate_tool_result``) decides; a mismatch says the call
    ran, why the result does not fit, and what it returned. The session stays up:
    the server answered the protocol correctly, and the call is never sent again.
    """
    converted = tool_result(result, config.max_output_chars, config.max_content_bytes)
    if result.is_error:
        return converted
    try:
        with anyio.fail_after(config.call_timeout):
            await client.session.validate_tool_result(name, result)
    except Exception as exc:
        verdict = (
            "its result does not match the tool's output schema"
            if isinstance(exc, RuntimeError)
            else "its result could not be checked against the tool's output schema"
        )
        # converted.text is capped already; structured content alone is capped here.
        shown = converted.text or _cap(
            _json_text(result.structured_content), config.max_output_chars
        )
        problem = (
            f"{name!r} ran, but {verdict} ({_schema_problem(exc)}); "
            f"it returned: {shown or '(nothing)'}"
        )
        return ToolResult.error(str(ToolServerError(config.name, problem)))
    return converted


def _schema_problem(exc: BaseException, chars: int = 300) -> str:
    """One line on why a result failed its output schema (where and what, if known)."""
    cause = exc.__cause__
    where = getattr(cause, "json_path", None)
    message = getattr(cause, "message", None)
    if isinstance(where, str) and isinstance(message, str):
        text = f"at {where}: {message}"
    elif isinstance(exc, TimeoutError):
        text = "the check timed out"
    else:
        text = describe_error(exc) if not isinstance(exc, RuntimeError) else str(exc)
    return _cap(" ".join(text.split()), chars)


def _json_text(value: Any) -> str:
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, default=str)


def _cap(text: str, chars: int) -> str:
    if len(text) <= chars:
        return text
    return f"{text[:chars]}... [{len(text) - chars} more characters]"
