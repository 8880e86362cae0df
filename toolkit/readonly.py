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
   "description" or "name+description");
3. MCP annotations, unless the caller does not trust them (``trust_annotations``):
   ``destructiveHint: true`` or ``readOnlyHint: false`` means not read-only;
   ``readOnlyHint: true`` means read-only only when step 2 found no side effect
   (``source="annotations"``); hints an adapter filled with defaults do not count;
4. read-only words (get, list, "dry run") with no side effect: read-only; otherwise
   not read-only (``source="default"``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from itertools import pairwise

from toolweave.errors import ToolSpecError
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


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Side-effect verbs that are rarely anything else: they count wherever they appear.
_SIDE_EFFECT = _wordset(
    "accept acknowledge acquire add annotate apply approve assign authenticate ban "
    "broadcast buy cancel checkout cleanup confirm create decline decrement delete deliver "
    "deploy dequeue destroy detach disable dismiss downvote edit enable enqueue enroll "
    "erase execute grant increment insert install invite kill mark merge modify move mute "
    "notify overwrite pay provision prune publish purchase purge reboot redeem refund "
    "register reject remove rename reserve reset respond restore retweet revert revoke "
    "rollback rotate save sell send snooze submit shutdown subscribe sync terminate toggle "
    "trigger truncate unban uninstall unlock unmute unsubscribe update upload upvote "
    "withdraw wipe write"
)
# Also common nouns ("the order status", "commit logs"): count only where a verb stands.
_SIDE_EFFECT_AS_VERB = _wordset(
    "archive backup block book call change charge claim clear close comment commit copy "
    "deposit download drop email fire fix flag flash follow forward highlight hold issue "
    "kick launch like lock log login logout mount open order pause ping place play pop post "
    "print pull push rate record refresh replace reply request restart resume run schedule "
    "set share ship sign star start stop store switch test transfer turn watch"
)
# Things that reach a person: showing a notification is not reading one.
_SIDE_EFFECT_NOUNS = frozenset({"notification", "notifications", "popup", "toast"})
# Verbs that fetch what they name ("list notifications"), unlike "show" or "display".
_RETRIEVE_VERBS = frozenset(
    {"get", "gets", "list", "lists", "read", "reads", "fetch", "fetches", "retrieve"}
    | {"retrieves", "search", "searches", "find", "finds", "query", "lookup", "count"}
)
# Running something is as read-only as the thing run: trust it only next to "read-only".
_EXECUTE = frozenset({"run", "execute", "evaluate", "eval"})
# Two-word side effects that count wherever they stand: "and shut down the server".
_SIDE_EFFECT_PHRASES = frozenset(
    {("shut", "down"), ("kick", "off"), ("tear", "down"), ("spin", "up"), ("roll", "back")}
    | {("take", "down"), ("power", "off"), ("power", "on"), ("turn", "on"), ("turn", "off")}
    | {("wipe", "out"), ("opt", "in"), ("opt", "out")}
)
# Two-word side effects only where a verb stands: "check in for a flight", "log in".
_SIDE_EFFECT_PAIRS = _SIDE_EFFECT_PHRASES | frozenset(
    {("check", "in"), ("check", "out"), ("log", "in"), ("log", "out"), ("sign", "in")}
    | {("sign", "up"), ("sign", "out")}
)
_READ_VERBS = _wordset(
    "analyse analyze browse calculate check compare compute convert count describe detect "
    "diff estimate explain fetch find geocode get inspect lint list look "
    "lookup measure parse peek preview query read render report retrieve return search "
    "show solve summarise summarize translate validate view"
)
_READ_NAME_WORDS = _READ_VERBS | {"details", "history", "info", "stats", "status", "whoami"}
_IRREGULAR_PAST = {
    "sent": "send", "paid": "pay", "bought": "buy", "sold": "sell", "ran": "run",
    "written": "write", "wrote": "write",
}  # fmt: skip

# Words that make a following side effect negated or hypothetical.
_NEGATORS = _wordset(
    "not no never without nothing neither nor would could dry simulate simulates "
    "simulating preview previews doesn't don't won't isn't aren't cannot can't"
)
_AUXILIARIES = frozenset({"is", "are", "be", "been", "being", "was", "were"})
# "gets deleted": an auxiliary only right before the participle ("get the assigned user").
_NEAR_AUXILIARIES = frozenset({"get", "gets", "got", "getting"})
_CLAUSE_JOINERS = frozenset({"and", "or", "then", "also"})
_SENTENCE_END = frozenset(".;:!?")
_CLAUSE_MARKS = frozenset("(),")
_SAFE_NAME = re.compile(r"\b(dry ?run|preview|simulate|simulation)\b")
_SAFE_DESCRIPTION = re.compile(
    r"\b(dry[ _-]?run|preview|simulat(?:e|es|ed|ion)|read[ _-]?only|no changes"
    r"|without (?:sending|saving|modifying|changing|writing|deploying|applying|placing)"
    r"|(?:does|do|will) not (?:modify|change|write|send|save|apply)"
    r"|(?:is|are) not (?:applied|executed|sent|saved|changed|modified|written)"
    r"|(?:nothing|neither \w+|no \w+) (?:is|are) (?:placed|sent|saved|changed|modified|written))\b"
)
_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?|[.;:!?,()]")


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
) -> ReadOnlyDecision:
    """Decide whether ``spec`` is read-only; unsure means not read-only.

    ``overrides`` maps tool names to a forced answer; names of other tools are ignored.
    With ``trust_annotations=False`` the MCP hints are ignored: name and description decide.
    """
    if overrides and spec.name in overrides:
        value = bool(overrides[spec.name])
        reason = f"user override {spec.name}={str(value).lower()}"
        return ReadOnlyDecision(spec.name, value, "override", reason)
    decided = spec.annotations.get(DECIDED_KEY)
    if isinstance(decided, bool):
        reason = f"decided before ({DECIDED_KEY} is {str(decided).lower()})"
        return ReadOnlyDecision(spec.name, decided, "override", reason)
    words = _from_words(spec)
    if not trust_annotations:
        return replace(words, reason=f"{words.reason}; annotations not trusted")
    return _with_annotations(spec, words)


