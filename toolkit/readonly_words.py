"""The read-only classifier's vocabulary: its word lists, its patterns, and the lemmas.

The word lists say which words name a side effect (everywhere, or only where a verb
stands), which words read, and which words negate, make passive or join clauses; the
patterns find "dry run"-like phrases and split a description into tokens.
`present_lemma` and `past_lemma` map an inflected form ("sending", "removed") to the
verb in these lists. `toolweave.readonly` and `toolweave.readonly_text` apply them.
"""

from __future__ import annotations

import re

__all__ = [
    "AUXILIARIES",
    "CLAUSE_JOINERS",
    "CLAUSE_MARKS",
    "EXECUTE",
    "NEAR_AUXILIARIES",
    "NEGATORS",
    "READ_NAME_WORDS",
    "READ_VERBS",
    "RETRIEVE_VERBS",
    "SAFE_DESCRIPTION",
    "SAFE_NAME",
    "SENTENCE_END",
    "SIDE_EFFECT",
    "SIDE_EFFECT_AS_VERB",
    "SIDE_EFFECT_NOUNS",
    "SIDE_EFFECT_PAIRS",
    "SIDE_EFFECT_PHRASES",
    "TOKEN",
    "past_lemma",
    "present_lemma",
]


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Side-effect verbs that are rarely anything else: they count wherever they appear.
SIDE_EFFECT = _wordset(
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
SIDE_EFFECT_AS_VERB = _wordset(
    "archive backup block book call change charge claim clear close comment commit copy "
    "deposit download drop email fire fix flag flash follow forward highlight hold issue "
    "kick launch like lock log login logout mount open order pause ping place play pop post "
    "print pull push rate record refresh replace reply request restart resume run schedule "
    "set share ship sign star start stop store switch test transfer turn watch"
)
# Things that reach a person: showing a notification is not reading one.
SIDE_EFFECT_NOUNS = frozenset({"notification", "notifications", "popup", "toast"})
# Verbs that fetch what they name ("list notifications"), unlike "show" or "display".
RETRIEVE_VERBS = frozenset(
    {"get", "gets", "list", "lists", "read", "reads", "fetch", "fetches", "retrieve"}
    | {"retrieves", "search", "searches", "find", "finds", "query", "lookup", "count"}
)
# Running something is as read-only as the thing run: trust it only next to "read-only".
EXECUTE = frozenset({"run", "execute", "evaluate", "eval"})
# Two-word side effects that count wherever they stand: "and shut down the server".
SIDE_EFFECT_PHRASES = frozenset(
    {("shut", "down"), ("kick", "off"), ("tear", "down"), ("spin", "up"), ("roll", "back")}
    | {("take", "down"), ("power", "off"), ("power", "on"), ("turn", "on"), ("turn", "off")}
    | {("wipe", "out"), ("opt", "in"), ("opt", "out")}
)
# Two-word side effects only where a verb stands: "check in for a flight", "log in".
SIDE_EFFECT_PAIRS = SIDE_EFFECT_PHRASES | frozenset(
    {("check", "in"), ("check", "out"), ("log", "in"), ("log", "out"), ("sign", "in")}
    | {("sign", "up"), ("sign", "out")}
)
READ_VERBS = _wordset(
    "analyse analyze browse calculate check compare compute convert count describe detect "
    "diff estimate explain fetch find geocode get inspect lint list look "
    "lookup measure parse peek preview query read render report retrieve return search "
    "show solve summarise summarize translate validate view"
)
READ_NAME_WORDS = READ_VERBS | {"details", "history", "info", "stats", "status", "whoami"}
_IRREGULAR_PAST = {
    "sent": "send", "paid": "pay", "bought": "buy", "sold": "sell", "ran": "run",
    "written": "write", "wrote": "write",
}  # fmt: skip

# Words that make a following side effect negated or hypothetical.
NEGATORS = _wordset(
    "not no never without nothing neither nor would could dry simulate simulates "
    "simulating preview previews doesn't don't won't isn't aren't cannot can't"
)
AUXILIARIES = frozenset({"is", "are", "be", "been", "being", "was", "were"})
# "gets deleted": an auxiliary only right before the participle ("get the assigned user").
NEAR_AUXILIARIES = frozenset({"get", "gets", "got", "getting"})
CLAUSE_JOINERS = frozenset({"and", "or", "then", "also"})
SENTENCE_END = frozenset(".;:!?")
CLAUSE_MARKS = frozenset("(),")
SAFE_NAME = re.compile(r"\b(dry ?run|preview|simulate|simulation)\b")
SAFE_DESCRIPTION = re.compile(
    r"\b(dry[ _-]?run|preview|simulat(?:e|es|ed|ion)|read[ _-]?only|no changes"
    r"|without (?:sending|saving|modifying|changing|writing|deploying|applying|placing)"
    r"|(?:does|do|will) not (?:modify|change|write|send|save|apply)"
    r"|(?:is|are) not (?:applied|executed|sent|saved|changed|modified|written)"
    r"|(?:nothing|neither \w+|no \w+) (?:is|are) (?:placed|sent|saved|changed|modified|written))\b"
)
TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?|[.;:!?,()]")


def present_lemma(word: str) -> str | None:
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
        if lemma in SIDE_EFFECT or lemma in SIDE_EFFECT_AS_VERB or lemma in READ_VERBS:
            return lemma
    return None


def past_lemma(word: str) -> str | None:
    """The side-effect verb behind a past participle: removed, sent, cancelled."""
    if word in _IRREGULAR_PAST:
        return _IRREGULAR_PAST[word]
    if not word.endswith("ed"):
        return None
    stem = word[:-2]
    for lemma in (stem, stem + "e", word[:-1], stem[:-1], stem[:-1] + "y"):
        if lemma in SIDE_EFFECT or lemma in SIDE_EFFECT_AS_VERB:
            return lemma
    return None
