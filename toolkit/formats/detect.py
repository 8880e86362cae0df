"""Read a model's tool-call syntax off its chat template.

The template renders the same short conversation three times: the assistant answers
with no call, with one call and with two calls (fixed names and arguments). What the
calls add to the text is the call syntax: where the name and the arguments are and how
they are written gives the layout (`toolweave.formats.syntax`); the text before, between
and after the calls gives the markers. A template that writes no calls, or writes them
in a way none of the layouts covers, is refused with a `CallFormatError` that says what
was not understood.

detect_call_syntax(qwen3_template).layout -> 'json'
detect_call_syntax(qwen35_template).key_open -> '\\n<parameter='
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from toolweave.errors import CallFormatError
from toolweave.formats.base import CallFormat
from toolweave.formats.syntax import (
    CALL_ID,
    INDEX,
    CallSyntax,
    Layout,
    SyntaxFormat,
    default_call_id,
)
from toolweave.toolspec import ToolCall, ToolSpec

__all__ = [
    "PROBE_CALLS",
    "PROBE_TOOLS",
    "added_text",
    "detect_call_format",
    "detect_call_syntax",
    "syntax_family",
]

#: The calls rendered through a template to read its syntax.
PROBE_CALLS: tuple[ToolCall, ToolCall] = (
    ToolCall("get_weather", {"city": "Paris", "days": 3}),
    ToolCall("get_time", {"zone": "UTC"}),
)

PROBE_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec.from_dict(
        {
            "name": "get_weather",
            "description": "Weather forecast for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name."},
                    "days": {"type": "integer", "description": "Days ahead."},
                },
                "required": ["city"],
            },
        }
    ),
    ToolSpec.from_dict(
        {
            "name": "get_time",
            "description": "Current time in a time zone.",
            "parameters": {
                "type": "object",
                "properties": {"zone": {"type": "string", "description": "Time zone."}},
                "required": ["zone"],
            },
        }
    ),
)

_QUESTION = "What is the weather in Paris?"
#: Lenient JSON: the call ids stand in rendered text as a control character.
_DECODER = json.JSONDecoder(strict=False)
_TAG_START = "<[{"
_TAGS = re.compile(r"<[^<>\s]{1,40}>")
_TAG_END = ">]}`"
#: Longest error text quoted from a template.
_MAX_REASON = 160


@dataclass
class _Core:
    """Where one call's name and arguments sit in the rendered text."""

    start: int
    end: int
    layout: Layout
    fields: dict[str, Any] = field(default_factory=dict)


@functools.lru_cache(maxsize=16)
def detect_call_syntax(template: str) -> CallSyntax:
    """The tool-call syntax `template` renders; `CallFormatError` says why not.

    Detection renders the template a few times (tens of milliseconds); a model has one
    template, so the last few results are kept."""
    reasons: list[str] = []
    for as_string in (False, True):
        for content in ("", None):
            try:
                return _detect(template, as_string, content)
            except CallFormatError as exc:
                if str(exc) not in reasons:
                    reasons.append(str(exc))
        # Arguments as a JSON string only for a template that cannot take a dict.
        if not all("failed to render" in r or "as a string" in r for r in reasons):
            break
    raise CallFormatError(_best_reason(reasons))


def detect_call_format(template: str) -> CallFormat:
    """The `CallFormat` of `template`'s call syntax (`detect_call_syntax`): the
    built-in format of the same syntax where there is one (``hermes``, ``llama3``),
    else a `SyntaxFormat` named after its family."""
    syntax = detect_call_syntax(template)
    family = syntax_family(syntax)
    if family in ("hermes", "llama3"):
        from toolweave.formats import get_format

        return get_format(family)
    return SyntaxFormat(syntax, name=family)


