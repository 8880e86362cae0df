"""Tag-aware text helpers of call-syntax detection (`toolweave.formats.detect`): the
characters that open and close a tag, common prefixes and suffixes, and the text one
rendering adds to another."""

from __future__ import annotations

import re

__all__ = ["TAGS", "TAG_END", "TAG_START", "added_text", "common_prefix", "common_suffix"]

TAG_START = "<[{"
TAGS = re.compile(r"<[^<>\s]{1,40}>")
TAG_END = ">]}`"


def added_text(before: str, after: str) -> str:
    """What `after` adds to `before` (`before` a prefix or a variant of it), widened so
    that it starts and ends on whole tags and stripped: e.g. an assistant's reply out of
    a rendered conversation and its prompt. It is the middle left by their common prefix
    and suffix, widened so that it does not cut a tag in two."""
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


def common_suffix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return a[len(a) - n :]


def common_prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]
