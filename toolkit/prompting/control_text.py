"""Control-token strings in untrusted text: keep them text, and cut a prompt at the
control tokens its template wrote.

A tokenizer that parses special tokens turns the text ``<|im_end|>`` into the control
token that ends a turn, wherever the text comes from. A prompt is therefore rendered
with every control string of the messages replaced by a placeholder (`Escaper`), cut
at the control strings left, which are the template's own (`ControlStrings.split`),
and the placeholders are put back inside the text parts only. The text parts are then
tokenized as plain text and the control parts as control tokens.

The cut follows llama.cpp's own partition (longest control strings first, each one at
every non-overlapping place left to right, whitespace dropped beside a token marked
lstrip or rstrip), so a prompt without control strings in its messages gives the same
parts llama.cpp's tokenizer cuts it into. A placeholder is built from characters no
control string holds, so no control string can form across one; a proper prefix of a
control string at the end of an untrusted string (or a proper suffix at its start) is
replaced too, so none can form across the edge of an untrusted string either.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from toolweave.errors import ToolweaveError

__all__ = ["ControlStrings", "Escaper", "PromptPart"]

#: Placeholder delimiters, tried in order: the first that no control string holds.
_DELIMITERS = "@#~^`$%"
#: Attempts at a nonce that no input holds (a collision is a 1 in 2**48 event each).
_NONCE_TRIES = 16


@dataclass(frozen=True)
class PromptPart:
    """A run of prompt text: a control token the template wrote, or plain text."""

    text: str
    control: bool = False


def _trie_pattern(words: Iterable[str]) -> str:
    """A regex matching any of `words`, the longest one where several start at a place."""
    root: dict[str, Any] = {}
    for word in words:
        node = root
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        branches = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return emit(root)


class ControlStrings:
    """The texts of a vocabulary's control tokens (the ones a tokenizer turns into
    tokens only when asked to parse special tokens); `lstrip` and `rstrip` are those
    that swallow the whitespace on their left or right."""

    def __init__(
        self, texts: Iterable[str], *, lstrip: Iterable[str] = (), rstrip: Iterable[str] = ()
    ) -> None:
        self.texts = frozenset(t for t in texts if t)
        self.lstrip = frozenset(lstrip) & self.texts
        self.rstrip = frozenset(rstrip) & self.texts
        self._any = re.compile(_trie_pattern(self.texts)) if self.texts else None
        # Every control string starting at a place, overlaps included (llama.cpp's cut
        # looks for each string on its own).
        self._at = re.compile(f"(?=({_trie_pattern(self.texts)}))") if self.texts else None
        self.prefixes = frozenset(t[:i] for t in self.texts for i in range(1, len(t)))
        self.suffixes = frozenset(t[i:] for t in self.texts for i in range(1, len(t)))
        self.longest = max((len(t) for t in self.texts), default=0)
        #: A character no control string holds (placeholders are delimited by it).
        self.delimiter = next((d for d in _DELIMITERS if not any(d in t for t in self.texts)), "")

    def __bool__(self) -> bool:
        return bool(self.texts)

    def count(self, text: str) -> int:
        """Control strings in `text` (leftmost, longest, not overlapping)."""
        return 0 if self._any is None else sum(1 for _ in self._any.finditer(text))

    def escape(self, text: str, placeholder: Callable[[str], str]) -> tuple[str, int]:
        """`text` with each control string, and a partial one at either end, replaced by
        ``placeholder(original)``; returns the new text and how many were replaced."""
        if self._any is None:
            return text, 0
        head = tail = ""
        n = 0
        for size in range(min(self.longest - 1, len(text)), 0, -1):
            if text[-size:] in self.prefixes:
                tail, text, n = placeholder(text[-size:]), text[:-size], n + 1
                break
        for size in range(min(self.longest - 1, len(text)), 0, -1):
            if text[:size] in self.suffixes:
                head, text, n = placeholder(text[:size]), text[size:], n + 1
                break
        body, k = self._any.subn(lambda m: placeholder(m.group()), text)
        return head + body + tail, n + k

    def split(self, text: str) -> list[PromptPart]:
        """`text` cut at its control strings, as llama.cpp's tokenizer cuts it."""
        if self._at is None:
            return [PromptPart(text)] if text else []
        found = {m.group(1) for m in self._at.finditer(text)}
        # (text, control) fragments; raw ones are cut by each control string in turn.
        frags: list[tuple[str, bool]] = [(text, False)]
        for special in sorted(found, key=len, reverse=True):
            out: list[tuple[str, bool]] = []
            for frag, control in frags:
                if control or special not in frag:
                    out.append((frag, control))
                    continue
                pieces = frag.split(special)
                for i, piece in enumerate(pieces):
                    if i:
                        out.append((special, True))
                    out.append((piece, False))
            frags = out
        return self._strip(frags)

    def _strip(self, frags: list[tuple[str, bool]]) -> list[PromptPart]:
        texts = [frag for frag, _ in frags]
        for i, (frag, control) in enumerate(frags):
            if not control:
                continue
            if frag in self.lstrip and i and not frags[i - 1][1]:
                texts[i - 1] = texts[i - 1].rstrip()
            if frag in self.rstrip and i + 1 < len(frags) and not frags[i + 1][1]:
                texts[i + 1] = texts[i + 1].lstrip()
        return [PromptPart(t, c) for t, (_, c) in zip(texts, frags, strict=True) if t or c]