def syntax_family(syntax: CallSyntax) -> str:
    """A short name for a syntax: ``hermes`` and ``llama3`` where it is theirs, else
    the layout with its distinctive marker (``xml <parameter=``, ``named-json [ARGS]``)."""
    s = syntax
    if s.layout == "json" and s.name_key == "name" and not s.arguments_as_string:
        if (
            s.arguments_key == "arguments"
            and s.call_open.strip() == "<tool_call>"
            and s.call_close.strip() == "</tool_call>"
            and not (s.open + s.close).strip()
        ):
            return "hermes"
        if s.arguments_key == "parameters" and not (s.open + s.close + s.call_open).strip():
            return "llama3"
    if s.layout == "json":
        return "json"
    if s.layout == "named-json":
        return f"named-json {s.name_close.strip()}".rstrip()
    if s.layout == "xml" and s.typed:
        return f"typed-xml {s.key_open.strip() or s.string_open.strip()}"
    if s.layout == "xml":
        return f"xml {s.key_open.strip()}"
    return "python"


# ---------------------------------------------------------------------- rendering
def _detect(template: str, as_string: bool, content: str | None) -> CallSyntax:
    one = _render(template, PROBE_CALLS[:1], as_string, content)
    try:
        none = _render(template, [], as_string, content)
    except CallFormatError:  # a template that refuses an empty answer
        none = _render(template, [], as_string, " ")
    try:
        prompt = _render(template, None, as_string, content)
    except CallFormatError:
        prompt = ""
    t1 = _after_prompt(_added(none, one), prompt)
    if PROBE_CALLS[0].name not in t1:
        raise CallFormatError("the template renders no tool calls")
    core1 = _find_core(t1, PROBE_CALLS[0], 0)
    if core1.fields.get("arguments_as_string") and not as_string:
        raise CallFormatError("the template writes the arguments as a string")
    try:
        two = _render(template, PROBE_CALLS, as_string, content)
    except CallFormatError:
        two = ""
    t2 = _after_prompt(_added(none, two), prompt) if two else ""
    turn_end = _turn_end(template, content)
    t1, t2 = _drop_end(t1, turn_end), _drop_end(t2, turn_end)
    second = t2.find(PROBE_CALLS[1].name)
    if second < 0:
        return _build(core1, t1[: core1.start], t1[core1.end :], None, as_string)
    a = _find_core(t2, PROBE_CALLS[0], 0)
    b = _find_core(t2, PROBE_CALLS[1], a.end, known=core1.fields)
    if b.layout != a.layout:
        raise CallFormatError("the template writes its first and second call differently")
    prefix, between, suffix = t2[: a.start], t2[a.end : b.start], t2[b.end :]
    if prefix != t1[: core1.start] or suffix != t1[core1.end :]:
        raise CallFormatError("the template writes one call and two calls differently")
    fields = _unify(a.fields, b.fields)
    return _build(replace(a, fields=fields), prefix, suffix, between, as_string)


def _render(
    template: str, calls: Sequence[ToolCall] | None, as_string: bool, content: str | None
) -> str:
    """The probe conversation: the question, then an answer with ``calls`` (with None,
    no answer but the generation prompt)."""
    from toolweave.prompting.chat_template import assistant_calls_message

    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message = assistant_calls_message(calls, arguments_as_string=as_string)
        message["content"] = content
    messages = [{"role": "user", "content": _QUESTION}]
    if calls is not None:
        messages.append(message)
    try:
        text = _probe_render(template, messages, add_generation_prompt=calls is None)
    except Exception as exc:  # a template is arbitrary code: any failure is a refusal
        message_text = " ".join(str(exc).split())[:_MAX_REASON]
        raise CallFormatError(
            f"the template failed to render calls: {type(exc).__name__}: {message_text}"
        ) from None
    for i in range(len(PROBE_CALLS)):
        text = text.replace(default_call_id(i), CALL_ID)
    return text


