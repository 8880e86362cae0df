"""toolweave: fast tool calling on small local LLMs (llama.cpp), without retraining.

This package (`toolkit/`) is pure logic and never imports llama.cpp; the engine and the
decoders live in `toolweave.native`, the edges (CLI) in `toolweave.adapters`.
"""

from toolweave.errors import (
    CallFormatError,
    ConstraintError,
    ContextFullError,
    DecodeError,
    EngineError,
    ModelError,
    SequenceError,
    ToolServerError,
    ToolSpecError,
    ToolweaveError,
)
from toolweave.formats import CallFormat, format_for_chat_template, get_format
from toolweave.grammar.call import call_grammar, value_grammar
from toolweave.models import default_model_path, gemma_model_path, resolve_model
from toolweave.results import MODES, CallResult, CallStats, InvalidCall
from toolweave.tools import Tool, ToolResult
from toolweave.toolspec import ToolCall, ToolSpec, load_tools, load_tools_file

__all__ = [
    "MODES",
    "CallFormat",
    "CallFormatError",
    "CallResult",
    "CallStats",
    "ConstraintError",
    "ContextFullError",
    "DecodeError",
    "EngineError",
    "InvalidCall",
    "ModelError",
    "SequenceError",
    "Tool",
    "ToolCall",
    "ToolResult",
    "ToolServerError",
    "ToolSpec",
    "ToolSpecError",
    "ToolweaveError",
    "call_grammar",
    "default_model_path",
    "format_for_chat_template",
    "gemma_model_path",
    "get_format",
    "load_tools",
    "load_tools_file",
    "resolve_model",
    "value_grammar",
]
