"""Read-only classification: which tools may run before the model has finished the call.

A provisional call runs a tool early, so a wrong "read-only" would repeat a payment or
an email. The classifier therefore promises one thing above all: when it is unsure, the
tool is *not* read-only. Evidence is weighed in this order (docs/read-only.md):

1. a user override (``source="override"``), or an answer given before and carried in
   the ``x-toolweave-read-only`` annotation (`DECIDED_KEY`);
2. words in the name and the description: any side effect (create, ban, "shut down",
   "and marks them as read", "is removed") anywhere in them means not read-only; a
   side-effect word counts only where it stands as a verb (the first word of a name, or
   the first verb after a prefix such as ``browser_``), and not when negated or
   hypothetical ("without sending", "would be deployed") (``source`` "name",
   "description" or "name+description"); `classify_tools` reads a description after
   the lead it shares with other tools of the catalogue, when that lead describes
   their system rather than the tool (`toolweave.readonly_leads`);
3. MCP annotations, unless the caller does not trust them (``trust_annotations``):
   ``destructiveHint: true`` or ``readOnlyHint: false`` means not read-only;
   ``readOnlyHint: true`` means read-only only when step 2 found no side effect
   (``source="annotations"``); hints an adapter filled with defaults do not count;
4. read-only words (get, list, "dry run") with no side effect: read-only; otherwise
   not read-only (``source="default"``).

The vocabulary (word lists, patterns, lemmas) lives in `toolweave.readonly_words` and
the reading of a description in `toolweave.readonly_text`; this module holds the order
of evidence, the annotations' trust policy and the reading of a name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace

from toolweave.errors import ToolSpecError
from toolweave.readonly_leads import shared_leads
from toolweave.readonly_text import description_evidence
from toolweave.readonly_words import (
    CLAUSE_JOINERS,
    EXECUTE,
    READ_NAME_WORDS,
    READ_VERBS,
    RETRIEVE_VERBS,
    SAFE_NAME,
    SIDE_EFFECT,
    SIDE_EFFECT_AS_VERB,
    SIDE_EFFECT_NOUNS,
    SIDE_EFFECT_PAIRS,
)
from toolweave.toolspec import ToolSpec

__all__ = [
    "DECIDED_KEY",
    "DEFAULTED_KEY",
    "ReadOnlyDecision",
    "check_overrides",
    "classify_tool",
    "classify_tools",
    "with_read_only",
]

#: Annotation key an adapter uses to list hints it filled in with defaults (MCP).
DEFAULTED_KEY = "x-defaulted"
#: Annotation key holding a read-only answer toolweave or its user already gave (a tool
#: converted back and forth keeps it); it is final, like an override.
DECIDED_KEY = "x-toolweave-read-only"
_READ_ONLY_KEYS = ("readOnlyHint", "read_only_hint")
_DESTRUCTIVE_KEYS = ("destructiveHint", "destructive_hint")


@dataclass(frozen=True)
class ReadOnlyDecision:
    """Whether tool ``name`` is read-only, where the decision came from, and why.

    ``source`` is one of "override", "annotations", "name", "description",
    "name+description" or "default"; ``reason`` is one sentence naming the evidence.
    """

    name: str
    read_only: bool
    source: str
    reason: str

    def to_dict(self) -> dict[str, object]:
        """Return ``{"name", "read_only", "source", "reason"}`` (the `classify --json` row)."""
        return asdict(self)


def classify_tool(
    spec: ToolSpec,
    overrides: Mapping[str, bool] | None = None,
    *,
    trust_annotations: bool = True,
    shared_lead: str = "",
) -> ReadOnlyDecision:
    """Decide whether ``spec`` is read-only; unsure means not read-only.

    ``overrides`` maps tool names to a forced answer; names of other tools are ignored.
    With ``trust_annotations=False`` the MCP hints are ignored: name and description decide.
    ``shared_lead`` is an opening of the description that other tools share, as
    `toolweave.readonly_leads.shared_leads` finds it: it is not read as the tool's words.
    """
    if shared_lead and not spec.description.startswith(shared_lead):
        raise ValueError("shared_lead must open the tool's description")
    if overrides and spec.name in overrides:
        value = bool(overrides[spec.name])
        reason = f"user override {spec.name}={str(value).lower()}"
        return ReadOnlyDecision(spec.name, value, "override", reason)
    decided = spec.annotations.get(DECIDED_KEY)
    if isinstance(decided, bool):
        reason = f"decided before ({DECIDED_KEY} is {str(decided).lower()})"
        return ReadOnlyDecision(spec.name, decided, "override", reason)
    words = _from_words(spec, shared_lead)
    if not trust_annotations:
        return replace(words, reason=f"{words.reason}; annotations not trusted")
    return _with_annotations(spec, words)


def classify_tools(
    specs: Iterable[ToolSpec],
    overrides: Mapping[str, bool] | None = None,
    *,
    trust_annotations: bool = True,
) -> list[ReadOnlyDecision]:
    """Classify each spec in order; an override naming no tool raises `ToolSpecError`.

    Unlike `classify_tool` on each spec, a description's lead that other specs share
    word for word (a system's preamble) is not read as the tool's own words: see
    `toolweave.readonly_leads`.
    """
    specs = list(specs)
    check_overrides(overrides, [s.name for s in specs])
    leads = shared_leads([s.description for s in specs])
    return [
        classify_tool(s, overrides, trust_annotations=trust_annotations, shared_lead=lead)
        for s, lead in zip(specs, leads, strict=True)
    ]


def check_overrides(overrides: Mapping[str, bool] | None, names: Iterable[str]) -> None:
    """Raise `ToolSpecError` naming every override key that is not one of ``names``."""
    unknown = sorted(set(overrides or {}) - set(names))
    if unknown:
        raise ToolSpecError(None, f"read-only overrides name unknown tools: {', '.join(unknown)}")


def with_read_only(
    specs: Iterable[ToolSpec], overrides: Mapping[str, bool] | None = None
) -> list[ToolSpec]:
    """Return copies of ``specs`` with ``read_only`` set by `classify_tools`."""
    specs = list(specs)
    decisions = classify_tools(specs, overrides)
    return [replace(s, read_only=d.read_only) for s, d in zip(specs, decisions, strict=True)]


# ---------------------------------------------------------------------- annotations
def _with_annotations(spec: ToolSpec, words: ReadOnlyDecision) -> ReadOnlyDecision:
    """The trust policy: a hint may only make a tool read-only when nothing contradicts it."""
    # Hints an adapter filled in with the MCP spec's defaults are not the server's claim.
    defaulted = spec.annotations.get(DEFAULTED_KEY) or ()
    hints = {k: v for k, v in spec.annotations.items() if k not in defaulted}
    read_key = next((k for k in _READ_ONLY_KEYS if isinstance(hints.get(k), bool)), None)
    destructive_key = next((k for k in _DESTRUCTIVE_KEYS if hints.get(k) is True), None)
    if destructive_key is not None:
        also = f" (beats {read_key} true)" if read_key and hints[read_key] else ""
        reason = f"annotation {destructive_key} is true{also}"
        return ReadOnlyDecision(spec.name, False, "annotations", reason)
    if read_key is None:
        return words
    if hints[read_key] is False:
        return ReadOnlyDecision(spec.name, False, "annotations", f"annotation {read_key} is false")
    if words.source != "default" and not words.read_only:
        reason = f"{words.reason}, which contradicts annotation {read_key} true"
        return replace(words, reason=reason)
    reason = f"annotation {read_key} is true, and no side effect is mentioned"
    return ReadOnlyDecision(spec.name, True, "annotations", reason)


# ---------------------------------------------------------------------- words
def _from_words(spec: ToolSpec, lead: str) -> ReadOnlyDecision:
    """Name and description evidence; ``lead`` is a shared opening of the description
    that is not the tool's own words."""
    name_words = _name_words(spec.name)
    name_side, name_read = _name_evidence(name_words)
    desc_side, desc_read = description_evidence(spec.description[len(lead) :])
    after = f" (after the lead shared with other tools: {_quote(lead)})" if lead else ""
    if name_side or desc_side:
        source, facts = _evidence(name_side, desc_side)
        return ReadOnlyDecision(spec.name, False, source, f"{facts} (side effect){after}")
    if name_read or desc_read:
        source, facts = _evidence(name_read, desc_read)
        reason = f"{facts} (read-only), and no side effect is mentioned{after}"
        return ReadOnlyDecision(spec.name, True, source, reason)
    reason = f"unsure: no read-only or side-effect word in name or description{after}"
    return ReadOnlyDecision(spec.name, False, "default", reason)


def _quote(lead: str, limit: int = 40) -> str:
    """``'This tool belongs to the Gorilla file...'``: a lead's opening, for a reason."""
    text = " ".join(lead.split())
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _evidence(in_name: list[str], in_description: list[str]) -> tuple[str, str]:
    """The source label and a sentence: "name has 'get'; description says 'fetch'"."""
    found = [("name", "name has", in_name), ("description", "description says", in_description)]
    found = [f for f in found if f[2]]
    facts = [
        f"{says} " + ", ".join(f"'{w}'" for w in dict.fromkeys(words)) for _, says, words in found
    ]
    return "+".join(where for where, _, _ in found), "; ".join(facts)


def _name_words(name: str) -> list[str]:
    """Words of the action part of a name: ``github.createIssue`` -> ["create", "issue"]."""
    action = name.rsplit(".", 1)[-1]
    parts = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", action)
    return [p.lower() for p in parts]


def _name_evidence(words: list[str]) -> tuple[list[str], list[str]]:
    """Side-effect and read-only words of a name; "preview"/"dry run" cancel side effects."""
    side: list[str] = []
    for i, word in enumerate(words):
        pair = (word, words[i + 1]) if i + 1 < len(words) else None
        if pair is not None and pair in SIDE_EFFECT_PAIRS:
            side.append(" ".join(pair))
        elif (
            word in SIDE_EFFECT
            or (word in SIDE_EFFECT_NOUNS and not RETRIEVE_VERBS.intersection(words[:i]))
            or (word in SIDE_EFFECT_AS_VERB | EXECUTE and _name_verb_at(words, i))
        ):
            side.append(word)
    safe = SAFE_NAME.search(" ".join(words))
    if safe and not CLAUSE_JOINERS.intersection(words):
        # "preview_send", "dry_run_deploy": the side effect is what is previewed
        # ("preview_and_send" does both).
        return [], [safe.group(0)]
    read = [w for w in words if w in READ_NAME_WORDS]
    return side, ([] if side else read)


def _name_verb_at(words: list[str], i: int) -> bool:
    """Whether ``words[i]`` stands where a name's verb stands.

    That is the first word, a word after "and"/"or"/"then", or the first verb after a
    prefix ("browser_clear_history", "git_commit"); but a word followed by a read verb
    is that verb's object ("issue_read", "pull_request_read").
    """
    verbs = READ_VERBS | SIDE_EFFECT | SIDE_EFFECT_AS_VERB | EXECUTE
    first_verb = next((j for j, w in enumerate(words) if w in verbs), None)
    if not (i == 0 or words[i - 1] in CLAUSE_JOINERS or i == first_verb):
        return False
    for later in words[i + 1 :]:
        if later in CLAUSE_JOINERS:
            return True
        if later in READ_VERBS:
            return False
    return True
