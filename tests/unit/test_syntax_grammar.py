"""The call grammar of syntaxes read off chat templates (layouts json, named-json, xml,
typed xml and python).

Checked with llguidance on a byte-level tokenizer (no model): a text is accepted when
every byte is allowed and the matcher accepts after the last one. The templates are
llama.cpp's (`tests/data/templates`, as in test_template_syntax.py).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import llguidance
import pytest

from toolweave.errors import CallFormatError, ConstraintError
from toolweave.formats import CallFormat, SyntaxFormat, format_for_chat_template, get_format
from toolweave.formats.detect import detect_call_format
from toolweave.formats.syntax import INDEX, CallSyntax
from toolweave.grammar.call import SYNTAX_LAYOUTS, call_grammar, syntax_grammar_gap
from toolweave.grammar.syntax_call import marker_text
from toolweave.toolspec import ToolCall, ToolSpec

TEMPLATES = Path(__file__).parents[1] / "data" / "templates"

TOOLS = (
    ToolSpec.from_dict(
        {
            "name": "set_light",
            "description": "Set the light of a room.",
            "parameters": {
                "type": "object",
                "properties": {
                    "room": {"type": "string", "enum": ["kitchen", "bedroom", "hall"]},
                    "level": {"type": "integer"},
                    "label": {"type": "string", "maxLength": 12},
                },
                "required": ["room", "level"],
            },
        }
    ),
    ToolSpec.from_dict(
        {
            "name": "get_time",
            "description": "The time in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 16}},
                "required": ["city"],
            },
        }
    ),
    ToolSpec.from_dict(
        {"name": "ping", "description": "No arguments.", "parameters": {"type": "object"}}
    ),
)
CALLS = (
    ToolCall("set_light", {"room": "kitchen", "level": 3}),
    ToolCall("set_light", {"room": "hall", "level": -12, "label": 'Zürich "x"'}),
    ToolCall("get_time", {"city": "Paris"}),
    ToolCall("ping", {}),
)

#: One template per family whose syntax now has a call grammar, and its layout.
SUPPORTED = {
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": "json",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": "json",
    "Cohere2MoE.jinja": "json",
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja": "json",
    "llama-cpp-microsoft-Phi-4-mini-instruct.jinja": "json",
    "llama-cpp-ibm-granite-granite-3.3-2B-Instruct.jinja": "json",
    "llama-cpp-lfm2.jinja": "json",
    "NVIDIA-Nemotron-Nano-v2.jinja": "json",
    "Apriel-1.6-15b-Thinker-fixed.jinja": "json",
    "Apertus-8B-Instruct.jinja": "json",
    "GigaChat3.1-10B-A1.8B.jinja": "json",
    "mistralai-Ministral-3-14B-Reasoning-2512.jinja": "named-json",
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": "named-json",
    "moonshotai-Kimi-K2.jinja": "named-json",
    "upstage-Solar-Open-100B.jinja": "named-json",
    "deepseek-ai-DeepSeek-V3.1.jinja": "named-json",
    "llama-cpp-deepseek-r1.jinja": "named-json",
    "meetkai-functionary-medium-v3.1.jinja": "named-json",
    "meetkai-functionary-medium-v3.2.jinja": "named-json",
    "openai-gpt-oss-120b.jinja": "named-json",
    "Qwen3.5-4B.jinja": "xml",
    "Qwen3-Coder.jinja": "xml",
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja": "xml",
    "ByteDance-Seed-OSS.jinja": "xml",
    "StepFun3.5-Flash.jinja": "xml",
    "GLM-4.6.jinja": "xml",
    "GLM-4.7-Flash.jinja": "xml",
    "poolside-Laguna-XS-2.1.jinja": "xml",
    "MiniMax-M2.jinja": "xml",
    "openbmb-MiniCPM5-1B.jinja": "xml",
    "tencent-Hy3.jinja": "xml",
    "google-gemma-4-31B-it.jinja": "xml",
    "deepseek-ai-DeepSeek-V3.2.jinja": "xml",
    "deepseek-ai-DeepSeek-V4.jinja": "xml",
    "LFM2.5-8B-A1B.jinja": "python",
}
#: The typed xml syntaxes among them (string values marked apart from the others).
TYPED = (
    "google-gemma-4-31B-it.jinja",
    "deepseek-ai-DeepSeek-V3.2.jinja",
    "deepseek-ai-DeepSeek-V4.jinja",
)

#: Syntaxes writing each call by its position: its id in the call object or in a marker.
POSITIONAL = {
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": ',"id":"call00001"}',
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": '{"tool_call_id":"1",',
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": "[CALL_ID]call00001[ARGS]",
    "moonshotai-Kimi-K2.jinja": ":1<|tool_call_argument_begin|>",
    "upstage-Solar-Open-100B.jinja": "<|tool_call:begin|>call00001<|tool_call:name|>",
}


def template(name: str) -> str:
    return (TEMPLATES / name).read_text(encoding="utf-8")


def _tokenizer() -> llguidance.LLTokenizer:
    class Bytes:
        def __init__(self) -> None:
            self.eos_token_id = 256
            self.bos_token_id = None
            self.tokens = [bytes([i]) for i in range(256)] + [b"<eos>"]
            self.special_token_ids = [256]

        def __call__(self, text: bytes) -> list[int]:
            return list(text)

    return llguidance.LLTokenizer(llguidance.TokenizerWrapper(Bytes()))


TOKENIZER = _tokenizer()


def accepts(grammar: str, text: str) -> bool:
    matcher = llguidance.LLMatcher(TOKENIZER, grammar, log_level=0)
    assert not matcher.is_error(), matcher.get_error()
    data = list(text.encode("utf-8"))
    if matcher.validate_tokens(data) < len(data):
        return False
    matcher.consume_tokens(data)
    return bool(matcher.is_accepting())


def syntax_format(name: str) -> SyntaxFormat:
    """The template's syntax, reading xml values by the test tools' schemas (as the
    caller does)."""
    fmt = detect_call_format(template(name))
    assert isinstance(fmt, SyntaxFormat), fmt
    return fmt.with_tools(TOOLS)


def _loose(fmt: SyntaxFormat, good: str) -> str:
    """`good` (a call of set_light with level 3) with a space before the level's value."""
    s = fmt.syntax
    if s.layout == "python":
        loose = good.replace("level=3", "level= 3")
    elif s.layout == "xml":
        opening = "level" + s.key_close + (s.other_open if s.typed else "")
        loose = good.replace(opening + "3", opening + " 3")
    else:
        loose = good.replace('"level":3', '"level": 3')
    assert loose != good
    return loose


