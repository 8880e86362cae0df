"""LangChain conventions of ChatToolweave that need no model: how a request's tools,
tool choice and response format become a plan, the unknown-argument message, the
profile, and the usage and metadata of a decoder result."""

from __future__ import annotations

from typing import Any, get_type_hints

import pytest
from langchain_core.language_models import ModelProfile
from langchain_core.messages import AIMessageChunk

from toolweave.adapters.langchain.arguments import same_model, unknown_argument
from toolweave.adapters.langchain.messages import ai_message, final_chunk
from toolweave.adapters.langchain.profile import model_profile
from toolweave.adapters.langchain.request_plan import plan_request
from toolweave.models import default_model_path
from toolweave.results import CallResult, CallStats
from toolweave.toolspec import ToolCall

TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
FORMAT = {"type": "json_schema", "json_schema": {"name": "Answer", "schema": SCHEMA}}


@pytest.mark.parametrize(
    ("tools", "choice", "fmt", "kind", "schema"),
    [
        ([TOOL], None, FORMAT, "auto", SCHEMA),  # an agent's tools and structured response
        ([TOOL], "any", FORMAT, "call", None),
        ([TOOL], "none", FORMAT, "json", SCHEMA),
        ([], None, FORMAT, "json", SCHEMA),
        ([TOOL], None, None, "auto", None),
        ([], None, None, "text", None),
    ],
)
def test_plan_of_tools_choice_and_response_format(
    tools: list[dict[str, Any]], choice: Any, fmt: Any, kind: str, schema: Any
) -> None:
    plan = plan_request(tools, choice, fmt)
    assert plan.kind == kind and plan.schema == schema


def test_unknown_argument_message_is_one_line_with_the_close_match() -> None:
    known = ["n_ctx", "n_threads", "max_tokens", "model"]
    assert unknown_argument("n_thread", known).endswith("did you mean 'n_threads'?")
    assert unknown_argument("num_predict", known).endswith("did you mean 'max_tokens'?")
    assert unknown_argument("qqq", known) == "ChatToolweave() got an unexpected argument 'qqq'"
    assert "hosted API" in unknown_argument("timeout", known)


def test_same_model_by_name_and_by_path() -> None:
    path = str(default_model_path())
    assert same_model("smollm2", path)
    assert not same_model("smollm2", "/missing/other.gguf")


def test_profile_fields_are_langchain_profile_keys() -> None:
    profile = model_profile(2048, 64)
    assert set(profile) <= set(get_type_hints(ModelProfile))
    assert profile["max_input_tokens"] == 2048 and profile["max_output_tokens"] == 64


def test_usage_counts_cached_prompt_tokens_and_metadata_names_the_provider() -> None:
    stats = CallStats(prompt_tokens=100, cached_tokens=90)
    result = CallResult(
        "lossless", (ToolCall("get_weather", {"city": "Bern"}),), "", (1, 2, 3), stats
    )
    msg = ai_message(result, model_name="SmolLM2")
    assert msg.usage_metadata == {
        "input_tokens": 100,
        "output_tokens": 3,
        "total_tokens": 103,
        "input_token_details": {"cache_read": 90},
    }
    assert msg.response_metadata["model_provider"] == "toolweave"
    assert msg.response_metadata["model_name"] == "SmolLM2"
    assert msg.response_metadata["finish_reason"] == "tool_calls"
    last = final_chunk(AIMessageChunk(content=""), result, "SmolLM2")
    assert last.usage_metadata == msg.usage_metadata
    assert last.response_metadata["model_provider"] == "toolweave"
