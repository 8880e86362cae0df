"""`ToolCaller.prompt_tokens` keeps the latest prompt's tokens: they must always be the
tokens of the request asked for, on the real tokenizers and templates."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from toolweave.models import default_model_path, gemma_model_path
from toolweave.native.caller import ToolCaller
from toolweave.native.chat import chat_tokens
from toolweave.native.engine import Engine
from toolweave.toolspec import ToolSpec

MODELS: dict[str, Callable[[], Path]] = {"smollm2": default_model_path, "gemma3": gemma_model_path}

TOOL = ToolSpec.from_dict(
    {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
)


@pytest.fixture(scope="module", params=sorted(MODELS))
def eng(request: pytest.FixtureRequest) -> Iterator[Engine]:
    with Engine(MODELS[request.param](), n_ctx=64, n_seq_max=1) as engine:
        yield engine


def test_each_request_gets_its_own_tokens(eng: Engine) -> None:
    caller = ToolCaller(eng, [TOOL], max_tokens=8)
    history = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "It is sunny."},
        {"role": "user", "content": "And in Rome?"},
    ]
    # The same words with the keys in another order, and a one-word change.
    reordered = [{"content": m["content"], "role": m["role"]} for m in history]
    changed = [*history[:-1], {"role": "user", "content": "And in Oslo?"}]
    requests = ["Weather in Paris?", history, reordered, changed, history, "Weather in Paris?"]
    for request in requests:
        want = chat_tokens(
            eng, caller.messages(request), template=caller.chat_template, tools=caller.prompt_tools
        )
        got = caller.prompt_tokens(request)
        assert got == want
        got.append(0)  # the caller's copy: the kept tokens do not change
        assert caller.prompt_tokens(request) == want


def test_another_system_prompt_is_another_prompt(eng: Engine) -> None:
    a = ToolCaller(eng, [TOOL], max_tokens=8, system="Answer briefly.")
    b = ToolCaller(eng, [TOOL], max_tokens=8, system="Answer at length.")
    assert a.prompt_tokens("Weather in Paris?") != b.prompt_tokens("Weather in Paris?")
    assert eng.detokenize(a.prompt_tokens("Weather in Paris?")) == a.prompt_text(
        "Weather in Paris?"
    )
