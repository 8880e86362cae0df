"""The model zoo: other families' tokenizers and chat templates on the real engine.

Each zoo model is a 2-layer random-weight GGUF with a real family's vocabulary and chat
template (`toolweave.eval.zoo_spec`). Random weights write nonsense, but the call
grammar bounds it: every mode must end in one valid call of the tool with schema-valid
arguments, and the exact modes must agree token for token.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

import jsonschema
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from toolweave.eval.zoo_spec import ZOO_FAMILIES, ZooFamily
from toolweave.formats import SyntaxFormat, format_for_chat_template
from toolweave.formats.syntax import default_call_id
from toolweave.native.caller import ToolCaller, template_format
from toolweave.native.chat import chat_parts, chat_tokens, control_token_ids
from toolweave.native.engine import Engine
from toolweave.prompting.template_file import ChatTemplateError
from toolweave.results import CallResult
from toolweave.toolspec import ToolCall, ToolSpec

if TYPE_CHECKING:
    from toolweave.adapters.bench.zoo import Zoo, ZooModel

SCHEMA = {
    "type": "object",
    "properties": {
        "room": {"type": "string", "enum": ["kitchen", "bedroom", "hall"]},
        "level": {"type": "integer"},
        "label": {"type": "string", "maxLength": 12},
    },
    "required": ["room", "level"],
}
TOOLS = (
    ToolSpec.from_dict(
        {"name": "set_light", "description": "Set the light of a room.", "parameters": SCHEMA}
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
)
REQUEST = "Turn the kitchen light to 3, please."
MODES = ("constrained", "jump", "fast", "lossless")
IDS = [f.name for f in ZOO_FAMILIES]


class Loaded:
    """One zoo model on the engine, its caller, and each mode's result (decoded once)."""

    def __init__(self, model: ZooModel) -> None:
        self.model = model
        self.engine = Engine(model.path, n_ctx=2048, n_seq_max=8)  # Command R: 1,400 tokens
        # One tool: its name is forced, so every mode's call is checked against one schema.
        self.caller = ToolCaller(self.engine, TOOLS[:1], max_tokens=96)
        self.results: dict[str, CallResult] = {}

    def result(self, mode: str) -> CallResult:
        if mode not in self.results:
            self.results[mode] = self.caller.call(REQUEST, mode)
        return self.results[mode]


@pytest.fixture(scope="module", params=ZOO_FAMILIES, ids=IDS)
def loaded(request: pytest.FixtureRequest, zoo: Zoo) -> Iterator[Loaded]:
    family: ZooFamily = request.param
    item = Loaded(zoo.model(family.name))
    try:
        yield item
    finally:
        item.engine.close()


def test_zoo_model_loads_with_its_tokenizer(loaded: Loaded) -> None:
    eng, model = loaded.engine, loaded.model
    assert eng.n_vocab == model.n_vocab
    assert eng.model_name.startswith("toolweave zoo")
    text = "Set the kitchen light to 3"
    tokens = eng.tokenize(text)
    assert 0 < len(tokens) < len(text)  # a real tokenizer merges, not one token a byte
    assert eng.detokenize(tokens).removeprefix(" ") == text


def test_zoo_chat_template_renders_with_control_tokens(loaded: Loaded) -> None:
    eng, model = loaded.engine, loaded.model
    assert eng.chat_template == model.template  # the family's template is in the GGUF
    messages = loaded.caller.messages(REQUEST)
    rendered = chat_parts(eng, messages)
    assert REQUEST in rendered.text
    assert any(part.control for part in rendered.parts), "the template wrote no control token"
    tokens = chat_tokens(eng, messages)
    assert set(tokens) & control_token_ids(eng)  # the template's markers are single tokens
    assert eng.detokenize(tokens).count(REQUEST) == 1


#: The zoo families decoded in the syntax read off their template, and text every call
#: of theirs holds (their markers, their name and arguments keys).
OWN_SYNTAX = {
    "command-r": (
        "<|START_ACTION|>[\n    {",
        '{"tool_call_id":"0","tool_name":"set_light","parameters":{',
        "}}\n]<|END_ACTION|>",
    ),
    "mistral": ('[TOOL_CALLS][{"name":"set_light","arguments":{', '},"id":"call00000"}]'),
    "qwen35": (
        "<tool_call>\n<function=set_light>\n<parameter=room>\n",
        "\n</parameter>\n<parameter=level>\n",
        "\n</parameter>\n</function>\n</tool_call>",
    ),
    # Gemma 4's vocabulary writes <|tool_call>, <|"|> and <tool_call|> as special tokens.
    "gemma4": ('<|tool_call>call:set_light{room:<|"|>', "}<tool_call|><|tool_response>"),
}
#: Zoo families whose template syntax writes each argument apart (xml): `fast` and
#: `lossless` draft no values there and decode as `jump` does.
RAW_ARGUMENTS = ("qwen35", "gemma4")
CALL = ToolCall("set_light", {"room": "kitchen", "level": 3})


def _tojson(value: object, indent: int | None = None) -> str:
    """`tojson` as model makers render templates: keys kept in order, not HTML-escaped."""
    return json.dumps(value, ensure_ascii=False, indent=indent)


