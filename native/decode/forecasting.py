"""Forecast drafts: what a response is expected to write next, in the decoder's tokens.

Four sources, the first that has anything wins: the opening of the next call for the
tool `toolweave.drafting.forecast.CallForecast` ranks first (between calls); what
followed the same tokens earlier in this response (a repeated call); what followed the
same text in the request (a value being copied); what followed it earlier in the
session (`session_texts`: the conversation's earlier calls, results and turns, so an
argument copied from an earlier tool result or call is drafted whole). Without a
`CallForecast` only the session source drafts. A draft is only a guess: the response
decoder verifies it (`toolweave.native.decode.verify`) before anything is committed,
and each source's acceptance is learned apart (`forecast:<source>`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from toolweave.drafting.forecast import CallForecast, continuation
from toolweave.formats import CallFormat, SyntaxFormat
from toolweave.native.constraints import TokenMatcher
from toolweave.native.decode.verify import grammar_prefix
from toolweave.native.engine import Engine
from toolweave.toolspec import ToolCall, ToolSpec

__all__ = ["ForecastDraft", "Forecaster", "RepeatIndex", "text_draft"]

#: (source, draft tokens, indices of the draft tokens the model chooses).
ForecastDraft = tuple[str, list[int], list[int]]


class RepeatIndex:
    """Where each pair of adjacent tokens occurred in a response, to find what followed
    its latest tokens before."""

    def __init__(self) -> None:
        self._pairs: dict[tuple[int, int], list[int]] = {}

    def add(self, tokens: Sequence[int], token: int) -> None:
        """Note that `token` follows `tokens` (call before appending it)."""
        if tokens:
            self._pairs.setdefault((tokens[-1], token), []).append(len(tokens) - 1)

    def continuation(self, tokens: Sequence[int], budget: int, longest: int = 8) -> list[int]:
        """The tokens that followed the longest earlier match (2+ tokens) of the last
        tokens of `tokens`; the latest match wins ties."""
        n = len(tokens)
        if n < 3:
            return []
        best_len, best_end = 0, -1
        for start in reversed(self._pairs.get((tokens[-2], tokens[-1]), ())):
            end = start + 2  # the match covers tokens[start:end] == tokens[n-2:n]
            if end >= n:
                continue
            length = 2
            while (
                length < longest
                and start - (length - 1) >= 0
                and tokens[start - (length - 1)] == tokens[n - 1 - length]
            ):
                length += 1
            if length > best_len:
                best_len, best_end = length, end
        return list(tokens[best_end : best_end + budget]) if best_end >= 0 else []


def text_draft(
    engine: Engine, matcher: TokenMatcher, text: str, budget: int
) -> tuple[list[int], list[int]]:
    """`text` as the decoder would write it from `matcher`'s state: a run the grammar
    forces in the grammar's own tokens, the rest as the tokenizer splits it; with the
    indices of the tokens the model chooses. Stops where the grammar or a forced run
    disagrees with the text."""
    probe = matcher.copy()
    out: list[int] = []
    choices: list[int] = []
    while text and len(out) < budget and not probe.stopped:
        forced = probe.forced()
        if forced:
            forced_text = engine.detokenize(forced)
            if not text.startswith(forced_text) or len(out) + len(forced) > budget:
                break
            probe.consume_many(forced)
            out.extend(forced)
            text = text[len(forced_text) :]
            continue
        token = engine.tokenize(text, parse_special=False)[0]
        try:
            piece = engine.token_bytes(token).decode("utf-8", errors="strict")
        except UnicodeDecodeError:
            break  # a token ending inside a character: the draft stops before it
        if not piece or not text.startswith(piece) or not probe.accepts_prefix([token]):
            break
        probe.consume(token)
        choices.append(len(out))
        out.append(token)
        text = text[len(piece) :]
    return out, choices


class Forecaster:
    """The forecast drafts of one response, from its request and its tools' call heads
    (`heads[name]`: the call text up to the first argument key)."""

    def __init__(
        self,
        engine: Engine,
        fmt: CallFormat,
        tools: Mapping[str, ToolSpec],
        heads: Mapping[str, str],
        forecast: CallForecast | None,
        request_text: str,
        session_texts: Sequence[str] = (),
    ) -> None:
        self.engine = engine
        self.fmt = fmt
        self.tools = tools
        self.heads = heads
        self.forecast = forecast
        self.request_text = request_text
        # Latest first: `continuation` searches the sources in order.
        self.session_texts = tuple(reversed(session_texts))

    def draft(
        self,
        matcher: TokenMatcher,
        *,
        text: str,
        call_start: int,
        in_call: bool,
        calls: Sequence[ToolCall],
        tokens: Sequence[int],
        repeats: RepeatIndex,
        budget: int,
    ) -> ForecastDraft:
        """The draft expected after the response's `text` (its `tokens`, the current call
        starting at `call_start`; `in_call` once its tool is known, `calls` finished)."""
        if self.forecast is None:
            return self._session(matcher, text, in_call, budget)
        if not in_call:
            raw = text[call_start:]
            for name in self.forecast.candidates(calls):
                spec = self.tools[name]
                # the first required key is fixed by the skeleton: draft it too
                key = json.dumps(spec.required[0], ensure_ascii=False) if spec.required else ""
                head = self._call_head(name, later=bool(calls), index=len(calls))
                candidate = head + (key + ":" if key else "")
                if candidate.startswith(raw) and len(candidate) > len(raw):
                    out, choices = text_draft(self.engine, matcher, candidate[len(raw) :], budget)
                    return "call", out, choices
            return "call", [], []
        own = repeats.continuation(tokens, budget)
        if own:
            return ("repeat", *grammar_prefix(matcher, own))
        rest = continuation((self.request_text,), text)
        if rest:
            return ("request", *text_draft(self.engine, matcher, rest, budget))
        return self._session(matcher, text, in_call, budget)

    def _call_head(self, name: str, *, later: bool, index: int = 0) -> str:
        """A call's text up to its first key: a later call starts with the separator,
        and in a syntax read off a template the reply's opening marker (which the head
        starts with) is written once, before the first call only."""
        head = self.heads[name]
        if not later:
            return head
        if isinstance(self.fmt, SyntaxFormat) and self.fmt.syntax.positional and index:
            head = self.fmt.head_at(name, index)  # the call's id is its position's
        if isinstance(self.fmt, SyntaxFormat):
            opening = self.fmt.syntax.open
            if opening and head.startswith(opening):
                head = head[len(opening) :]
            return self.fmt.syntax.separator + head
        return self.fmt.separator + head

    def _session(
        self, matcher: TokenMatcher, text: str, in_call: bool, budget: int
    ) -> ForecastDraft:
        """What followed the response's latest text earlier in the session (inside a
        call only: between calls the grammar forces most of what comes)."""
        if not in_call or not self.session_texts:
            return "session", [], []
        rest = continuation(self.session_texts, text)
        if not rest:
            return "session", [], []
        return ("session", *text_draft(self.engine, matcher, rest, budget))