@pytest.mark.parametrize(("name", "layout"), sorted(SUPPORTED.items()))
def test_grammar_accepts_the_formats_own_calls(name: str, layout: str) -> None:
    fmt = syntax_format(name)
    assert fmt.syntax.layout == layout and layout in SYNTAX_LAYOUTS
    assert syntax_grammar_gap(fmt.syntax) is None
    grammar = call_grammar(fmt, TOOLS, max_calls=3)
    for call in CALLS:
        text = fmt.serialize([call])
        assert accepts(grammar, text), text
        assert fmt.parse(text) == [call]
    if fmt.syntax.multiple:
        text = fmt.serialize(CALLS[:3])
        assert accepts(grammar, text), text
        assert fmt.parse(text) == list(CALLS[:3])
        assert not accepts(grammar, fmt.serialize(CALLS)), "four calls, max_calls=3"
        one = call_grammar(fmt, TOOLS, max_calls=1)
        assert not accepts(one, fmt.serialize(CALLS[:2]))
        assert accepts(call_grammar(fmt, TOOLS, max_calls=None), fmt.serialize(CALLS * 2))


@pytest.mark.parametrize("name", sorted(SUPPORTED))
def test_grammar_keeps_to_the_canonical_call(name: str) -> None:
    fmt = syntax_format(name)
    grammar = call_grammar(fmt, TOOLS[:2], max_calls=2)
    good = fmt.serialize([CALLS[0]])
    assert accepts(grammar, good)
    # Another tool, arguments out of schema order, an unknown argument, a bad enum
    # value, a missing required one, loose whitespace, no call at all.
    bad = [
        fmt.serialize([ToolCall("set_lamp", {"room": "kitchen", "level": 3})]),
        fmt.serialize([ToolCall("set_light", {"level": 3, "room": "kitchen"})]),
        fmt.serialize([ToolCall("set_light", {"room": "kitchen", "level": 3, "x": 1})]),
        fmt.serialize([ToolCall("set_light", {"room": "garage", "level": 3})]),
        fmt.serialize([ToolCall("set_light", {"room": "kitchen"})]),
        fmt.serialize([ToolCall("set_light", {"room": "kitchen", "level": "three"})]),
        _loose(fmt, good),
        fmt.serialize([]),
    ]
    for text in bad:
        assert not accepts(grammar, text), text


