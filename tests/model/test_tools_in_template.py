"""Tools described through the model's own chat template (its ``tools`` variable).

With ``template_tools=None``, where a template lists the tools it is given and writes
calls in the syntax the caller decodes, the prompt is the one the model was trained on:
the request alone, the tools rendered by the template, no tool prompt of toolweave's.
SmolLM2's template lists no tools: it keeps toolweave's prompt.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from reference_check import assert_same_tokens

from toolweave.eval.zoo_spec import ZOO_FAMILIES
from toolweave.native.caller import ToolCaller
from toolweave.native.engine import Engine
from toolweave.prompting.chat_template import template_renders_tools
from toolweave.prompting.template_file import ChatTemplateError
from toolweave.toolspec import ToolSpec

if TYPE_CHECKING:
    from toolweave.adapters.bench.zoo import Zoo

TOOL = ToolSpec.from_dict(
    {
        "name": "set_light",
        "description": "Set the light of a room.",
        "parameters": {
            "type": "object",
            "properties": {
                "room": {"type": "string", "enum": ["kitchen", "bedroom", "hall"]},
                "on": {"type": "boolean"},
            },
            "required": ["room", "on"],
        },
    }
)
REQUEST = "Turn the kitchen light on, please."
OWN_PROMPT = "You are a function calling AI model"
#: Zoo families whose template lists tools and writes calls in the syntax decoded.
LISTING = ("qwen2", "llama3", "qwen35", "gemma4")


def test_smollm2_keeps_toolweaves_prompt(engine: Engine) -> None:
    caller = ToolCaller(engine, [TOOL], template_tools=None)
    assert not template_renders_tools(engine.chat_template)
    assert not caller.template_tools and caller.prompt_tools is None
    assert OWN_PROMPT in caller.prompt_text(REQUEST)
    with pytest.raises(ChatTemplateError, match="does not list the tools"):
        ToolCaller(engine, [TOOL], template_tools=True)


@pytest.fixture(scope="module", params=LISTING)
def zoo_engine(request: pytest.FixtureRequest, zoo: Zoo) -> Iterator[Engine]:
    assert request.param in {f.name for f in ZOO_FAMILIES}
    with Engine(zoo.model(request.param).path, n_ctx=2048, n_seq_max=8) as eng:
        yield eng


def test_a_tool_template_gets_the_tools_and_calls_still_decode(zoo_engine: Engine) -> None:
    caller = ToolCaller(zoo_engine, [TOOL], max_tokens=48, template_tools=None)
    assert caller.template_tools and caller.prompt_tools == (TOOL,)
    text = caller.prompt_text(REQUEST)
    assert OWN_PROMPT not in text  # the template's own tool prompt, not toolweave's
    assert "set_light" in text and "Set the light of a room." in text
    assert text.count(REQUEST) == 1
    own = ToolCaller(zoo_engine, [TOOL], max_tokens=48, template_tools=False)
    assert OWN_PROMPT in own.prompt_text(REQUEST)  # toolweave's prompt when asked for
    jump = caller.call(REQUEST, "jump")
    assert not jump.invalid and [c.name for c in jump.calls] == ["set_light"]
    TOOL.validate_call(jump.calls[0].arguments)
    assert caller.call(REQUEST, "constrained").tokens == jump.tokens
    lossless = caller.call(REQUEST, "lossless")
    assert_same_tokens(jump.tokens, lossless, (jump.text, lossless.text))
