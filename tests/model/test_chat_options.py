"""ChatToolweave's constructor and LangChain conventions, on the embedded model:
strict arguments, ``model_path``, engine settings, ``parallel_tool_calls``, the model
profile (read by ``create_agent`` and the summarization middleware), usage details."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import BaseModel

from toolweave.adapters.langchain.chat_model import PARALLEL_CALLS, ChatToolweave
from toolweave.adapters.langchain.request_plan import openai_tool
from toolweave.errors import ModelError
from toolweave.models import default_model_path
from toolweave.toolspec import ToolSpec

TWO_CITIES = "What's the weather in Paris and in Rome?"


@tool
def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    return f"12 degrees in {city}"


class Answer(BaseModel):
    """The answer to the user's question."""

    city: str


# ------------------------------------------------------------ 1, 2: arguments
@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"n_thread": 2}, ["'n_thread'", "did you mean 'n_threads'"]),
        ({"max_token": 8}, ["'max_token'", "did you mean 'max_tokens'"]),
        ({"num_ctx": 2048}, ["'num_ctx'", "did you mean 'n_ctx'"]),
        ({"api_key": "x"}, ["'api_key'", "hosted API"]),
        ({"zzzz": 1}, ["'zzzz'"]),
    ],
)
def test_unknown_argument_raises_naming_it_and_the_close_match(
    kwargs: dict[str, Any], words: list[str]
) -> None:
    with pytest.raises(TypeError) as err:
        ChatToolweave(**kwargs)
    message = str(err.value)
    assert "\n" not in message and all(w in message for w in words), message


def test_model_path_is_model_and_loads_that_file(tmp_path: Path) -> None:
    path = default_model_path()
    model = ChatToolweave(model_path=str(path), max_tokens=4)
    assert model.model == str(path) and model.model_path == path
    assert model.engine.model_path == path
    assert isinstance(model.invoke("Hi").content, str)
    # The same file by name and by path is one model; two files are an error.
    assert ChatToolweave(model="smollm2", model_path=str(path)).model == str(path)
    other = tmp_path / "other.gguf"
    with pytest.raises(TypeError, match="model_path"):
        ChatToolweave(model="smollm2", model_path=str(other))
    with pytest.raises(ModelError, match="not found"):
        ChatToolweave(model_path=str(other))  # a missing file fails at construction


# ------------------------------------------------------------ 3: engine settings
def test_n_ctx_n_batch_and_n_threads_reach_the_engine() -> None:
    model = ChatToolweave(n_ctx=1024, n_batch=64, n_threads=1, max_tokens=4)
    eng = model.engine
    assert (eng.n_ctx, eng.n_batch, eng.n_threads) == (1024, 64, 1)
    assert eng is not ChatToolweave(max_tokens=4).engine  # other settings, other engine
    msg = model.invoke("Say hello.")
    assert msg.usage_metadata is not None and msg.usage_metadata["output_tokens"] <= 4
    assert model.profile is not None and model.profile["max_input_tokens"] == 1024