def _probe_render(
    template: str, messages: list[dict[str, Any]], *, add_generation_prompt: bool
) -> str:
    """`messages` rendered as every probe renders them: with the probe tools and
    placeholder BOS/EOS text. Raises whatever the template raises."""
    from toolweave.prompting.chat_template import render_chat

    return render_chat(
        template,
        messages,
        tools=PROBE_TOOLS,
        bos_token="<s>",
        eos_token="</s>",
        add_generation_prompt=add_generation_prompt,
    )


def _added(before: str, after: str) -> str:
    """What `after` adds to `before`: the middle left by their common prefix and
    suffix, widened so that it does not cut a tag in two."""
    limit = min(len(before), len(after))
    i = 0
    while i < limit and before[i] == after[i]:
        i += 1
    for start, end in (("<", ">"), ("[", "]")):
        head = after[:i]
        if head.rfind(start) > head.rfind(end):
            i = head.rfind(start)
    j = 0
    while j < limit - i and before[-1 - j] == after[-1 - j]:
        j += 1
    for start, end in (("<", ">"), ("[", "]")):
        tail = after[len(after) - j :]
        close = tail.find(end)
        opened = tail.find(start)
        if close >= 0 and (opened < 0 or close < opened):
            j = len(tail) - close - 1
    return after[i : len(after) - j].strip()


def _after_prompt(added: str, prompt: str) -> str:
    """`added` without a head the generation prompt already wrote (the assistant
    header of a template that writes it only for messages with calls)."""
    at = prompt.rfind(_QUESTION)
    tail = prompt[at + len(_QUESTION) :] if at >= 0 else prompt[-len(added) :]
    for k in range(len(added), 0, -1):
        head = added[:k]
        if not (head[-1] in _TAG_END + "\n" and head.strip()):
            continue
        at = tail.rfind(head.rstrip())
        if at >= 0 and not _TAGS.sub("", tail[at + len(head.rstrip()) :]).strip():
            return added[k:].strip()
    return added


def _turn_end(template: str, content: str | None) -> str:
    """The tag that ends a plain assistant answer (``<|im_end|>``, ``<seed:eos>``)."""
    answer = "Sunny all week."
    messages = [
        {"role": "user", "content": _QUESTION},
        {"role": "assistant", "content": answer},
    ]
    try:
        text = _probe_render(template, messages, add_generation_prompt=False)
    except Exception:  # the calls rendered; a plain answer failing only loses the trim
        return ""
    found = _TAGS.match(text[text.rfind(answer) + len(answer) :].lstrip())
    return found.group() if found else ""


def _drop_end(text: str, turn_end: str) -> str:
    """`text` without the end of the turn the template writes after any answer."""
    if turn_end and text.endswith(turn_end):
        return text[: -len(turn_end)].rstrip()
    return text


def added_text(before: str, after: str) -> str:
    """What `after` adds to `before` (`before` a prefix or a variant of it), widened so
    that it starts and ends on whole tags and stripped: e.g. an assistant's reply out of
    a rendered conversation and its prompt."""
    return _added(before, after)


# ---------------------------------------------------------------------- cores
def _find_core(
    text: str, call: ToolCall, pos: int, known: Mapping[str, Any] | None = None
) -> _Core:
    args = dict(call.arguments)
    found = _json_core(text, call, pos)
    if found is not None:
        return found
    start = text.find(call.name, pos)
    if start < 0:
        raise CallFormatError(f"the call of {call.name!r} is missing from the rendered text")
    spans = _json_spans(text, args, start)
    if spans:
        a_start, a_end = spans[0]
        name_end = start + len(call.name)
        return _Core(start, a_end, "named-json", {"name_close": text[name_end:a_start]})
    python = _python_core(text, call, start)
    if python is not None:
        return python
    return _xml_core(text, call, start, known)


def _json_spans(text: str, value: Any, pos: int) -> list[tuple[int, int]]:
    spans = []
    i = text.find("{", pos)
    while i >= 0:
        decoded, end = _decode(text, i)
        if decoded == value:
            spans.append((i, end))
        i = text.find("{", i + 1)
    return spans


