"""`toolweave bench session --chat-template`: the `ChatLlamaCpp` baseline renders the
bound tools through a template with tool support (llama-cpp-python's own Jinja
formatter), so its prompt describes the tools as toolweave's does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolweave.models import resolve_model
from toolweave.native.baselines.chat_llama_cpp import chat_llama_cpp, chat_llama_cpp_missing

TEMPLATES = Path(__file__).resolve().parents[1] / "data" / "templates"
WEATHER = {
    "type": "function",
    "function": {
        "name": "current_weather",
        "description": "The current weather in a city, with the temperature in celsius.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city's name."}},
            "required": ["city"],
        },
    },
}
FORCED = {"type": "function", "function": {"name": "current_weather"}}


def _forced_call(template: str | None) -> tuple[Any, int]:
    chat, perf = chat_llama_cpp(
        resolve_model(None), n_ctx=1024, n_threads=2, max_tokens=24, chat_template=template
    )
    try:
        message = chat.bind_tools([WEATHER], tool_choice=FORCED).invoke("Weather in Paris?")
        return message, perf.totals()[0]
    finally:
        chat.client.close()


def test_a_tool_template_puts_the_tools_in_chat_llama_cpps_prompt() -> None:
    if (missing := chat_llama_cpp_missing()) is not None:
        pytest.skip(missing)
    template = (TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text(encoding="utf-8")
    plain, plain_prefilled = _forced_call(None)
    described, described_prefilled = _forced_call(template)
    for message in (plain, described):
        assert [c["name"] for c in message.tool_calls] == ["current_weather"]
        assert set(message.tool_calls[0]["args"]) == {"city"}
    # SmolLM2's own template has no `tools`: only the Qwen template's prompt lists the tool
    # (its description and schema, about 150 tokens more).
    assert described_prefilled > plain_prefilled + 60, (plain_prefilled, described_prefilled)