def _template_call_text(template: str) -> str:
    """What the template renders for an assistant turn holding `CALL` (OpenAI shape)."""
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
    )
    env.globals["raise_exception"] = lambda message: (_ for _ in ()).throw(ValueError(message))
    env.globals["strftime_now"] = lambda fmt: "26 Jul 2024"
    env.filters["tojson"] = _tojson
    tools = [{"type": "function", "function": TOOLS[0].to_dict()}]
    for arguments in (CALL.arguments, json.dumps(CALL.arguments)):
        turn = {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": default_call_id(0),  # a message's first call, as toolweave writes it
                    "type": "function",
                    "function": {"name": CALL.name, "arguments": arguments},
                }
            ],
        }
        messages = [{"role": "user", "content": REQUEST}, turn]
        text = env.from_string(template).render(
            messages=messages, tools=tools, bos_token="", eos_token="", add_generation_prompt=False
        )
        if CALL.name in text.replace(TOOLS[0].name + "(", ""):  # not only the tool listing
            return text
    return ""


@pytest.mark.parametrize("family", ZOO_FAMILIES, ids=IDS)
def test_zoo_template_gets_its_own_call_syntax(family: ZooFamily, zoo: Zoo) -> None:
    """The format toolweave's caller takes for the template writes a call as the
    template does (whitespace and argument order aside); a template rendering no call
    gets JSON."""
    template = zoo.model(family.name).template
    fmt = template_format(template)
    rendered = _template_call_text(template)
    if not rendered:
        assert fmt.name == "json", f"the template renders no call, yet {fmt.name} was picked"
        return
    # Argument order aside too: a template may sort keys, toolweave writes schema order.
    theirs = "".join(rendered.split())
    ours = [
        "".join(fmt.serialize([ToolCall(CALL.name, dict(order))]).split())
        for order in itertools.permutations(CALL.arguments.items())
    ]
    assert any(text in theirs for text in ours), f"{fmt.name} writes {ours[0]!r}"


@pytest.mark.parametrize("mode", MODES)
def test_zoo_mode_writes_one_valid_call(loaded: Loaded, mode: str) -> None:
    result = loaded.result(mode)
    assert result.finish_reason == "stop", result.text
    assert not result.invalid, result.invalid
    assert [c.name for c in result.calls] == ["set_light"], result.text
    jsonschema.validate(result.calls[0].arguments, SCHEMA)
    assert result.text.startswith(loaded.caller.fmt.serialize([result.calls[0]])[:12])


def test_zoo_caller_decodes_in_the_templates_own_syntax(loaded: Loaded) -> None:
    """Where the template's syntax is read and covered, every mode writes the call in it
    (its markers in the raw text) and the format parses it back; elsewhere the caller
    keeps the format picked by name."""
    name, caller = loaded.model.family.name, loaded.caller
    if name not in OWN_SYNTAX:
        assert caller.fmt is format_for_chat_template(loaded.engine.chat_template)
        return
    assert isinstance(caller.fmt, SyntaxFormat), caller.fmt
    # Only Gemma 4's vocabulary writes markers of its syntax as special tokens.
    assert ("<[" in caller.grammar) == (name == "gemma4"), caller.grammar
    for mode in MODES:
        result = loaded.result(mode)
        for marker in OWN_SYNTAX[name]:
            assert marker in result.text, (mode, result.text)
        assert caller.fmt.parse(result.text) == list(result.calls), (mode, result.text)


def test_zoo_raw_argument_syntax_drafts_no_values(loaded: Loaded) -> None:
    """Value drafts are JSON members: in a syntax writing each argument apart, `fast`
    and `lossless` decode values as `jump` does (no drafts on these engines, where
    forecasts are off and the request has no past), so they write `jump`'s tokens."""
    if loaded.model.family.name not in RAW_ARGUMENTS:
        pytest.skip("the caller's format writes its arguments as one JSON object")
    jump = loaded.result("jump")
    for mode in ("fast", "lossless"):
        result = loaded.result(mode)
        assert result.stats.drafted_tokens == 0, mode
        assert result.tokens == jump.tokens, mode


def test_zoo_exact_modes_agree_token_for_token(loaded: Loaded) -> None:
    jump = loaded.result("jump").tokens
    assert loaded.result("constrained").tokens == jump
    # The guarantee of `lossless`: also on the K-quant kernels of the Q4_K_M models.
    assert loaded.result("lossless").tokens == jump


def test_chat_template_override_on_engine_and_caller(zoo: Zoo) -> None:
    phi, qwen = zoo.model("phi3"), zoo.model("qwen2")
    with Engine(phi.path, n_ctx=512, n_seq_max=2, chat_template=qwen.template) as eng:
        assert eng.chat_template == qwen.template
        assert eng.gguf_chat_template == phi.template
        caller = ToolCaller(eng, TOOLS, max_tokens=48)
        assert caller.fmt.name == "hermes"  # picked from the override, not from the GGUF
        assert caller.prompt_text(REQUEST).startswith("<|im_start|>system")
        # The caller's own override wins over the engine's.
        own = ToolCaller(eng, TOOLS, max_tokens=48, chat_template=phi.template)
        assert own.fmt.name == "json"
        assert own.prompt_text(REQUEST).startswith("<|system|>")
        result = own.call(REQUEST, "jump")
        assert len(result.calls) == 1 and not result.invalid, result.text
    with pytest.raises(ChatTemplateError, match="empty"):
        Engine(phi.path, n_ctx=64, n_seq_max=1, chat_template=" ")