def _json_core(text: str, call: ToolCall, pos: int) -> _Core | None:
    args = dict(call.arguments)
    best: _Core | None = None
    i = text.find("{", pos)
    while i >= 0:
        value, end = _decode(text, i)
        if isinstance(value, dict):
            fields = _json_fields(value, call.name, args)
            if fields is not None and (best is None or i < best.start):
                best = _Core(i, end, "json", fields)
                break
        i = text.find("{", i + 1)
    return best


def _decode(text: str, pos: int) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, pos)
    except (ValueError, RecursionError):
        return None, pos


def _json_fields(value: Mapping[str, Any], name: str, args: Any) -> dict[str, Any] | None:
    if len(value) == 1 and value.get(name) == args:
        return {"name_key": None, "arguments_key": "arguments"}
    name_key = next((k for k, v in value.items() if v == name), None)
    if name_key is None:
        return None
    for key, item in value.items():
        if item == args:
            return {"name_key": name_key, "arguments_key": key, **_id_fields(value, name_key, key)}
        if isinstance(item, str) and item.strip().startswith("{"):
            try:
                if json.loads(item) == args:
                    fields = {"name_key": name_key, "arguments_key": key}
                    return {**fields, "arguments_as_string": True}
            except ValueError:
                continue
    return None


def _id_fields(value: Mapping[str, Any], name_key: str, arguments_key: str) -> dict[str, Any]:
    """The call-id fields of a call object: the key whose value is the call's id (the
    probe's id, or its index as text), first or last in the object. Other keys are left
    alone, as before."""
    keys = list(value)
    found = [
        k
        for k in keys
        if k not in (name_key, arguments_key)
        and isinstance(value[k], str)
        and (CALL_ID in value[k] or value[k].isdigit())
    ]
    if not found:
        return {}
    if len(found) > 1:
        raise CallFormatError(f"the call object holds more than one id: {found[:4]}")
    key = found[0]
    if keys.index(key) not in (0, len(keys) - 1):
        raise CallFormatError(f"the call id {key!r} sits between the other keys of the call")
    return {"id_key": key, "id_value": value[key], "id_first": keys[0] == key}


def _python_core(text: str, call: ToolCall, start: int) -> _Core | None:
    from toolweave.formats.markers import closing_paren
    from toolweave.formats.pycall import PyCallFormat

    if not text.startswith("(", start + len(call.name)):
        return None
    try:
        end = closing_paren(text, start + len(call.name))
        parsed = PyCallFormat().parse(text[start:end])
    except CallFormatError:
        return None
    if parsed != [call]:
        return None
    return _Core(start, end, "python")


def _xml_core(text: str, call: ToolCall, start: int, known: Mapping[str, Any] | None) -> _Core:
    """Name, then per argument: key marker, key, marker, value, ... (values in order)."""
    pos = start + len(call.name)
    places: list[tuple[int, int, int, int]] = []  # key start/end, value start/end
    for key, value in call.arguments.items():
        k = text.find(key, pos)
        written = value if isinstance(value, str) else json.dumps(value)
        v = text.find(written, k + len(key)) if k >= 0 else -1
        if k < 0 or v < 0:
            snippet = text[start : start + 60]
            raise CallFormatError(f"arguments written in a layout not understood: {snippet!r}")
        places.append((k, k + len(key), v, v + len(written)))
        pos = v + len(written)
    key_closes = {text[ke:vs] for _, ke, vs, _ in places}
    first_gap = text[start + len(call.name) : places[0][0]]
    if len(key_closes) != 1 or (known is not None and _typed(known)):
        return _typed_xml_core(text, call, start, places, first_gap, known)
    key_close = key_closes.pop()
    if known is None or known.get("key_open") is None:
        if len(places) < 2:
            raise CallFormatError("the xml layout needs a call with two arguments")
        between = text[places[0][3] : places[1][0]]
        after = text[places[-1][3] :]
        value_close, key_open = _split_between(between, first_gap, after)
    else:
        value_close, key_open = str(known["value_close"]), str(known["key_open"])
        if not text.startswith(value_close, places[-1][3]) or not first_gap.endswith(key_open):
            raise CallFormatError("the template writes the arguments of two calls differently")
    name_close = first_gap[: len(first_gap) - len(key_open)]
    end = places[-1][3] + len(value_close)
    fields = {
        "name_close": name_close,
        "key_open": key_open,
        "key_close": key_close,
        "value_close": value_close,
    }
    if not key_open.strip() or not value_close.strip():
        snippet = text[start : start + 60]
        raise CallFormatError(f"arguments written in a layout not understood: {snippet!r}")
    return _Core(start, end, "xml", fields)


