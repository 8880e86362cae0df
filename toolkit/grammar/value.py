"""Lark rules for one JSON-Schema value: bounded, compact, as JSON or a Python literal.

`ValueGrammar.compile_value` turns the JSON-Schema subset that tool schemas use into
llguidance Lark rules named after a prefix, so several values (the arguments of many
tools, or one argument followed by fixed text) can live in one grammar. Everything is
bounded: strings by maxLength (else `MAX_STRING_CHARS`), arrays and free-form objects
by maxItems (else `MAX_ARRAY_ITEMS`), numbers by digit counts, values of any type by
nesting depth. Text is compact (no whitespace) and objects keep their keys in schema
order with no extra keys.

Handled: type (one or a list), enum, const, string min/maxLength, integer and number
minimum (drops the sign), boolean, null, nullable, arrays (items, min/maxItems),
objects (properties, required, additionalProperties for property-less maps), anyOf,
oneOf (as anyOf), a one-part allOf, local ``$ref``. Anything else (``pattern``,
``format``, ``not``, multi-part allOf, tuple items, ...) goes to llguidance's ``%json``
in the json flavor, with unknown keywords ignored, and raises `ConstraintError` in the
python flavor, where ``format`` alone is ignored. Not enforced by either: ``oneOf``
exclusivity, ``uniqueItems``, ``multipleOf`` and upper bounds of numbers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from toolweave.errors import CallFormatError, ConstraintError
from toolweave.grammar.lexemes import (
    Flavor,
    lark_literal,
    literal_text,
    number_regex,
    regex_literal,
    string_regex,
)
from toolweave.grammar.schema_subset import (
    ANNOTATIONS,
    DELEGATED,
    bounded_schema,
    lower_bound,
    resolve_ref,
    types_of,
)

__all__ = ["ANY_DEPTH", "MAX_ARRAY_ITEMS", "MAX_STRING_CHARS", "ValueGrammar", "compile_value"]

#: Longest string value the grammar allows when the schema sets no maxLength: small
#: models can loop inside a string forever; a bound keeps every call finite and valid.
MAX_STRING_CHARS = 200
#: The same bound for arrays without maxItems and for free-form objects.
MAX_ARRAY_ITEMS = 32
#: How deeply arrays and objects may nest in a value whose schema says nothing (``{}``).
ANY_DEPTH = 3

_RULE_NAME = re.compile(r"[a-z][a-z0-9_]*")
_SIMPLE = re.compile(r'[a-z0-9_]+|"(?:[^"\\]|\\.)*"')


def _sign_only_bounds(schema: Mapping[str, Any], *, integer: bool) -> bool:
    """Whether our number regex enforces the schema's bounds exactly: no upper bound,
    and no lower bound beyond "not negative" (or "positive" for integers)."""
    if {"maximum", "exclusiveMaximum", "exclusiveMinimum"} & set(schema):
        return False
    low = schema.get("minimum")
    return low is None or low == 0 or (integer and low == 1)


@dataclass(frozen=True)
class ValueGrammar:
    """Compiles value schemas to Lark rules under the given bounds and separators."""

    max_string_chars: int = MAX_STRING_CHARS
    max_array_items: int = MAX_ARRAY_ITEMS
    any_depth: int = ANY_DEPTH
    item_separator: str = ","
    key_separator: str = ":"
    #: Text no string of the value may hold (the marker that ends an xml value read as
    #: raw text); "" for none. Strings handed to llguidance's ``%json`` are not checked.
    forbidden: str = ""

    def compile_value(
        self,
        schema: Mapping[str, Any] | bool,
        *,
        flavor: Flavor = "json",
        rule_prefix: str = "v",
        root: Mapping[str, Any] | None = None,
    ) -> tuple[str, list[str]]:
        """Return the root rule name and the rule lines of a value matching `schema`.

        The root rule is `rule_prefix`; the others are ``<rule_prefix>_<suffix>``, so
        prefixes without "_" never clash. Local ``$ref``s resolve against `root`
        (default: `schema` itself). Raises `ConstraintError` for what cannot be built.
        """
        if flavor not in ("json", "python"):
            raise ConstraintError(f"unknown value flavor {flavor!r}; use 'json' or 'python'")
        if not _RULE_NAME.fullmatch(rule_prefix):
            raise ConstraintError(f"rule prefix {rule_prefix!r} is not a Lark rule name")
        base = root if root is not None else schema if isinstance(schema, Mapping) else {}
        compiler = _Compiler(self, flavor, rule_prefix, base)
        body = compiler.value(schema)
        return rule_prefix, [f"{rule_prefix}: {body}", *compiler.lines]


def compile_value(
    schema: Mapping[str, Any] | bool,
    *,
    flavor: Flavor = "json",
    rule_prefix: str = "v",
    root: Mapping[str, Any] | None = None,
) -> tuple[str, list[str]]:
    """`ValueGrammar.compile_value` with the default bounds and compact separators."""
    return _DEFAULT.compile_value(schema, flavor=flavor, rule_prefix=rule_prefix, root=root)


_DEFAULT = ValueGrammar()


class _Compiler:
    """One compilation: the rules written so far and the names handed out."""

    def __init__(
        self, options: ValueGrammar, flavor: Flavor, prefix: str, root: Mapping[str, Any]
    ) -> None:
        self.options = options
        self.flavor: Flavor = flavor
        self.prefix = prefix
        self.root = root
        self.lines: list[str] = []
        self.count = 0
        # $ref pointers, any-value rule names and shared expressions -> rule names
        self.named: dict[str, str] = {}

    # -- rules and expressions ------------------------------------------------------------
    def rule(self, expr: str, name: str | None = None) -> str:
        if name is None:
            self.count += 1
            name = f"{self.prefix}_{self.count}"
        self.lines.append(f"{name}: {expr}")
        return name

    def shared(self, expr: str) -> str:
        """A rule for `expr`, written once per compilation however often it is used."""
        if expr not in self.named:
            self.named[expr] = self.rule(expr)
        return self.named[expr]

    def atom(self, expr: str) -> str:
        """`expr` as something cheap to repeat: itself if a name or literal, else a rule."""
        return expr if _SIMPLE.fullmatch(expr) else self.rule(expr)

    def text(self, value: Any) -> str:
        o = self.options
        try:
            return literal_text(value, self.flavor, o.item_separator, o.key_separator)
        except CallFormatError as exc:  # a value with no literal in this flavor (NaN, ...)
            raise ConstraintError(f"no {self.flavor} literal for {value!r}: {exc}") from None

    def literal(self, value: Any) -> str:
        text = self.text(value)
        forbidden = self.options.forbidden
        if forbidden and forbidden in text:
            raise ConstraintError(f"the value {value!r} holds {forbidden!r}, which ends it")
        return lark_literal(text)

    def terminal(self, expr: str) -> str:
        """A terminal (one lexeme) for `expr`, written once per compilation."""
        key = "terminal:" + expr
        if key not in self.named:
            self.count += 1
            name = f"{self.prefix.upper()}_{self.count}"
            self.lines.append(f"{name}: {expr}")
            self.named[key] = name
        return self.named[key]

    @staticmethod
    def choice(alternatives: Iterable[str]) -> str:
        unique = list(dict.fromkeys(alternatives))
        return unique[0] if len(unique) == 1 else "(" + " | ".join(unique) + ")"

    def repeat(self, open_: str, item: str, low: int, high: int, close: str) -> str:
        """`open_` item (sep item)* `close` with `low`..`high` items."""
        if not 0 <= low <= high:
            raise ConstraintError(f"no container holds between {low} and {high} items")
        if high == 0:
            return lark_literal(open_ + close)
        item = self.atom(item)
        sep = lark_literal(self.options.item_separator)
        more = f" ({sep} {item}){{{max(low - 1, 0)},{high - 1}}}" if high > 1 else ""
        body = item + more
        body = body if low > 0 else f"({body})?"
        return f"{lark_literal(open_)} {body} {lark_literal(close)}"

    # -- schemas --------------------------------------------------------------------------
    def value(self, schema: Any) -> str:
        if schema is True:
            return self.any(self.options.any_depth)
        if not isinstance(schema, Mapping):
            raise ConstraintError(f"no value matches the schema {schema!r}")
        keys = set(schema) - ANNOTATIONS
        if "$ref" in keys and keys != {"$ref"}:
            return self.delegate(schema)
        if "$ref" in keys:
            return self.ref(schema["$ref"])
        if keys & DELEGATED and not (self.flavor == "python" and keys & DELEGATED == {"format"}):
            return self.delegate(schema)
        if "allOf" in keys:
            parts = schema["allOf"]
            if keys == {"allOf"} and isinstance(parts, list) and len(parts) == 1:
                return self.value(parts[0])
            return self.delegate(schema)
        if "const" in keys:
            return self.literal(schema["const"])
        if "enum" in keys:
            if not schema["enum"]:
                raise ConstraintError("an empty enum matches no value")
            return self.choice(self.literal(item) for item in schema["enum"])
        if "anyOf" in keys or "oneOf" in keys:
            return self.branches(schema)
        alternatives = [self.typed(kind, schema) for kind in types_of(schema)]
        if schema.get("nullable") is True:
            alternatives.append(self.literal(None))
        return self.choice(alternatives)

    def branches(self, schema: Mapping[str, Any]) -> str:
        # Sibling keywords apply to every branch; merging is exact while keys do not overlap.
        if "anyOf" in schema and "oneOf" in schema:
            return self.delegate(schema)
        parts = schema.get("anyOf", schema.get("oneOf"))
        rest = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
        shared = set(rest) - ANNOTATIONS
        if not isinstance(parts, list) or not parts:
            raise ConstraintError(f"anyOf/oneOf must be a non-empty list, got {parts!r}")
        if any(not isinstance(p, Mapping) or shared & set(p) for p in parts):
            return self.delegate(schema)
        return self.choice(self.value({**rest, **part}) for part in parts)

    def typed(self, kind: str, schema: Mapping[str, Any]) -> str:
        o = self.options
        if kind == "string":
            low = int(schema.get("minLength", 0))
            high = int(schema.get("maxLength", o.max_string_chars))
            regex = string_regex(self.flavor, low, high)
            if o.forbidden:
                forbidden = regex_literal(o.forbidden)
                return self.terminal(f"({regex} & ~/(?s:.*){forbidden}(?s:.*)/)")
            return self.shared(regex)
        if kind in ("integer", "number"):
            integer = kind == "integer"
            if self.flavor == "json" and not _sign_only_bounds(schema, integer=integer):
                # llguidance builds exact range regexes; ours only knows the sign.
                return self.delegate({**schema, "type": kind})
            return self.shared(
                number_regex(integer=integer, minimum=lower_bound(schema, integer=integer))
            )
        if kind == "boolean":
            return f"({self.literal(True)} | {self.literal(False)})"
        if kind == "null":
            return self.literal(None)
        if kind == "array":
            items = schema.get("items", True)
            if isinstance(items, list):
                return self.delegate(schema)
            low = int(schema.get("minItems", 0))
            high = int(schema.get("maxItems", max(o.max_array_items, low)))
            return self.repeat("[", self.value(items), low, high, "]")
        if kind == "object":
            if "properties" in schema or "required" in schema:
                return self.members(schema)
            extra = schema.get("additionalProperties", True)
            if extra is False:
                return self.literal({})
            value = self.value(extra) if isinstance(extra, Mapping) else self.any(o.any_depth - 1)
            return self.repeat("{", self.entry(value), 0, o.max_array_items, "}")
        return self.any(o.any_depth)

    def members(self, schema: Mapping[str, Any]) -> str:
        """A closed object: keys in schema order, required ones mandatory, no others.

        Linear in the number of keys: a chain of "tail" rules, one per key, each the
        rest of the object once some key has been written; the object starts with any
        key up to the first required one, followed by that key's tail.
        """
        props: Mapping[str, Any] = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        names = list(props) + [k for k in schema.get("required") or () if k not in props]
        if not names:
            return self.literal({})
        sep = lark_literal(self.options.item_separator)
        pairs = []
        for name in names:
            key = lark_literal(self.text(name) + self.options.key_separator)
            pairs.append(self.rule(f"{key} {self.value(props.get(name, True))}"))
        tails: list[str] = [""] * (len(names) + 1)
        for i in range(len(names) - 1, 0, -1):
            part = f"{sep} {pairs[i]}" if names[i] in required else f"({sep} {pairs[i]})?"
            tails[i] = self.rule(f"{part} {tails[i + 1]}".rstrip())
        first = next((i for i, n in enumerate(names) if n in required), None)
        last = len(names) - 1 if first is None else first
        body = self.choice(f"{pairs[j]} {tails[j + 1]}".rstrip() for j in range(last + 1))
        if first is None:
            body = f"({body})?"
        return f"{lark_literal('{')} {body} {lark_literal('}')}"

    def entry(self, value: str) -> str:
        """One ``key: value`` member of a free-form object."""
        key = self.typed("string", {})
        return f"{key} {lark_literal(self.options.key_separator)} {value}"

    def any(self, depth: int) -> str:
        """Any value with arrays and objects nested at most `depth` deep."""
        name = f"{self.prefix}_any{max(depth, 0)}"
        if name not in self.named:
            self.named[name] = name
            o = self.options
            alternatives = [
                self.typed("string", {}),
                self.typed("number", {}),
                self.typed("boolean", {}),
                self.literal(None),
            ]
            if depth > 0:
                inner = self.any(depth - 1)
                alternatives.append(self.repeat("[", inner, 0, o.max_array_items, "]"))
                alternatives.append(self.repeat("{", self.entry(inner), 0, o.max_array_items, "}"))
            self.rule(" | ".join(alternatives), name)
        return name

    def ref(self, pointer: Any) -> str:
        # One rule per target, named before its body is compiled: recursion just works.
        if not isinstance(pointer, str):
            raise ConstraintError(f"$ref must be a string, got {pointer!r}")
        if pointer not in self.named:
            target = resolve_ref(self.root, pointer)
            self.count += 1
            name = self.named[pointer] = f"{self.prefix}_{self.count}"
            self.rule(self.value(target), name)
        return self.named[pointer]

    def delegate(self, schema: Mapping[str, Any]) -> str:
        if self.flavor == "python":
            unsupported = sorted(
                set(schema) & (DELEGATED | {"$ref", "allOf", "anyOf", "oneOf", "items"})
            )
            raise ConstraintError(
                f"the python flavor cannot constrain a value with {', '.join(unsupported)}"
            )
        o = self.options
        doc = bounded_schema(schema, o.max_string_chars, o.max_array_items)
        for key in ("$defs", "definitions"):
            if key in self.root and key not in doc:
                doc[key] = bounded_schema(self.root[key], o.max_string_chars, o.max_array_items)
        doc["x-guidance"] = {
            "whitespace_flexible": False,
            "item_separator": o.item_separator,
            "key_separator": o.key_separator,
            "lenient": True,  # an exotic keyword loosens one value; it must not break a tool
        }
        return self.rule("%json " + json.dumps(doc, ensure_ascii=False))
