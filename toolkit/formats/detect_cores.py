"""Where one call's name and arguments sit in a rendered probe answer, and the layout
(`toolweave.formats.syntax`) they are written in: a JSON object, a name then JSON, a
Python call or xml-like markers around each argument, with the fields of the layout
read off the text. Text these layouts do not cover is refused with a `CallFormatError`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolweave.errors import CallFormatError
from toolweave.formats.detect_text import TAG_END, TAG_START, common_prefix, common_suffix
from toolweave.formats.syntax import CALL_ID, INDEX, Layout
from toolweave.toolspec import ToolCall

__all__ = ["Core", "find_core", "unify"]

#: Lenient JSON: the call ids stand in rendered text as a control character.
_DECODER = json.JSONDecoder(strict=False)


@dataclass
class Core:
    """Where one call's name and arguments sit in the rendered text."""

    start: int
    end: int
    layout: Layout
    fields: dict[str, Any] = field(default_factory=dict)


def find_core(text: str, call: ToolCall, pos: int, known: Mapping[str, Any] | None = None) -> Core:
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
        return Core(start, a_end, "named-json", {"name_close": text[name_end:a_start]})
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


def _json_core(text: str, call: ToolCall, pos: int) -> Core | None:
    args = dict(call.arguments)
    best: Core | None = None
    i = text.find("{", pos)
    while i >= 0:
        value, end = _decode(text, i)
        if isinstance(value, dict):
            fields = _json_fields(value, call.name, args)
            if fields is not None and (best is None or i < best.start):
                best = Core(i, end, "json", fields)
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


def _python_core(text: str, call: ToolCall, start: int) -> Core | None:
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
    return Core(start, end, "python")


def _xml_core(text: str, call: ToolCall, start: int, known: Mapping[str, Any] | None) -> Core:
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
    return Core(start, end, "xml", fields)


def _typed(fields: Mapping[str, Any]) -> bool:
    return any(fields.get(k) for k in ("string_open", "string_close", "other_open"))


def _typed_xml_core(
    text: str,
    call: ToolCall,
    start: int,
    places: Sequence[tuple[int, int, int, int]],
    first_gap: str,
    known: Mapping[str, Any] | None,
) -> Core:
    """An xml layout whose markers say whether a value is a string: the key marker
    ends in one text before strings and another before the rest."""
    kinds = [isinstance(v, str) for v in call.arguments.values()]
    gaps = [text[ke:vs] for _, ke, vs, _ in places]
    if known is None:
        if all(kinds) or not any(kinds) or len(places) < 2:
            raise CallFormatError(f"argument markers depend on the value: {sorted(set(gaps))!r}")
        g_s, g_n = gaps[kinds.index(True)], gaps[kinds.index(False)]
        key_close = common_prefix(g_s, g_n)
        string_open, other_open = g_s[len(key_close) :], g_n[len(key_close) :]
        between = text[places[0][3] : places[1][0]]
        after = text[places[-1][3] :]
        string_close = ""
        if kinds[0] and string_open.strip() and between.startswith(string_open):
            string_close = string_open  # a quote: the same text on both sides
        if kinds[-1]:
            raise CallFormatError("the typed xml layout needs a call ending in a non-string")
        rest = between[len(string_close) :] if kinds[0] else between
        value_close = common_prefix(rest, after)
        while (
            value_close != rest
            and value_close
            and not (value_close[-1] in TAG_END or value_close[-1].isspace())
        ):
            value_close = value_close[:-1]
        rest = rest[len(value_close) :]
        key_open = common_suffix(rest, first_gap)
        while (
            key_open != rest
            and key_open
            and not (key_open[0] in TAG_START or key_open[0].isspace())
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
    return Core(start, end + len(value_close), "xml", fields)


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
        k for k in fits if between[:k].rstrip()[-1:] in TAG_END and between[k:].lstrip()[:1] in "<["
    ]
    k = (tagged or fits)[0]
    return between[:k], between[k:]


def unify(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
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