def _typed(fields: Mapping[str, Any]) -> bool:
    return any(fields.get(k) for k in ("string_open", "string_close", "other_open"))


def _typed_xml_core(
    text: str,
    call: ToolCall,
    start: int,
    places: Sequence[tuple[int, int, int, int]],
    first_gap: str,
    known: Mapping[str, Any] | None,
) -> _Core:
    """An xml layout whose markers say whether a value is a string: the key marker
    ends in one text before strings and another before the rest."""
    kinds = [isinstance(v, str) for v in call.arguments.values()]
    gaps = [text[ke:vs] for _, ke, vs, _ in places]
    if known is None:
        if all(kinds) or not any(kinds) or len(places) < 2:
            raise CallFormatError(f"argument markers depend on the value: {sorted(set(gaps))!r}")
        g_s, g_n = gaps[kinds.index(True)], gaps[kinds.index(False)]
        key_close = _common_prefix(g_s, g_n)
        string_open, other_open = g_s[len(key_close) :], g_n[len(key_close) :]
        between = text[places[0][3] : places[1][0]]
        after = text[places[-1][3] :]
        string_close = ""
        if kinds[0] and string_open.strip() and between.startswith(string_open):
            string_close = string_open  # a quote: the same text on both sides
        if kinds[-1]:
            raise CallFormatError("the typed xml layout needs a call ending in a non-string")
        rest = between[len(string_close) :] if kinds[0] else between
        value_close = _common_prefix(rest, after)
        while (
            value_close != rest
            and value_close
            and not (value_close[-1] in _TAG_END or value_close[-1].isspace())
        ):
            value_close = value_close[:-1]
        rest = rest[len(value_close) :]
        key_open = _common_suffix(rest, first_gap)
        while (
            key_open != rest
            and key_open
            and not (key_open[0] in _TAG_START or key_open[0].isspace())
        ):
            key_open = key_open[1:]
        arg_separator = rest[: len(rest) - len(key_open)]
    else:
        key_close, string_open, other_open = (
            str(known["key_close"]),
            str(known["string_open"]),
            str(known["other_open"]),
        )
        string_close, value_close = str(known["string_close"]), str(known["value_close"])
        key_open, arg_separator = str(known["key_open"]), str(known["arg_separator"])
    for gap, is_string in zip(gaps, kinds, strict=True):
        if gap != key_close + (string_open if is_string else other_open):
            raise CallFormatError(f"argument markers depend on the value: {sorted(set(gaps))!r}")
    end = places[-1][3] + (len(string_close) if kinds[-1] else 0)
    if not text.startswith(value_close, end) or not first_gap.endswith(key_open):
        raise CallFormatError("the template writes the arguments of two calls differently")
    fields = {
        "name_close": first_gap[: len(first_gap) - len(key_open)],
        "key_open": key_open,
        "key_close": key_close,
        "value_close": value_close,
        "string_open": string_open,
        "string_close": string_close,
        "other_open": other_open,
        "arg_separator": arg_separator,
    }
    if not (key_open.strip() or arg_separator.strip()) or not (
        value_close.strip() or string_close.strip()
    ):
        snippet = text[start : start + 60]
        raise CallFormatError(f"arguments written in a layout not understood: {snippet!r}")
    return _Core(start, end + len(value_close), "xml", fields)


