"""What a decoder hands back: the calls, the text, the tokens and the cost of getting them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from toolweave.toolspec import ToolCall

__all__ = ["CallResult", "CallStats", "InvalidCall", "NearTie"]


@dataclass(frozen=True)
class NearTie:
    """A position decided on the reference path because its best token led the runner-up
    by `gap`, within twice the engine's logit bound. `position` counts output tokens.

    `kind` says why: "row", a batched row of a verification pass could not decide it, so
    the pass `jump` (or plain decoding) makes there decided it; "rewritten", that pass read
    KV cells a verification pass had written and could not decide it either, so those
    cells were first written again in the reference decoder's own passes; "drift", the
    same, but rewriting would have cost more passes than allowed, so that pass decided it
    as it was: the one kind of position where the output may differ from the reference
    decoder's (by a choice between two tokens within the kernels' rounding)."""

    position: int
    gap: float
    kind: str = "row"


@dataclass(frozen=True)
class CallStats:
    """Cost of one response.

    `forward_passes` counts every llama_decode call including the prompt prefill;
    `decode_passes` the passes after the prompt (the ones a faster decoder removes);
    `prefill_tokens` the prompt tokens plus every token written without being decoded.
    Times are wall-clock milliseconds measured from the end of the prompt prefill
    (`prompt_ms` is that prefill), so modes sharing a prompt compare their own work;
    `cached_tokens` are prompt tokens whose KV state was reused from an earlier request.
    `logit_bound` is how far a batched row may sit from a serial step on this engine
    (None when nothing was verified); `near_ties` are the verified positions it left to
    the reference path. `forecast_*` count forecast draft tokens verified and accepted;
    `session_*` the part of them drafted from the session's earlier messages.
    """

    forward_passes: int = 0
    decode_passes: int = 0
    prefill_tokens: int = 0
    decoded_tokens: int = 0
    output_tokens: int = 0
    prompt_tokens: int = 0
    prompt_ms: float = 0.0
    cached_tokens: int = 0
    time_to_tool_ms: float | None = None
    total_ms: float = 0.0
    phases_ms: Mapping[str, float] = field(default_factory=dict)
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    forecast_drafted_tokens: int = 0
    forecast_accepted_tokens: int = 0
    session_drafted_tokens: int = 0
    session_accepted_tokens: int = 0
    logit_bound: float | None = None
    near_ties: tuple[NearTie, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["phases_ms"] = dict(self.phases_ms)
        return d


@dataclass(frozen=True)
class InvalidCall:
    """A call the model wrote that does not parse or does not fit the tool's schema."""

    text: str
    error: str
    name: str | None = None


@dataclass(frozen=True)
class CallResult:
    """The outcome of one tool-calling response, the same type for every mode."""

    mode: str
    calls: tuple[ToolCall, ...]
    text: str
    tokens: tuple[int, ...]
    stats: CallStats
    provisional: tuple[ToolCall, ...] = ()
    invalid: tuple[InvalidCall, ...] = ()
    finish_reason: str = "stop"

    def to_json(self) -> dict[str, Any]:
        """The shape `toolweave call --json` prints."""
        return {
            "mode": self.mode,
            "calls": [c.to_dict() for c in self.calls],
            "provisional": [c.to_dict() for c in self.provisional],
            "invalid": [asdict(i) for i in self.invalid],
            "text": self.text,
            "finish_reason": self.finish_reason,
            "stats": self.stats.to_dict(),
        }
