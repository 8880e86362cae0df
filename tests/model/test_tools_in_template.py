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
from toolweave.prompting.chat_template import template_call_id, template_renders_tools
from toolweave.prompting.template_file import ChatTemplateError
from toolweave.toolspec import ToolSpec

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

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
#: Zoo families whose template lists tools and writes calls in the syntax decoded
#: (Mistral Nemo's and Command R7B's with the call id in each call).
LISTING = ("qwen2", "llama3", "qwen35", "gemma4", "mistral", "command-r")


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


HISTORY_RESULT = "The kitchen light is on."


def _history() -> list[BaseMessage]:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    call = {"name": "set_light", "args": {"room": "kitchen", "on": True}, "id": "call_7"}
    return [
        HumanMessage(REQUEST),
        AIMessage("", tool_calls=[call]),
        ToolMessage(HISTORY_RESULT, tool_call_id="call_7"),
        AIMessage("Done: the kitchen light is on."),  # Mistral's template wants an answer
        HumanMessage("And the hall light off."),
    ]


def test_a_conversation_reaches_the_template_as_tool_calls_and_results(
    zoo_engine: Engine,
) -> None:
    """A LangChain history on a tool-listing template: the earlier call is the
    assistant message's ``tool_calls`` (written by the template, in the syntax the
    caller decodes) and the result a ``tool`` message with its id and the tool's name."""
    from toolweave.adapters.langchain.messages import template_messages
    from toolweave.toolspec import ToolCall

    caller = ToolCaller(zoo_engine, [TOOL], max_tokens=48)
    assert caller.template_tools
    msgs = template_messages(_history(), caller.fmt, tool_calls=caller.template_tools)
    # The id as templates get it (nine letters and digits, Mistral's demand), the
    # same in the call and its result.
    cid = template_call_id("call_7")
    assert msgs[1]["tool_calls"][0]["id"] == cid and msgs[1]["content"] == ""
    assert msgs[2] == {
        "role": "tool",
        "tool_call_id": cid,
        "name": "set_light",
        "content": HISTORY_RESULT,
    }
    text = caller.prompt_text(msgs)
    # The template wrote the call in the syntax decoded: its opening and name, then the
    # values (how it writes a boolean and in what key order is the template's own affair:
    # Qwen3.5's writes `True`, Gemma 4's sorts the keys).
    written = caller.fmt.serialize([ToolCall("set_light", {"room": "kitchen", "on": True})])
    head = "".join(written[: written.index("set_light") + len("set_light")].split())
    flat = "".join(text.split())
    assert head in flat and "kitchen" in flat[flat.index(head) :], (head, text)
    assert HISTORY_RESULT in text and OWN_PROMPT not in text
    result = caller.call(msgs, "jump")
    assert not result.invalid and [c.name for c in result.calls] == ["set_light"]


def test_the_chat_model_answers_a_tool_conversation_on_the_templates_prompt(
    zoo_engine: Engine,
) -> None:
    from toolweave.adapters.langchain.chat_model import ChatToolweave
    from toolweave.prompting.chat_template import openai_tools

    chat = ChatToolweave(
        model=str(zoo_engine.model_path), n_ctx=2048, max_tokens=48, state_store=None
    )
    bound = chat.bind_tools(openai_tools([TOOL]), tool_choice="set_light")
    reply = bound.invoke(_history())
    assert [c["name"] for c in reply.tool_calls] == ["set_light"]
    TOOL.validate_call(reply.tool_calls[0]["args"])
    assert reply.usage_metadata is not None and reply.usage_metadata["input_tokens"] > 0