class Escaper:
    """Placeholders for the control strings of untrusted text, unique to one render:
    built from a nonce no input holds and delimiters no control string holds."""

    def __init__(self, controls: ControlStrings, inputs: Iterable[str]) -> None:
        self.controls = controls
        delimiter = controls.delimiter
        if not delimiter:
            raise ValueError("every placeholder delimiter occurs in a control string")
        seen = list(inputs)
        for _ in range(_NONCE_TRIES):
            nonce = secrets.token_hex(6)
            if not any(nonce in s for s in seen):
                break
        else:  # pragma: no cover - needs 16 collisions of a 48-bit nonce
            raise ValueError("no placeholder nonce is absent from the prompt's text")
        self._open = f"{delimiter}tw{nonce}{delimiter}"
        self._close = delimiter
        self._pattern = re.compile(re.escape(self._open) + r"(\d+)" + re.escape(self._close))
        self.originals: list[str] = []
        self._index: dict[str, int] = {}
        self.escaped = 0

    def placeholder(self, original: str) -> str:
        index = self._index.get(original)
        if index is None:
            index = self._index[original] = len(self.originals)
            self.originals.append(original)
            if self.controls.count(self._make(index)):  # pragma: no cover - hex and digits
                raise ValueError("a placeholder holds a control string")
        return self._make(index)

    def _make(self, index: int) -> str:
        return f"{self._open}{index}{self._close}"

    def escape(self, value: Any) -> Any:
        """`value` with every string in it escaped (mappings and lists walked; keys kept).

        Any other object is refused: its text could reach the prompt unseen."""
        if isinstance(value, str):
            text, n = self.controls.escape(value, self.placeholder)
            self.escaped += n
            return text
        if isinstance(value, Mapping):
            return {key: self.escape(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.escape(item) for item in value]
        if value is None or isinstance(value, int | float):
            return value
        raise ToolweaveError(
            "chat template: message values must be text, numbers, lists or mappings, "
            f"not {type(value).__name__}"
        )

    def restore(self, text: str) -> str:
        """`text` with the placeholders put back."""
        if not self.originals:
            return text
        return self._pattern.sub(lambda m: self.originals[int(m.group(1))], text)


def strings_in(value: Any) -> Iterable[str]:
    """Every string in `value` (mappings and lists walked, keys included)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str):
                yield key
            yield from strings_in(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings_in(item)
