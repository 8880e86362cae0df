"""Call grammars of the argument layouts whose arguments are not one JSON object.

A syntax read off a chat template (`toolweave.formats.SyntaxFormat`) in the ``xml`` or
``python`` layout writes each argument as its own piece of text; this module builds the
Lark rule of one call of one tool in it, for `toolweave.grammar.call.call_grammar`:

- ``xml``: per argument ``key_open`` + the literal key + ``key_close``, then the value,
  then ``value_close``. A string-typed property (``"type": "string"``, which is how
  `SyntaxFormat` decides to read a value as raw text) takes raw text of at most
  maxLength (else `MAX_STRING_CHARS`) characters that cannot hold the marker ending it
  (an enum or const: exactly one of its members); any other value is compiled by
  `compile_value` as JSON. A typed syntax marks the kind: ``string_open`` + raw text +
  ``string_close`` for a string-typed property, ``other_open`` + JSON for the rest.
  Arguments are joined by ``arg_separator``.
- ``python``: ``name(key=value, ...)`` with values as Python literals, written the way
  `toolweave.formats.pycall.to_literal` writes them.

Either way the required arguments come first in schema order, then any optional ones in
schema order, as in the JSON layouts. The raw text and the marker that ends it form one
lexeme, so the lexer cannot end the text early on a prefix of the marker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolweave.errors import ConstraintError
from toolweave.formats.syntax import CallSyntax, SyntaxFormat
from toolweave.grammar.lexemes import lark_literal, regex_literal
from toolweave.grammar.value import MAX_STRING_CHARS, ValueGrammar
from toolweave.toolspec import ToolSpec

#: Longest raw text bounded in characters when a marker may not occur in it (see
#: `_raw_string`); measured: 100 works before `</parameter>`, 128 fails.
_CHARS_WITH_STOP = 64

__all__ = ["RAW_LAYOUTS", "call_parts", "marker_text", "raw_call_rule", "string_typed"]

#: Layouts whose calls this module builds (the others hold one JSON object).
RAW_LAYOUTS: tuple[str, ...] = ("xml", "python")

#: Python literals as `to_literal` writes them: ", " between items, ": " after a key.
_PYTHON = ValueGrammar(item_separator=", ", key_separator=": ")


def marker_text(text: str, special: Mapping[str, int] | None = None) -> str:
    """Lark text matching exactly `text`, each occurrence of a key of `special` (a
    special token's text -> its id) matched as that token (``<[id]>``), which is how a
    tokenizer writes it and the only way llguidance matches it."""
    if not special:
        return lark_literal(text) if text else ""
    names = sorted((name for name in special if name), key=len, reverse=True)
    pieces: list[str] = []
    rest = text
    while rest:
        hits = [(rest.find(name), name) for name in names if name in rest]
        if not hits:
            pieces.append(lark_literal(rest))
            break
        at, name = min(hits, key=lambda hit: (hit[0], -len(hit[1])))
        if at:
            pieces.append(lark_literal(rest[:at]))
        pieces.append(f"<[{special[name]}]>")
        rest = rest[at + len(name) :]
    return " ".join(pieces)


def string_typed(schema: Mapping[str, Any]) -> bool:
    """Whether `SyntaxFormat` reads an xml value of this schema as raw text (else JSON)."""
    kind = schema.get("type")
    return kind == "string" or kind == ["string"]


def call_parts(fmt: SyntaxFormat, name: str) -> tuple[str, str]:
    """The text of one call of tool `name` before its first argument and after its last
    (the call's markers included, the response's not)."""
    s = fmt.syntax
    if s.layout == "python":
        return f"{s.call_open}{name}(", f"){s.call_close}"
    if s.layout == "xml":
        return f"{s.call_open}{name}{s.name_close}", s.call_close
    raise ConstraintError(f"the {s.layout} layout writes its arguments as one JSON object")


def raw_call_rule(
    fmt: SyntaxFormat, spec: ToolSpec, index: int, special: Mapping[str, int] | None = None
) -> tuple[str, list[str]]:
    """The Lark expression of one call of `spec` in `fmt` and the rules it uses (rule
    and terminal names start with ``a<index>``/``A<index>``); markers holding the text of
    a key of `special` match that special token there (`marker_text`)."""
    s = fmt.syntax
    if s.layout not in RAW_LAYOUTS:
        raise ConstraintError(f"the {s.layout} layout writes its arguments as one JSON object")
    if s.layout == "python" and not all(part.isidentifier() for part in spec.name.split(".")):
        raise ConstraintError(f"tool name {spec.name!r} is not a Python name (dotted or not)")
    head, tail = call_parts(fmt, spec.name)
    rules: list[str] = []
    pairs: list[str] = []
    for j, key in enumerate(spec.argument_order):
        prefix = f"a{index}k{j}"
        if s.layout == "python":
            expr = _python_argument(spec, key, prefix, rules)
        else:
            expr = _xml_argument(s, spec, key, prefix, rules, special or {})
        rules.append(f"{prefix}: {expr}")
        pairs.append(prefix)
    separator = ", " if s.layout == "python" else s.arg_separator
    required = [key in spec.required for key in spec.argument_order]
    body = _members(pairs, required, marker_text(separator, special), f"a{index}t", rules)
    pieces = [marker_text(head, special), body, marker_text(tail, special)]
    return " ".join(p for p in pieces if p) or '""', rules


def _members(
    pairs: Sequence[str], required: Sequence[bool], separator: str, prefix: str, rules: list[str]
) -> str:
    """Arguments in order, required ones mandatory, joined by `separator` (Lark text): a
    chain of tail rules as in `ValueGrammar` objects (linear in the number of arguments)."""
    if not pairs:
        return ""
    sep = f"{separator} " if separator else ""
    tails = [""] * (len(pairs) + 1)
    for i in range(len(pairs) - 1, 0, -1):
        part = f"{sep}{pairs[i]}" if required[i] else f"({sep}{pairs[i]})?"
        name = f"{prefix}{i}"
        rules.append(f"{name}: {part} {tails[i + 1]}".rstrip())
        tails[i] = name
    first = next((i for i, r in enumerate(required) if r), None)
    last = len(pairs) - 1 if first is None else first
    options = [f"{pairs[j]} {tails[j + 1]}".rstrip() for j in range(last + 1)]
    body = options[0] if len(options) == 1 else "(" + " | ".join(options) + ")"
    return f"({body})?" if first is None else body


def _python_argument(spec: ToolSpec, key: str, prefix: str, rules: list[str]) -> str:
    if not key.isidentifier():
        raise ConstraintError(f"argument {key!r} of {spec.name!r} is not a Python name")
    root, value_rules = _PYTHON.compile_value(
        spec.property_schema(key), flavor="python", rule_prefix=f"{prefix}v", root=spec.parameters
    )
    rules.extend(value_rules)
    return f"{lark_literal(key + '=')} {root}"


def _xml_argument(
    s: CallSyntax,
    spec: ToolSpec,
    key: str,
    prefix: str,
    rules: list[str],
    special: Mapping[str, int],
) -> str:
    schema = spec.property_schema(key)
    key_text = s.key_open + key + s.key_close
    if s.key_close.strip() and s.key_close.strip() in key:
        raise ConstraintError(f"argument name {key!r} holds the marker that ends it")
    if string_typed(schema):
        if s.typed:
            opening = key_text + s.string_open
            # The parser ends a marked string at string_close, else at value_close.
            close = s.string_close or s.value_close
            after = s.value_close if s.string_close else ""
        else:
            opening, close, after = key_text, s.value_close, ""
        value = _raw_string(schema, close, special, f"{prefix.upper()}S", rules, spec.name, key)
        pieces = [marker_text(opening, special), value, marker_text(after, special)]
        return " ".join(p for p in pieces if p)
    opening = key_text + (s.other_open if s.typed else "")
    # Plain xml ends the value's text at the first value_close, wherever it is: no string
    # inside the JSON value may hold it (a typed syntax reads the JSON value as JSON).
    values = ValueGrammar(forbidden="" if s.typed else s.value_close.strip())
    root, value_rules = values.compile_value(schema, rule_prefix=f"{prefix}v", root=spec.parameters)
    rules.extend(value_rules)
    pieces = [marker_text(opening, special), root, marker_text(s.value_close, special)]
    return " ".join(p for p in pieces if p)


def _raw_string(
    schema: Mapping[str, Any],
    close: str,
    special: Mapping[str, int],
    terminal: str,
    rules: list[str],
    tool: str,
    key: str,
) -> str:
    """Raw text then `close`; the text cannot hold `close` (stripped: the parser finds it
    with any whitespace around it). Text and marker are one terminal, so the lexer cannot
    end the text early on a prefix of the marker; a marker that is (or starts with) a
    special token follows the text's terminal instead (no text extends into a token)."""
    stop = close.strip()
    if "pattern" in schema:
        raise ConstraintError(
            f"argument {key!r} of {tool!r}: a raw string value with a pattern has no "
            "call grammar yet"
        )
    closing = marker_text(close, special)
    apart = closing != lark_literal(close) if close else False
    members: list[Any] | None = None
    if "const" in schema:
        members = [schema["const"]]
    elif "enum" in schema:
        members = list(schema["enum"])
    if members is not None:
        texts = [m for m in members if isinstance(m, str)]
        if not texts:
            raise ConstraintError(f"argument {key!r} of {tool!r}: no string member to write")
        if stop and any(stop in t for t in texts):
            raise ConstraintError(f"argument {key!r} of {tool!r}: a member holds {stop!r}")
        unique = list(dict.fromkeys(texts))
        if apart:
            choice = " | ".join(lark_literal(t) for t in unique)
            return f"({choice}) {closing}"
        rules.append(f"{terminal}: " + " | ".join(lark_literal(t + close) for t in unique))
        return terminal
    low = int(schema.get("minLength", 0))
    high = int(schema.get("maxLength", MAX_STRING_CHARS))
    if not 0 <= low <= high:
        raise ConstraintError(f"no string has between {low} and {high} characters")
    # A long bounded repetition intersected with "holds no marker" makes llguidance's
    # lexer build too many states (Qwen3.5's 200 characters before `</parameter>` fail
    # mid-value): past `_CHARS_WITH_STOP` the text is unbounded in characters and its
    # rule bounded in tokens instead (at least as many characters).
    by_tokens = bool(stop) and high > _CHARS_WITH_STOP
    text = f"/(?s:.{{{low},}})/" if by_tokens else f"/(?s:.{{{low},{high}}})/"
    if stop:
        text = f"({text} & ~/(?s:.*){regex_literal(stop)}(?s:.*)/)"
    if apart:
        rules.append(f"{terminal}: {text}")
        value = f"{terminal} {closing}"
    else:
        rules.append(f"{terminal}: {text} {closing}" if close else f"{terminal}: {text}")
        value = terminal
    if not by_tokens:
        return value
    bounded = f"{terminal.lower()}_b"
    rules.append(f"{bounded}[max_tokens={high + 8}]: {value}")  # 8: the closing marker
    return bounded