def test_grammar_bounds_strings() -> None:
    fmt = syntax_format("mistralai-Ministral-3-14B-Reasoning-2512.jinja")
    grammar = call_grammar(fmt, TOOLS[1:2])
    assert accepts(grammar, fmt.serialize([ToolCall("get_time", {"city": "x" * 16})]))
    assert not accepts(grammar, fmt.serialize([ToolCall("get_time", {"city": "x" * 17})]))


def test_one_call_syntax_grammar_holds_one_call() -> None:
    fmt = syntax_format("openai-gpt-oss-120b.jinja")
    assert not fmt.syntax.multiple
    grammar = call_grammar(fmt, TOOLS, max_calls=None)
    assert accepts(grammar, fmt.serialize([CALLS[0]]))
    assert "call (" not in grammar.splitlines()[0]


@pytest.mark.parametrize(("name", "second"), sorted(POSITIONAL.items()))
def test_each_call_is_written_with_its_own_position(name: str, second: str) -> None:
    """The second call carries index 1 (or id ``call00001``): the grammar holds a rule
    per position, so a second call written with the first one's id is refused."""
    fmt = syntax_format(name)
    assert fmt.syntax.positional
    grammar = call_grammar(fmt, TOOLS, max_calls=3)
    text = fmt.serialize(CALLS[:2])
    assert second in text and accepts(grammar, text), text
    first = fmt.serialize(CALLS[:1])
    wrong = text.replace(second, second.replace("1", "0"))
    assert wrong != text and not accepts(grammar, wrong), wrong
    assert accepts(grammar, first)


def test_response_markers_holding_an_index_are_refused_saying_why() -> None:
    fmt = SyntaxFormat(CallSyntax("json", call_open="<call>", separator=f"<sep {INDEX}>"))
    with pytest.raises(ConstraintError, match="index or id"):
        call_grammar(fmt, TOOLS)
    xml = CallSyntax(
        "xml", call_open=f"<call {INDEX}>", key_open="<k=", key_close=">", value_close="</k>"
    )
    with pytest.raises(ConstraintError, match="xml layout"):
        call_grammar(SyntaxFormat(xml), TOOLS)


def test_arguments_as_a_string_are_refused() -> None:
    fmt = SyntaxFormat(CallSyntax("json", arguments_as_string=True))
    with pytest.raises(ConstraintError, match="string"):
        call_grammar(fmt, TOOLS)
    with pytest.raises(ConstraintError, match="max_calls"):
        call_grammar(syntax_format("llama-cpp-lfm2.jinja"), TOOLS, max_calls=0)


def test_builtin_formats_keep_their_grammar() -> None:
    """The named formats still take the named path: a SyntaxFormat of the same syntax
    gives a grammar of the same calls (its text differs: one open for the reply)."""
    hermes = get_format("hermes")
    assert call_grammar(hermes, TOOLS).startswith('start: call\ncall: "<tool_call>" body')
    with pytest.raises(ConstraintError, match="pycall"):
        call_grammar(get_format("pycall"), TOOLS)


def _template_format(text: str | None) -> CallFormat:
    from toolweave.native.caller import template_format

    return template_format(text)


@pytest.mark.parametrize("path", sorted(TEMPLATES.glob("*.jinja")), ids=lambda p: p.name)
def test_caller_format_for_each_template(path: Path) -> None:
    """A supported detected syntax is decoded in; any other template keeps the format
    picked by name, exactly as before."""
    text = path.read_text(encoding="utf-8")
    fmt = _template_format(text)
    picked = format_for_chat_template(text)
    try:
        detected: CallFormat | None = detect_call_format(text)
    except CallFormatError:
        detected = None
    if isinstance(detected, SyntaxFormat) and syntax_grammar_gap(detected.syntax) is None:
        assert isinstance(fmt, SyntaxFormat) and fmt.syntax == detected.syntax
        call_grammar(fmt, TOOLS)
    else:
        assert fmt is picked
    if path.name in SUPPORTED:
        assert isinstance(fmt, SyntaxFormat)


