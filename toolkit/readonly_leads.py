"""Leads that several tools' descriptions share: what a system does, not what a tool does.

Tools generated from one API often open with the same sentences: "This tool belongs
to the Gorilla file system. It is a simple file system that allows users to perform
basic file operations such as navigating directories, creating files and directories,
reading and writing to files, etc. Tool description: List the contents of ...". Read
as part of every tool's description, that lead makes ``ls`` create and write files.
A lead repeated verbatim across tools cannot tell one of them from another, so
`shared_leads` finds it and the classifier reads the rest of the description instead.

It errs as the classifier does. A lead counts only when it ends at a sentence end, is
the same text in at least two descriptions, and leaves words of the tool's own after
it. Each of its sentences that names a side effect must read as a list of what a
system can do: a word of ability ("allows users to", "lets", "provides", "used to")
and reading beside the side effects ("create, view, and manage tickets"). A shared
sentence such as "Each call revokes the previous token." or "Reads and removes the
next message." may be true of every tool that shares it, so it keeps counting.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from itertools import pairwise

from toolweave.readonly_text import description_evidence
from toolweave.readonly_words import READ_VERBS, TOKEN, present_lemma

__all__ = ["MAX_LEAD_CHARS", "shared_leads"]

#: Leads are looked for in a description's first characters only: a preamble is short,
#: and the work stays linear in the catalogue's size.
MAX_LEAD_CHARS = 1_000
_SENTENCE_END = re.compile(r"[.:;!?](?=\s)")
_WORD = re.compile(r"[A-Za-z]")
_ABILITY = frozenset(
    {"allow", "allows", "let", "lets", "enable", "enables", "provide", "provides"}
    | {"offer", "offers", "support", "supports"}
)


def shared_leads(descriptions: Sequence[str]) -> list[str]:
    """For each description, the longest lead it shares with another one, or ``""``.

    A lead is the description up to a sentence end (within `MAX_LEAD_CHARS`), found
    verbatim at the start of at least two of ``descriptions``, with more words after it.
    Leads that name a side effect but no reading are not returned (see the module).
    """
    candidates = [_lead_candidates(d) for d in descriptions]
    counts = Counter(lead for leads in candidates for lead in set(leads))
    found: list[str] = []
    for leads in candidates:
        lead = next((x for x in reversed(leads) if counts[x] >= 2 and _discountable(x)), "")
        found.append(lead)
    return found


def _lead_candidates(description: str) -> list[str]:
    """Prefixes of ``description`` that end at a sentence end and leave words after them,
    shortest first."""
    head = description[: MAX_LEAD_CHARS + 1]
    out: list[str] = []
    for match in _SENTENCE_END.finditer(head):
        lead = description[: match.end()]
        if _WORD.search(description, match.end()) and len(lead) <= MAX_LEAD_CHARS:
            out.append(lead)
    return out


def _discountable(lead: str) -> bool:
    """Whether every sentence of ``lead`` that names a side effect lists a system's
    abilities: a word of ability, and reading beside the side effects."""
    for sentence in _SENTENCE_END.split(lead):
        side, _ = description_evidence(sentence)
        if not side:
            continue
        words = TOKEN.findall(sentence.lower())
        able = _ABILITY.intersection(words) or any(
            a == "used" and b == "to" for a, b in pairwise(words)
        )
        if not (able and any(present_lemma(w) in READ_VERBS for w in words)):
            return False
    return True
