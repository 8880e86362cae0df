"""Read a model's tool-call syntax off its chat template.

The template renders the same short conversation three times: the assistant answers
with no call, with one call and with two calls (fixed names and arguments). What the
calls add to the text is the call syntax: where the name and the arguments are and how
they are written gives the layout (`toolweave.formats.syntax`); the text before, between
and after the calls gives the markers. A template that writes no calls, or writes them
in a way none of the layouts covers, is refused with a `CallFormatError` that says what
was not understood. The probe conversation and its rendering live in
`toolweave.formats.detect_probe`, finding each call's name and arguments in
`toolweave.formats.detect_cores`; this module joins them and reads off the markers.

detect_call_syntax(qwen3_template).layout -> 'json'
detect_call_syntax(qwen35_template).key_open -> '\\n<parameter='
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from toolweave.errors import CallFormatError
from toolweave.formats.base import CallFormat
from toolweave.formats.detect_cores import Core, find_core, unify
from toolweave.formats.detect_probe import (
    PROBE_CALLS,
    PROBE_TOOLS,
    after_prompt,
    drop_end,
    render_probe,
    turn_end,
)
from toolweave.formats.detect_text import (
    TAG_END,
    TAG_START,
    added_text,
    common_prefix,
    common_suffix,
)
from toolweave.formats.syntax import CallSyntax, Layout, SyntaxFormat

__all__ = [
    "PROBE_CALLS",
    "PROBE_TOOLS",
    "added_text",
    "detect_call_format",
    "detect_call_syntax",
    "syntax_family",
]


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


# ---------------------------------------------------------------------- detection
def _detect(template: str, as_string: bool, content: str | None) -> CallSyntax:
    one = render_probe(template, PROBE_CALLS[:1], as_string, content)
    try:
        none = render_probe(template, [], as_string, content)
    except CallFormatError:  # a template that refuses an empty answer
        none = render_probe(template, [], as_string, " ")
    try:
        prompt = render_probe(template, None, as_string, content)
    except CallFormatError:
        prompt = ""
    t1 = after_prompt(added_text(none, one), prompt)
    if PROBE_CALLS[0].name not in t1:
        raise CallFormatError("the template renders no tool calls")
    core1 = find_core(t1, PROBE_CALLS[0], 0)
    if core1.fields.get("arguments_as_string") and not as_string:
        raise CallFormatError("the template writes the arguments as a string")
    try:
        two = render_probe(template, PROBE_CALLS, as_string, content)
    except CallFormatError:
        two = ""
    t2 = after_prompt(added_text(none, two), prompt) if two else ""
    end_of_turn = turn_end(template, content)
    t1, t2 = drop_end(t1, end_of_turn), drop_end(t2, end_of_turn)
    second = t2.find(PROBE_CALLS[1].name)
    if second < 0:
        return _build(core1, t1[: core1.start], t1[core1.end :], None, as_string)
    a = find_core(t2, PROBE_CALLS[0], 0)
    b = find_core(t2, PROBE_CALLS[1], a.end, known=core1.fields)
    if b.layout != a.layout:
        raise CallFormatError("the template writes its first and second call differently")
    prefix, between, suffix = t2[: a.start], t2[a.end : b.start], t2[b.end :]
    if prefix != t1[: core1.start] or suffix != t1[core1.end :]:
        raise CallFormatError("the template writes one call and two calls differently")
    fields = unify(a.fields, b.fields)
    return _build(replace(a, fields=fields), prefix, suffix, between, as_string)


# ---------------------------------------------------------------------- markers
def _build(
    core: Core, prefix: str, suffix: str, between: str | None, as_string: bool
) -> CallSyntax:
    fields = dict(core.fields)
    fields["arguments_as_string"] = bool(fields.get("arguments_as_string"))
    fields["string_arguments_in"] = as_string
    if between is None:
        return _syntax(core.layout, fields, "", "", prefix, suffix, "", multiple=False)
    # Markers start and end on whole tags (the text's own ends already do).
    call_open = common_suffix(prefix, between)
    while (
        call_open != prefix
        and call_open
        and not (call_open[0] in TAG_START or call_open[0].isspace())
    ):
        call_open = call_open[1:]
    call_close = common_prefix(suffix, between)
    while (
        call_close != suffix
        and call_close
        and not (call_close[-1] in TAG_END or call_close[-1].isspace())
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


def _best_reason(reasons: Sequence[str]) -> str:
    """The refusal that got furthest: a layout problem over a render failure."""
    for reason in reasons:
        if "renders no tool calls" not in reason and "failed to render" not in reason:
            return reason
    for reason in reasons:
        if "renders no tool calls" in reason:
            return reason
    return reasons[0]
