"""The `grammar` baseline: what a ChatLlamaCpp user gets today.

llama-cpp-python's `create_chat_completion` with the call's JSON schema as a GBNF
grammar, on the same model file and the same chat messages as every other mode. The
prompt is evaluated once untimed (llama-cpp-python reuses the matching prefix), so the
timed part is the response, as for the other modes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import llama_cpp

from toolweave.errors import CallFormatError
from toolweave.formats import get_format
from toolweave.grammar.call import JSON_LAYOUTS, arguments_schema
from toolweave.native.compute import route_llama
from toolweave.native.engine import Engine
from toolweave.prompting.chat_template import Message, openai_tools
from toolweave.results import CallResult, CallStats, InvalidCall

if TYPE_CHECKING:
    from toolweave.native.caller import ToolCaller

__all__ = ["GrammarBaseline", "call_schema"]


def call_schema(caller: ToolCaller) -> dict[str, Any]:
    """JSON schema of one call `{"name": ..., "arguments": {...}}` over the caller's tools."""
    name_key, args_key = JSON_LAYOUTS.get(caller.fmt.name, ("name", "arguments"))
    options = []
    for spec in caller.tools:
        args = arguments_schema(spec)
        args.pop("x-guidance", None)
        options.append(
            {
                "type": "object",
                "properties": {name_key: {"const": spec.name}, args_key: args},
                "required": [name_key, args_key],
            }
        )
    one = options[0] if len(options) == 1 else {"anyOf": options}
    if caller.max_calls == 1:
        return one
    calls: dict[str, Any] = {"type": "array", "items": one, "minItems": 1}
    if caller.max_calls is not None:
        calls["maxItems"] = caller.max_calls
    return calls


def _as_format_text(caller: ToolCaller, text: str) -> str:
    """The grammar's JSON (one call, or a list of calls) written in the caller's format."""
    try:
        calls = get_format("json").parse(text)
    except CallFormatError:
        return caller.fmt.open + text + caller.fmt.close  # let validation report it
    return caller.fmt.serialize(calls)


class GrammarBaseline:
    """A second llama-cpp-python `Llama` on the engine's model file, used only for `grammar`."""

    def __init__(self, engine: Engine) -> None:
        self.llm = llama_cpp.Llama(
            model_path=str(engine.model_path),
            n_ctx=engine.n_ctx,
            n_threads=engine.n_threads,
            n_threads_batch=engine.n_threads_batch,
            n_batch=engine.n_batch,
            verbose=False,
        )
        route_llama(self.llm)  # its passes on toolweave's compute thread

    def close(self) -> None:
        self.llm.close()

    def call(self, caller: ToolCaller, request: str | Sequence[Message]) -> CallResult:
        messages: Any = caller.messages(request)
        schema = call_schema(caller)
        t_p = time.perf_counter()
        # The caller's prompt: its tools through the template's `tools` where it uses them.
        tools: Any = openai_tools(caller.tools) if caller.template_tools else None
        self.llm.create_chat_completion(
            messages=messages, tools=tools, max_tokens=1, temperature=0.0
        )
        prompt_ms = (time.perf_counter() - t_p) * 1000
        t0 = time.perf_counter()
        out: Any = self.llm.create_chat_completion(
            messages=messages,
            tools=tools,
            response_format={"type": "json_object", "schema": schema},
            temperature=0.0,
            max_tokens=caller.max_tokens,
        )
        total_ms = (time.perf_counter() - t0) * 1000
        choice = out["choices"][0]
        text = choice["message"]["content"] or ""
        n_out = int(out["usage"]["completion_tokens"])
        n_prompt = int(out["usage"]["prompt_tokens"])
        reason = "length" if choice.get("finish_reason") == "length" else "stop"
        calls, invalid = caller.validate_text(_as_format_text(caller, text))
        if reason == "length":
            invalid.append(InvalidCall(text=text, error="output truncated at max_tokens"))
        stats = CallStats(
            forward_passes=n_out + 1,
            decode_passes=n_out,
            prefill_tokens=n_prompt,
            decoded_tokens=n_out,
            output_tokens=n_out,
            prompt_tokens=n_prompt,
            prompt_ms=prompt_ms,
            time_to_tool_ms=total_ms if calls else None,
            total_ms=total_ms,
        )
        return CallResult(
            mode="grammar",
            calls=tuple(calls),
            text=text,
            tokens=tuple(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)),
            stats=stats,
            invalid=tuple(invalid),
            finish_reason=reason,
        )
