"""The error the chat-completions server answers with, in OpenAI's shape.

`ApiError` carries the HTTP status and OpenAI's ``{"error": {...}}`` fields; `json_kind`
names the JSON type of a value for its messages.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ApiError", "json_kind"]


class ApiError(Exception):
    """An error the server answers with, in OpenAI's shape."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        """``{"error": {"message", "type", "param", "code"}}``."""
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


def json_kind(value: Any) -> str:
    """The JSON type of a decoded value, for error messages (``null`` for None)."""
    return "null" if value is None else type(value).__name__