def classify_tools(
    specs: Iterable[ToolSpec],
    overrides: Mapping[str, bool] | None = None,
    *,
    trust_annotations: bool = True,
) -> list[ReadOnlyDecision]:
    """Classify each spec in order; an override naming no tool raises `ToolSpecError`."""
    specs = list(specs)
    check_overrides(overrides, [s.name for s in specs])
    return [classify_tool(s, overrides, trust_annotations=trust_annotations) for s in specs]


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
def _from_words(spec: ToolSpec) -> ReadOnlyDecision:
    name_words = _name_words(spec.name)
    name_side, name_read = _name_evidence(name_words)
    desc_side, desc_read = _description_evidence(spec.description)
    if name_side or desc_side:
        source, facts = _evidence(name_side, desc_side)
        return ReadOnlyDecision(spec.name, False, source, f"{facts} (side effect)")
    if name_read or desc_read:
        source, facts = _evidence(name_read, desc_read)
        reason = f"{facts} (read-only), and no side effect is mentioned"
        return ReadOnlyDecision(spec.name, True, source, reason)
    reason = "unsure: no read-only or side-effect word in name or description"
    return ReadOnlyDecision(spec.name, False, "default", reason)


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
        if pair in _SIDE_EFFECT_PAIRS:
            side.append(" ".join(pair))
        elif (
            word in _SIDE_EFFECT
            or (word in _SIDE_EFFECT_NOUNS and not _RETRIEVE_VERBS.intersection(words[:i]))
            or (word in _SIDE_EFFECT_AS_VERB | _EXECUTE and _name_verb_at(words, i))
        ):
            side.append(word)
    safe = _SAFE_NAME.search(" ".join(words))
    if safe and not _CLAUSE_JOINERS.intersection(words):
        # "preview_send", "dry_run_deploy": the side effect is what is previewed
        # ("preview_and_send" does both).
        return [], [safe.group(0)]
    read = [w for w in words if w in _READ_NAME_WORDS]
    return side, ([] if side else read)


def _name_verb_at(words: list[str], i: int) -> bool:
    """Whether ``words[i]`` stands where a name's verb stands.

    That is the first word, a word after "and"/"or"/"then", or the first verb after a
    prefix ("browser_clear_history", "git_commit"); but a word followed by a read verb
    is that verb's object ("issue_read", "pull_request_read").
    """
    verbs = _READ_VERBS | _SIDE_EFFECT | _SIDE_EFFECT_AS_VERB | _EXECUTE
    first_verb = next((j for j, w in enumerate(words) if w in verbs), None)
    if not (i == 0 or words[i - 1] in _CLAUSE_JOINERS or i == first_verb):
        return False
    for later in words[i + 1 :]:
        if later in _CLAUSE_JOINERS:
            return True
        if later in _READ_VERBS:
            return False
    return True


