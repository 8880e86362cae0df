"""What a tool's description says: its side-effect verbs and its read-only evidence.

`description_evidence` splits a description into sentences and reads each one for
side effects: a verb that stands as a verb ("fetch mail and mark it as read"), a
two-word phrase ("shut down"), a passive participle ("messages are removed") or a
notification shown to a person; a side effect that is negated or hypothetical
("without sending", "would be deployed") does not count. Its read-only evidence is a
read verb opening the description, or a phrase such as "dry run" or "does not modify".
The words themselves are in `toolweave.readonly_words`.
"""

from __future__ import annotations

from itertools import pairwise

from toolweave.readonly_words import (
    AUXILIARIES,
    CLAUSE_JOINERS,
    CLAUSE_MARKS,
    EXECUTE,
    NEAR_AUXILIARIES,
    NEGATORS,
    READ_VERBS,
    RETRIEVE_VERBS,
    SAFE_DESCRIPTION,
    SENTENCE_END,
    SIDE_EFFECT,
    SIDE_EFFECT_AS_VERB,
    SIDE_EFFECT_NOUNS,
    SIDE_EFFECT_PAIRS,
    SIDE_EFFECT_PHRASES,
    TOKEN,
    past_lemma,
    present_lemma,
)

__all__ = ["description_evidence"]


def description_evidence(text: str) -> tuple[list[str], list[str]]:
    """Side-effect and read-only evidence in a description."""
    tokens = TOKEN.findall(text.lower())
    side: list[str] = []
    start = 0
    for end in [i for i, t in enumerate(tokens) if t in SENTENCE_END] + [len(tokens)]:
        side += _sentence_side_effects(tokens[start:end])
        start = end + 1
    read: list[str] = []
    if tokens and present_lemma(tokens[0]) in READ_VERBS:
        read.append(tokens[0])
    safe = SAFE_DESCRIPTION.search(text.lower())
    if safe:
        read.append(safe.group(0))
    return side, read


def _sentence_side_effects(words: list[str]) -> list[str]:
    """Side-effect verbs of one sentence that are neither negated nor hypothetical."""
    says_read_only = "readonly" in words or any(
        a == "read" and b == "only" for a, b in pairwise(words)
    )
    found: list[str] = []
    at_verb, seen_comma, depth = True, False, 0
    for i, word in enumerate(words):
        if word in CLAUSE_MARKS:
            depth += {"(": 1, ")": -1}.get(word, 0)
            seen_comma = seen_comma or word == ","
            at_verb = False
            continue
        is_verb = at_verb and depth == 0
        # "a, b and c" lists nouns; "fetch mail and mark it" joins a second verb.
        at_verb = word in CLAUSE_JOINERS and (not seen_comma or words[i - 1] == ",")
        hit = _side_effect_word(words, i, is_verb)
        if hit is None or _negated(words, i):
            continue
        if hit[1] in EXECUTE and says_read_only:
            continue  # "run a read-only query"
        found.append(hit[0])
    return found


def _side_effect_word(words: list[str], i: int, is_verb: bool) -> tuple[str, str] | None:
    """``(evidence, lemma)`` if ``words[i]`` names a side effect here, else None."""
    word = words[i]
    following = words[i + 1] if i + 1 < len(words) else ""
    if (word, following) in SIDE_EFFECT_PHRASES or (
        is_verb and (word, following) in SIDE_EFFECT_PAIRS
    ):
        return f"{word} {following}", word
    lemma = present_lemma(word)
    if lemma is not None:
        if lemma in SIDE_EFFECT or (is_verb and lemma in SIDE_EFFECT_AS_VERB):
            return word, lemma
        return None
    lemma = past_lemma(word)
    if lemma is not None and _passive(words, i):
        return word, lemma  # "messages are removed", "a code is generated and sent"
    if word in SIDE_EFFECT_NOUNS and not RETRIEVE_VERBS.intersection(words[:i]):
        return word, word  # "list notifications" reads them; "show a notification" does not
    return None


def _passive(words: list[str], i: int) -> bool:
    """An auxiliary shortly before: "is removed", "are generated and sent"."""
    if i > 0 and words[i - 1] in NEAR_AUXILIARIES:
        return True
    for word in reversed(words[max(0, i - 4) : i]):
        if word in AUXILIARIES:
            return True
        if word in CLAUSE_MARKS or word in {"but", "that", "which"}:
            return False
    return False


def _negated(words: list[str], i: int) -> bool:
    """A negation or hypothetical just before, within the same clause."""
    for word in reversed(words[max(0, i - 3) : i]):
        if word in NEGATORS:
            return True
        if word in CLAUSE_MARKS or word in {"and", "but", "then"}:
            return False
    return False
