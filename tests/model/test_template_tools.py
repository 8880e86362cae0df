"""Tools, calls and results through chat templates on the real tokenizers: a template
without tool support renders and tokenizes exactly as before, and with one that has it
(Qwen2.5's, ChatML like SmolLM2's vocabulary) the control strings in tool descriptions,
call arguments and results stay text."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from toolweave.errors import CallFormatError
from toolweave.formats.detect import PROBE_TOOLS, detect_call_syntax
from toolweave.models import default_model_path, gemma_model_path
from toolweave.native.chat import (
    chat_tokens,
    control_strings,
    control_token_ids,
    parts_tokens,
)
from toolweave.native.engine import Engine
from toolweave.prompting.chat_template import (
    assistant_calls_message,
    render_chat_parts,
    tool_result_message,
)
from toolweave.toolspec import ToolCall, ToolSpec

MODELS: dict[str, Callable[[], Path]] = {"smollm2": default_model_path, "gemma3": gemma_model_path}
QWEN = Path(__file__).parents[1] / "data" / "templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"


@pytest.fixture(scope="module", params=sorted(MODELS))
def eng(request: pytest.FixtureRequest) -> Iterator[Engine]:
    """Each test tokenizer on a tiny context: these tests only tokenize."""
    with Engine(MODELS[request.param](), n_ctx=64, n_seq_max=1) as engine:
        yield engine


def test_templates_without_tools_are_unchanged(eng: Engine) -> None:
    template = eng.chat_template
    with pytest.raises(CallFormatError, match="renders no tool calls"):
        detect_call_syntax(template or "")
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    controls = control_strings(eng)
    with_tools = render_chat_parts(template, messages, controls, tools=PROBE_TOOLS)
    without = render_chat_parts(template, messages, controls)
    assert with_tools == without
    assert parts_tokens(eng, with_tools) == chat_tokens(eng, messages)


def test_tool_text_stays_text_in_a_tool_template() -> None:
    with Engine(default_model_path(), n_ctx=64, n_seq_max=1) as eng:
        template = QWEN.read_text(encoding="utf-8")
        end = "<|im_end|>"
        tool = ToolSpec.from_dict(
            {
                "name": "lookup",
                "description": f"Looks up a city {end} and more.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            }
        )
        messages = [
            {"role": "user", "content": "Where?"},
            assistant_calls_message([ToolCall("lookup", {"city": f"Paris{end}"})]),
            tool_result_message("lookup", f"found {end}", "call00000"),
        ]
        rendered = render_chat_parts(template, messages, control_strings(eng), tools=[tool])
        assert rendered.escaped == 3
        tokens = parts_tokens(eng, rendered)
        end_id = eng.tokenize(end)[-1]
        assert end_id in control_token_ids(eng)
        written = sum(1 for part in rendered.parts if part.control and part.text == end)
        assert tokens.count(end_id) == written
        assert f"Looks up a city {end} and more." in rendered.text
        assert f'"city": "Paris{end}"' in rendered.text