def _description_evidence(text: str) -> tuple[list[str], list[str]]:
    """Side-effect and read-only evidence in a description."""
    tokens = _TOKEN.findall(text.lower())
    side: list[str] = []
    start = 0
    for end in [i for i, t in enumerate(tokens) if t in _SENTENCE_END] + [len(tokens)]:
        side += _sentence_side_effects(tokens[start:end])
        start = end + 1
    read: list[str] = []
    if tokens and _present_lemma(tokens[0]) in _READ_VERBS:
        read.append(tokens[0])
    safe = _SAFE_DESCRIPTION.search(text.lower())
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
        if word in _CLAUSE_MARKS:
            depth += {"(": 1, ")": -1}.get(word, 0)
            seen_comma = seen_comma or word == ","
            at_verb = False
            continue
        is_verb = at_verb and depth == 0
        # "a, b and c" lists nouns; "fetch mail and mark it" joins a second verb.
        at_verb = word in _CLAUSE_JOINERS and (not seen_comma or words[i - 1] == ",")
        hit = _side_effect_word(words, i, is_verb)
        if hit is None or _negated(words, i):
            continue
        if hit[1] in _EXECUTE and says_read_only:
            continue  # "run a read-only query"
        found.append(hit[0])
    return found


def _side_effect_word(words: list[str], i: int, is_verb: bool) -> tuple[str, str] | None:
    """``(evidence, lemma)`` if ``words[i]`` names a side effect here, else None."""
    word = words[i]
    following = words[i + 1] if i + 1 < len(words) else ""
    if (word, following) in _SIDE_EFFECT_PHRASES or (
        is_verb and (word, following) in _SIDE_EFFECT_PAIRS
    ):
        return f"{word} {following}", word
    lemma = _present_lemma(word)
    if lemma is not None:
        if lemma in _SIDE_EFFECT or (is_verb and lemma in _SIDE_EFFECT_AS_VERB):
            return word, lemma
        return None
    lemma = _past_lemma(word)
    if lemma is not None and _passive(words, i):
        return word, lemma  # "messages are removed", "a code is generated and sent"
    if word in _SIDE_EFFECT_NOUNS and not _RETRIEVE_VERBS.intersection(words[:i]):
        return word, word  # "list notifications" reads them; "show a notification" does not
    return None


def _passive(words: list[str], i: int) -> bool:
    """An auxiliary shortly before: "is removed", "are generated and sent"."""
    if i > 0 and words[i - 1] in _NEAR_AUXILIARIES:
        return True
    for word in reversed(words[max(0, i - 4) : i]):
        if word in _AUXILIARIES:
            return True
        if word in _CLAUSE_MARKS or word in {"but", "that", "which"}:
            return False
    return False


def _negated(words: list[str], i: int) -> bool:
    """A negation or hypothetical just before, within the same clause."""
    for word in reversed(words[max(0, i - 3) : i]):
        if word in _NEGATORS:
            return True
        if word in _CLAUSE_MARKS or word in {"and", "but", "then"}:
            return False
    return False


def _present_lemma(word: str) -> str | None:
    """The side-effect or read verb behind a present form: sends, sending, creating."""
    candidates = [word]
    if word.endswith("ies"):
        candidates.append(word[:-3] + "y")
    if word.endswith("es"):
        candidates.append(word[:-2])
    if word.endswith("s"):
        candidates.append(word[:-1])
    if word.endswith("ing"):
        stem = word[:-3]
        candidates += [stem, stem + "e", stem[:-1]]  # sending, creating, stopping
    for lemma in candidates:
        if lemma in _SIDE_EFFECT or lemma in _SIDE_EFFECT_AS_VERB or lemma in _READ_VERBS:
            return lemma
    return None


def _past_lemma(word: str) -> str | None:
    """The side-effect verb behind a past participle: removed, sent, cancelled."""
    if word in _IRREGULAR_PAST:
        return _IRREGULAR_PAST[word]
    if not word.endswith("ed"):
        return None
    stem = word[:-2]
    for lemma in (stem, stem + "e", word[:-1], stem[:-1], stem[:-1] + "y"):
        if lemma in _SIDE_EFFECT or lemma in _SIDE_EFFECT_AS_VERB:
            return lemma
    return None
