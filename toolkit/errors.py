"""The toolweave exception tree, in one place.

    ToolweaveError
    ├── ToolSpecError          a tool definition is invalid (schema, duplicate name, ...)
    ├── CallFormatError        text that should be a tool call does not parse
    ├── ModelError             the model file is missing or llama.cpp cannot load it
    ├── ModeError              a decoding mode name that does not exist (also a ValueError)
    ├── ConstraintError        a grammar cannot be built or a token was rejected
    ├── ToolServerError        a tool server cannot be started, crashed, hung or broke protocol
    └── EngineError            the llama.cpp engine refused an operation
        ├── ContextFullError   the request does not fit the context window
        ├── SequenceError      a sequence id is out of range or unknown
        ├── DecodeError        llama_decode failed
        ├── EngineBusyError    the engine is held by a paused stream (finish or close it)
        └── DecodeCancelledError  the request was cancelled between two forward passes

Errors that describe *model output* (CallFormatError, a value failing validation) are
the ones an agent loop may hand back to the model as an observation; everything else
propagates to the caller.
"""

from __future__ import annotations

__all__ = [
    "CallFormatError",
    "ConstraintError",
    "ContextFullError",
    "DecodeCancelledError",
    "DecodeError",
    "EngineBusyError",
    "EngineError",
    "ModeError",
    "ModelError",
    "SequenceError",
    "ToolServerError",
    "ToolSpecError",
    "ToolweaveError",
]


class ToolweaveError(Exception):
    """Base class of every error toolweave raises on purpose."""


class ToolSpecError(ToolweaveError, ValueError):
    """A tool definition is invalid; the message names the tool and the problem."""

    def __init__(self, tool: str | None, problem: str) -> None:
        self.tool = tool
        self.problem = problem
        where = f"tool {tool!r}" if tool else "tool definition"
        super().__init__(f"{where}: {problem}")


class CallFormatError(ToolweaveError, ValueError):
    """Text that should hold a tool call does not parse in the expected format."""


class ModelError(ToolweaveError):
    """The model file is missing, unreadable, or llama.cpp failed to load it."""


class ModeError(ToolweaveError, ValueError):
    """A decoding mode that does not exist, or that this entry point does not offer."""


class ConstraintError(ToolweaveError):
    """A token constraint (grammar) could not be built or was violated."""


class ToolServerError(ToolweaveError):
    """A tool server (MCP) could not be started, crashed, timed out or broke the protocol.

    The message names the server; executors turn it into an error observation.
    """

    def __init__(self, server: str, problem: str) -> None:
        self.server = server
        self.problem = problem
        super().__init__(f"tool server {server!r}: {problem}")


class EngineError(ToolweaveError, RuntimeError):
    """The llama.cpp engine refused an operation."""


class ContextFullError(EngineError):
    """The tokens of a request do not fit in the context window."""


class SequenceError(EngineError, ValueError):
    """A sequence id is out of range for the context."""


class DecodeError(EngineError):
    """llama_decode returned an error code."""


class EngineBusyError(EngineError):
    """The engine is held by a paused stream (a decoder generator neither finished nor
    closed): finish or close it first."""


class DecodeCancelledError(EngineError):
    """The request was cancelled; decoding stopped between two forward passes."""