def test_caller_format_without_tool_syntax_is_unchanged() -> None:
    chatml = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    assert _template_format(chatml) is get_format("hermes")  # SmolLM2's kind of template
    assert _template_format(None) is get_format("json")
    assert _template_format(template("google-gemma-2-2b-it.jinja")) is get_format("json")


#: One template per argument layout with raw values: plain xml, typed xml, python.
RAW = ("Qwen3.5-4B.jinja", "GLM-4.6.jinja", "google-gemma-4-31B-it.jinja", "LFM2.5-8B-A1B.jinja")


@pytest.mark.parametrize("name", RAW)
def test_raw_values_are_bounded_and_typed(name: str) -> None:
    """A string value is raw text of at most maxLength characters (any character, a
    newline too, in xml), another value JSON (a Python literal in python)."""
    fmt = syntax_format(name)
    grammar = call_grammar(fmt, TOOLS[:2])
    for city in ("x" * 16, "", "São Paulo", "a\nb" if fmt.syntax.layout == "xml" else "a b"):
        text = fmt.serialize([ToolCall("get_time", {"city": city})])
        assert accepts(grammar, text), text
        assert fmt.parse(text) == [ToolCall("get_time", {"city": city})]
    assert not accepts(grammar, fmt.serialize([ToolCall("get_time", {"city": "x" * 17})]))
    # An integer written as text; where strings are marked (typed xml, python), also an
    # integer written as a string and a string written as a number. (Plain xml writes
    # both as the same text as the right value: there they are that value.)
    wrong = [ToolCall("set_light", {"room": "hall", "level": "three"})]
    if fmt.syntax.layout == "python" or fmt.syntax.typed:
        wrong += [
            ToolCall("set_light", {"room": "hall", "level": "3"}),
            ToolCall("get_time", {"city": 3}),
        ]
    for call in wrong:
        assert not accepts(grammar, fmt.serialize([call])), call


@pytest.mark.parametrize("name", [n for n in RAW if n != "LFM2.5-8B-A1B.jinja"])
def test_raw_string_cannot_hold_its_closing_marker(name: str) -> None:
    """The parser ends a raw string at the first marker closing it (with any whitespace
    around it): the grammar keeps the marker out of the text, so what is written is what
    is read back."""
    fmt = syntax_format(name)
    s = fmt.syntax
    close = (s.string_close or s.value_close) if s.typed else s.value_close
    grammar = call_grammar(fmt, TOOLS[1:2])
    for city in (f"a{close.strip()}b", f"{close.strip()}", f"a {close.strip()}"):
        text = fmt.serialize([ToolCall("get_time", {"city": city})])
        assert not accepts(grammar, text), text
        with contextlib.suppress(CallFormatError):  # why it must not be: read otherwise
            assert fmt.parse(text) != [ToolCall("get_time", {"city": city})]
    # A prefix of the marker is text like any other.
    half = close.strip()[:-1]
    text = fmt.serialize([ToolCall("get_time", {"city": half})])
    assert accepts(grammar, text) and fmt.parse(text) == [ToolCall("get_time", {"city": half})]


def test_raw_enum_values_are_the_members_text() -> None:
    fmt = syntax_format("Qwen3.5-4B.jinja")
    grammar = call_grammar(fmt, TOOLS[:1])
    good = fmt.serialize([ToolCall("set_light", {"room": "bedroom", "level": 0})])
    assert "\nbedroom\n" in good and accepts(grammar, good)
    assert not accepts(grammar, good.replace("bedroom", '"bedroom"'))
    assert not accepts(grammar, good.replace("bedroom", "bedroo"))


def test_typed_xml_marks_strings_only() -> None:
    fmt = syntax_format("google-gemma-4-31B-it.jinja")
    grammar = call_grammar(fmt, TOOLS[:1])
    good = fmt.serialize([ToolCall("set_light", {"room": "hall", "level": 3, "label": "a,b}"})])
    assert good == (
        '<|tool_call>call:set_light{room:<|"|>hall<|"|>,level:3,label:<|"|>a,b}<|"|>}'
        "<tool_call|><|tool_response>"
    )
    assert accepts(grammar, good)
    assert not accepts(grammar, good.replace('<|"|>hall<|"|>', "hall"))
    assert not accepts(grammar, good.replace("level:3", 'level:<|"|>3<|"|>'))


