"""The lexemes of one value, in JSON or Python-literal form, as Lark text.

Every lexeme is bounded, so a small model cannot loop forever inside a value: strings
by a character count, numbers by digit counts. Literal values (enum members, keys)
are written exactly as the formats write them: `json.dumps(value, ensure_ascii=False)`
with the given separators for JSON, `toolweave.formats.to_literal` for Python.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from toolweave.errors import ConstraintError
from toolweave.formats.pycall import to_literal

__all__ = [
    "INTEGER_DIGITS",
    "NUMBER_EXPONENT_DIGITS",
    "NUMBER_FRACTION_DIGITS",
    "NUMBER_INTEGER_DIGITS",
    "Flavor",
    "lark_literal",
    "literal_text",
    "number_regex",
    "regex_literal",
    "string_regex",
]

Flavor = Literal["json", "python"]

#: Digits of an ``integer`` value: every 64-bit count or id fits.
INTEGER_DIGITS = 18
#: Digits of a ``number`` before the point, after it, and in the exponent. Python writes
#: every finite float within these (fixed notation below 1e16, at most 17 significant
#: digits, so at most 20 after the point), and "1.5000000..." cannot run on.
NUMBER_INTEGER_DIGITS = 16
NUMBER_FRACTION_DIGITS = 20
NUMBER_EXPONENT_DIGITS = 3

# One character of a string body. JSON: anything but '"', '\' and control characters,
# or one of the JSON escapes (json.dumps writes \" \\ \n \r \t \b \f \u00XX; models also
# write \/ and \u for other characters). Python: the escapes `to_literal` writes and the
# other simple ones; no raw control characters or DEL, which `to_literal` escapes.
_JSON_CHAR = r'(?:[^"\\\x00-\x1F]|\\(?:["\\\x2Fbfnrt]|u[0-9a-fA-F]{4}))'
_PYTHON_CHAR = (
    r'(?:[^"\\\x00-\x1F\x7F]|\\(?:["\\\x27abfnrtv]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}'
    r"|U[0-9a-fA-F]{8}))"
)


# json.dumps leaves DEL and the C1 controls raw, and llguidance's Lark lexer rejects DEL.
_LARK_ESCAPES = {code: f"\\u{code:04x}" for code in range(0x7F, 0xA0)}


def lark_literal(text: str) -> str:
    """A Lark string literal matching exactly `text`."""
    return json.dumps(text, ensure_ascii=False).translate(_LARK_ESCAPES)


def regex_literal(text: str) -> str:
    """`text` as regex text matching it literally: ASCII punctuation and controls as hex
    escapes (valid in llguidance's regexes and inside Lark's ``/.../``)."""
    return "".join(f"\\x{ord(c):02X}" if ord(c) < 128 and not c.isalnum() else c for c in text)


def string_regex(flavor: Flavor, min_chars: int, max_chars: int) -> str:
    """A Lark regex for a double-quoted string of `min_chars`..`max_chars` characters.

    An escape sequence counts as one character, as it does in the decoded value.
    """
    if not 0 <= min_chars <= max_chars:
        raise ConstraintError(f"no string has between {min_chars} and {max_chars} characters")
    char = _JSON_CHAR if flavor == "json" else _PYTHON_CHAR
    return f'/"{char}{{{min_chars},{max_chars}}}"/'


def number_regex(*, integer: bool, minimum: float | None = None) -> str:
    """A Lark regex for an integer or a number, unsigned when `minimum` is at least 0.

    An integer with `minimum` at least 1 cannot be 0.
    """
    sign = "" if minimum is not None and minimum >= 0 else "-?"
    if integer:
        head = f"[1-9][0-9]{{0,{INTEGER_DIGITS - 1}}}"
        if minimum is None or minimum < 1:
            head = f"(?:0|{head})"
        return f"/{sign}{head}/"
    head = f"(?:0|[1-9][0-9]{{0,{NUMBER_INTEGER_DIGITS - 1}}})"
    fraction = f"(?:\\.[0-9]{{1,{NUMBER_FRACTION_DIGITS}}})?"
    exponent = f"(?:[eE][+-]?[0-9]{{1,{NUMBER_EXPONENT_DIGITS}}})?"
    return f"/{sign}{head}{fraction}{exponent}/"


def literal_text(value: Any, flavor: Flavor, item_separator: str, key_separator: str) -> str:
    """`value` as the text a model writes for it: compact JSON or a Python literal."""
    if flavor == "json":
        return json.dumps(value, ensure_ascii=False, separators=(item_separator, key_separator))
    if isinstance(value, Mapping):
        items = (
            f"{to_literal(key)}{key_separator}"
            f"{literal_text(item, flavor, item_separator, key_separator)}"
            for key, item in value.items()
        )
        return "{" + item_separator.join(items) + "}"
    if isinstance(value, (list, tuple)):
        parts = (literal_text(item, flavor, item_separator, key_separator) for item in value)
        return "[" + item_separator.join(parts) + "]"
    return to_literal(value)