def _split_between(between: str, first_gap: str, after: str) -> tuple[str, str]:
    """Cut the text between two arguments into (value close, key open): the key open
    ends the gap after the name too, the value close starts the text after the last
    value; where several cuts fit, one at a tag boundary, the longest key open."""
    fits = [
        k
        for k in range(len(between) + 1)
        if first_gap.endswith(between[k:]) and after.startswith(between[:k])
    ]
    if not fits:
        raise CallFormatError(f"arguments written in a layout not understood: {between!r}")
    tagged = [
        k
        for k in fits
        if between[:k].rstrip()[-1:] in _TAG_END and between[k:].lstrip()[:1] in "<["
    ]
    k = (tagged or fits)[0]
    return between[:k], between[k:]


def _unify(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """Fields of the first and the second call as one, a differing call index made a slot."""
    out: dict[str, Any] = {}
    for key, a in first.items():
        b = second.get(key, a)
        if a == b:
            out[key] = a
        elif (
            isinstance(a, str)
            and isinstance(b, str)
            and a.replace("0", INDEX) == b.replace("1", INDEX)
        ):
            out[key] = a.replace("0", INDEX)
        else:
            raise CallFormatError(f"the calls differ in {key}: {a!r} and {b!r}")
    return out


# ---------------------------------------------------------------------- markers
def _build(
    core: _Core, prefix: str, suffix: str, between: str | None, as_string: bool
) -> CallSyntax:
    fields = dict(core.fields)
    fields["arguments_as_string"] = bool(fields.get("arguments_as_string"))
    fields["string_arguments_in"] = as_string
    if between is None:
        return _syntax(core.layout, fields, "", "", prefix, suffix, "", multiple=False)
    # Markers start and end on whole tags (the text's own ends already do).
    call_open = _common_suffix(prefix, between)
    while (
        call_open != prefix
        and call_open
        and not (call_open[0] in _TAG_START or call_open[0].isspace())
    ):
        call_open = call_open[1:]
    call_close = _common_prefix(suffix, between)
    while (
        call_close != suffix
        and call_close
        and not (call_close[-1] in _TAG_END or call_close[-1].isspace())
    ):
        call_close = call_close[:-1]
    if len(call_open) + len(call_close) > len(between):
        call_open = call_open[len(call_open) + len(call_close) - len(between) :]
    separator = between[len(call_close) : len(between) - len(call_open)]
    opening = prefix[: len(prefix) - len(call_open)]
    closing = suffix[len(call_close) :]
    return _syntax(core.layout, fields, opening, closing, call_open, call_close, separator)


def _syntax(
    layout: Layout,
    fields: Mapping[str, Any],
    opening: str,
    closing: str,
    call_open: str,
    call_close: str,
    separator: str,
    multiple: bool = True,
) -> CallSyntax:
    marked = fields.get("name_close", "").strip() or call_open.strip() or separator.strip()
    if layout == "named-json" and not marked:
        raise CallFormatError("the tool name is not marked off from the text around it")
    return CallSyntax(
        layout=layout,
        open=opening,
        close=closing,
        call_open=call_open,
        call_close=call_close,
        separator=separator,
        multiple=multiple,
        **fields,
    )


def _common_suffix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return a[len(a) - n :]


def _common_prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def _best_reason(reasons: Sequence[str]) -> str:
    """The refusal that got furthest: a layout problem over a render failure."""
    for reason in reasons:
        if "renders no tool calls" not in reason and "failed to render" not in reason:
            return reason
    for reason in reasons:
        if "renders no tool calls" in reason:
            return reason
    return reasons[0]