def test_raw_string_with_a_pattern_is_refused() -> None:
    spec = ToolSpec.from_dict(
        {
            "name": "lookup",
            "parameters": {
                "type": "object",
                "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
                "required": ["code"],
            },
        }
    )
    with pytest.raises(ConstraintError, match="pattern"):
        call_grammar(syntax_format("Qwen3.5-4B.jinja"), [spec])
    call_grammar(syntax_format("mistralai-Ministral-3-14B-Reasoning-2512.jinja"), [spec])


def test_markers_holding_special_tokens_match_the_tokens() -> None:
    """Where a vocabulary writes a marker as a special token, the grammar asks for the
    token (``<[id]>``) there: in the reply's markers, the call's head and tail and the
    markers of values, raw strings included (the text then ends before the token)."""
    assert marker_text("<|tool_call>call:f{", {"<|tool_call>": 48}) == '<[48]> "call:f{"'
    assert marker_text('a<|"|>b<|"|>', {'<|"|>': 52, "<|": 7}) == '"a" <[52]> "b" <[52]>'
    assert marker_text("plain", {}) == '"plain"' and marker_text("", {"x": 1}) == ""
    fmt = syntax_format("google-gemma-4-31B-it.jinja")
    special = {"<|tool_call>": 48, "<tool_call|>": 49, '<|"|>': 52}
    grammar = call_grammar(fmt, TOOLS, special_tokens=special)
    assert "<[48]>" in grammar and "<[49]>" in grammar and "<[52]>" in grammar
    for name in special:  # no marker left as text
        assert name not in grammar.replace("\\", ""), name
    assert call_grammar(fmt, TOOLS) == call_grammar(fmt, TOOLS, special_tokens={})


def test_json_values_in_plain_xml_cannot_hold_the_closing_marker() -> None:
    """Plain xml ends a value's text at the first ``</parameter>``: a string inside a
    JSON value must not hold it (JSON can write it escaped, ``<\\/parameter>``)."""
    spec = ToolSpec.from_dict(
        {
            "name": "tag",
            "parameters": {
                "type": "object",
                "properties": {"names": {"type": "array", "items": {"type": "string"}}},
                "required": ["names"],
            },
        }
    )
    fmt = syntax_format("Qwen3.5-4B.jinja").with_tools([spec])
    grammar = call_grammar(fmt, [spec])
    good = fmt.serialize([ToolCall("tag", {"names": ["a", "b"]})])
    assert accepts(grammar, good) and fmt.parse(good) == [ToolCall("tag", {"names": ["a", "b"]})]
    cut = fmt.serialize([ToolCall("tag", {"names": ["a</parameter>b"]})])
    assert not accepts(grammar, cut)
    escaped = cut.replace("</parameter>b", "<\\/parameter>b")
    assert accepts(grammar, escaped)
    assert fmt.parse(escaped) == [ToolCall("tag", {"names": ["a</parameter>b"]})]


def test_python_layout_needs_python_names() -> None:
    """LFM2.5's calls are Python calls: a tool or argument name that is no Python name
    could be written but not read back, so the grammar refuses it."""
    fmt = syntax_format("LFM2.5-8B-A1B.jinja")
    dashed = ToolSpec.from_dict({"name": "set-light", "parameters": {"type": "object"}})
    with pytest.raises(ConstraintError, match="Python name"):
        call_grammar(fmt, [dashed])
    key = ToolSpec.from_dict(
        {
            "name": "lights.set",
            "parameters": {"type": "object", "properties": {"the-room": {"type": "string"}}},
        }
    )
    with pytest.raises(ConstraintError, match="Python name"):
        call_grammar(fmt, [key])
    dotted = ToolSpec.from_dict({"name": "lights.off", "parameters": {"type": "object"}})
    grammar = call_grammar(fmt, [dotted])
    assert accepts(grammar, fmt.serialize([ToolCall("lights.off", {})]))