#: ChatML, with every user turn marked so the rendered prompt shows which template ran.
MARKED_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['role'] == 'user' %}QUESTION: {% endif %}{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_chat_template_text_replaces_the_file_template_on_the_shared_engine() -> None:
    plain = ChatToolweave(max_tokens=4)
    marked = ChatToolweave(max_tokens=4, chat_template=MARKED_TEMPLATE)
    assert marked.engine is plain.engine  # a template is not a reason to load the model again
    request = [HumanMessage("What's the weather in Oslo?")]
    eng = marked.engine
    assert "QUESTION: What's" in eng.detokenize(marked._render(None, request))
    assert "QUESTION" not in eng.detokenize(plain._render(None, request))
    # Tool-call prompts too: the caller renders with the same template.
    caller = marked._caller([ToolSpec.from_dict(openai_tool(get_weather))], None, 1)
    assert "QUESTION: What's" in caller.prompt_text("What's the weather in Oslo?")
    assert isinstance(marked.invoke(request).content, str)
    with pytest.raises(ValueError, match="chat_template"):
        ChatToolweave(chat_template="  ")


# ------------------------------------------------------------ 4: parallel tool calls
def test_parallel_tool_calls_in_bind_tools_both_ways() -> None:
    model = ChatToolweave(max_tokens=64)
    several = model.bind_tools([get_weather], tool_choice="any", parallel_tool_calls=True)
    one = model.bind_tools([get_weather], tool_choice="any", parallel_tool_calls=False)
    default = model.bind_tools([get_weather], tool_choice="any")
    a, b, c = several.invoke(TWO_CITIES), one.invoke(TWO_CITIES), default.invoke(TWO_CITIES)
    assert [tc["args"]["city"] for tc in a.tool_calls] == ["Paris", "Rome"]
    assert [tc["args"] for tc in b.tool_calls] == [a.tool_calls[0]["args"]]
    assert len(c.tool_calls) == 1  # max_calls defaults to one call per message


def test_parallel_tool_calls_in_the_constructor() -> None:
    several = ChatToolweave(max_tokens=64, parallel_tool_calls=True)
    assert several.max_calls_for(None) == PARALLEL_CALLS
    msg = several.bind_tools([get_weather], tool_choice="any").invoke(TWO_CITIES)
    assert len(msg.tool_calls) == 2
    # bind_tools overrides the constructor for its binding.
    single = several.bind_tools([get_weather], tool_choice="any", parallel_tool_calls=False)
    assert len(single.invoke(TWO_CITIES).tool_calls) == 1
    # parallel_tool_calls=False wins over a max_calls above one.
    limited = ChatToolweave(max_tokens=64, max_calls=4)
    one = limited.bind_tools([get_weather], tool_choice="any", parallel_tool_calls=False)
    assert len(one.invoke(TWO_CITIES).tool_calls) == 1
    with pytest.raises(TypeError, match="disagree"):
        ChatToolweave(parallel_tool_calls=False, max_calls=3)


# ------------------------------------------------------------ 5: profile
def test_profile_describes_the_engine_and_create_agent_uses_provider_strategy() -> None:
    model = ChatToolweave(max_tokens=48)
    profile = model.profile
    assert profile is not None
    assert profile["max_input_tokens"] == model.n_ctx == model.engine.n_ctx
    assert profile["max_output_tokens"] == 48
    assert profile["tool_calling"] and profile["structured_output"]
    assert not profile["image_inputs"] and not profile["reasoning_output"]
    # structured_output=True: create_agent asks for the answer as JSON under the schema
    # (a provider strategy), not through an extra tool call and a ToolMessage.
    agent = create_agent(model, [], response_format=Answer)
    out = agent.invoke({"messages": [HumanMessage("Which city is the capital of France?")]})
    assert isinstance(out["structured_response"], Answer)
    assert not any(isinstance(m, ToolMessage) for m in out["messages"])
    assert not any(isinstance(m, AIMessage) and m.tool_calls for m in out["messages"])


def test_tools_with_a_structured_response_call_then_answer_in_json() -> None:
    model = ChatToolweave(max_tokens=48, auto_calls="user_turn")
    agent = create_agent(model, [get_weather], response_format=Answer)
    out = agent.invoke({"messages": [HumanMessage("What's the weather in Oslo?")]})
    calls = [c for m in out["messages"] if isinstance(m, AIMessage) for c in m.tool_calls]
    assert [c["name"] for c in calls] == ["get_weather"]
    assert isinstance(out["structured_response"], Answer)


def test_summarization_middleware_reads_max_input_tokens() -> None:
    model = ChatToolweave(max_tokens=16)
    # A fractional trigger needs the profile; 2% of 8,192 tokens is about 160.
    summarize = SummarizationMiddleware(
        model,
        trigger=("fraction", 0.02),
        keep=("messages", 1),
        summary_prompt="Summarize these notes in one line:\n{messages}",
    )
    history: list[Any] = []
    for i in range(6):
        history.append(HumanMessage(f"Note {i}: the meeting room {i} has {i + 3} chairs."))
        history.append(AIMessage(f"Noted: room {i} has {i + 3} chairs."))
    history.append(HumanMessage("How many chairs does room 2 have?"))
    agent = create_agent(model, [], middleware=[summarize])
    out = agent.invoke({"messages": history})
    first = out["messages"][0]
    assert isinstance(first, HumanMessage) and "summary" in str(first.content)
    assert len(out["messages"]) < len(history)


# ------------------------------------------------------------ 6: usage and metadata
def test_usage_reports_cached_prompt_tokens_and_provider() -> None:
    tools = [get_weather]
    warm = ChatToolweave(max_tokens=32).bind_tools(tools, tool_choice="any")
    warm.invoke("What's the weather in Zurich?")
    again = warm.invoke("What's the weather in Zurich?")
    usage = again.usage_metadata
    assert usage is not None
    cached = usage["input_token_details"]["cache_read"]  # type: ignore[typeddict-item]
    # The same prompt again: all but its last token come from the cached state.
    assert usage["input_tokens"] - 1 <= cached <= usage["input_tokens"]
    assert again.response_metadata["model_provider"] == "toolweave"
    assert again.response_metadata["model_name"]
    cold = ChatToolweave(max_tokens=32, reuse_prompt_cache=False).bind_tools(
        tools, tool_choice="any"
    )
    cold_usage = cold.invoke("What's the weather in Zurich?").usage_metadata
    assert cold_usage is not None
    assert cold_usage["input_token_details"] == {"cache_read": 0}
    chunks = list(warm.stream("What's the weather in Zurich?"))
    full = chunks[0]
    for c in chunks[1:]:
        full = full + c
    assert isinstance(full, AIMessageChunk) and full.usage_metadata is not None
    assert full.usage_metadata["input_token_details"]["cache_read"] >= cached - 1  # type: ignore[typeddict-item]
    assert full.response_metadata["model_provider"] == "toolweave"
    assert full.response_metadata["model_name"] == again.response_metadata["model_name"]


class Tokens(BaseCallbackHandler):
    def __init__(self) -> None:
        self.tokens: list[str] = []

    def on_llm_new_token(self, token: str, **kwargs: Any) -> None:
        self.tokens.append(token)


def test_streaming_true_streams_invoke_to_callbacks() -> None:
    seen = Tokens()
    model = ChatToolweave(max_tokens=8, streaming=True)
    msg = model.invoke("Say hello.", config={"callbacks": [seen]})
    assert len(seen.tokens) > 1 and "".join(seen.tokens) == msg.content
    quiet = Tokens()
    ChatToolweave(max_tokens=8).invoke("Say hello.", config={"callbacks": [quiet]})
    assert quiet.tokens == []
