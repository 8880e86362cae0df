"""Raw-text argument values (xml layouts) under the call grammar on a real tokenizer:
a value that runs up to its closing marker, long values and values that hold a prefix
of the marker stay within what llguidance's lexer can follow."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolweave.formats import SyntaxFormat
from toolweave.formats.detect import detect_call_format
from toolweave.grammar.call import call_grammar
from toolweave.native.constraints import TokenMatcher, vocabulary_for
from toolweave.native.engine import Engine
from toolweave.toolspec import ToolCall, ToolSpec

TEMPLATES = Path(__file__).parents[1] / "data" / "templates"
WEATHER = ToolSpec.from_dict(
    {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    }
)


def _accepts(engine: Engine, grammar: str, text: str) -> bool:
    matcher = TokenMatcher(vocabulary_for(engine), grammar)
    for token in engine.tokenize(text, parse_special=False):
        if not matcher.mask()[token]:
            return False
        matcher.consume(token)
    return matcher.stopped


@pytest.mark.parametrize("template", ["Qwen3.5-4B.jinja", "MiniMax-M2.jinja"])
@pytest.mark.parametrize(
    "city",
    [
        "Paris, France",  # failed: the lexer built too many states at `</parameter`
        "Paris </param> and <parameter",  # prefixes of the closing marker inside the text
        ("Paris is a big city. " * 9).strip(),  # 188 characters: a long value
    ],
)
def test_raw_values_up_to_the_marker_are_followed(engine: Engine, template: str, city: str) -> None:
    fmt = detect_call_format((TEMPLATES / template).read_text(encoding="utf-8"))
    assert isinstance(fmt, SyntaxFormat) and fmt.syntax.layout == "xml"
    fmt = fmt.with_tools([WEATHER])
    grammar = call_grammar(fmt, [WEATHER])
    call = fmt.serialize([ToolCall("get_weather", {"city": city, "days": 3})])
    assert _accepts(engine, grammar, call)
    assert fmt.parse(call)[0].arguments["city"] == city


def test_a_raw_value_is_still_bounded(engine: Engine) -> None:
    """The text before the marker cannot run on forever: about 200 tokens at most."""
    fmt = detect_call_format((TEMPLATES / "Qwen3.5-4B.jinja").read_text(encoding="utf-8"))
    assert isinstance(fmt, SyntaxFormat)
    fmt = fmt.with_tools([WEATHER])
    grammar = call_grammar(fmt, [WEATHER])
    long_call = fmt.serialize([ToolCall("get_weather", {"city": "Paris, " * 400})])
    assert not _accepts(engine, grammar, long_call)
