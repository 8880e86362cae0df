"""What a `ToolCaller` reports for one decoded response: its calls checked against the
tools (`checked_calls`, `parsed_calls`), its cost (`call_stats`), and the `CallResult`
holding both (`call_result`), which keeps the finished calls of an output cut at
max_tokens."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from toolweave.errors import CallFormatError, ToolSpecError
from toolweave.formats import CallFormat
from toolweave.native.decode.records import DecodeTotals
from toolweave.results import CallResult, CallStats, InvalidCall
from toolweave.toolspec import ToolCall, ToolSpec

__all__ = ["call_result", "call_stats", "checked_calls", "parsed_calls"]


def checked_calls(
    tools: Mapping[str, ToolSpec], parsed: Sequence[ToolCall], text: str
) -> tuple[list[ToolCall], list[InvalidCall]]:
    """`parsed` (read off `text`) split into calls of known `tools` (by name) with valid
    arguments and the rest."""
    calls: list[ToolCall] = []
    invalid: list[InvalidCall] = []
    for c in parsed:
        spec = tools.get(c.name)
        if spec is None:
            invalid.append(InvalidCall(text=text, error=f"unknown tool {c.name!r}", name=c.name))
            continue
        try:
            spec.validate_call(c.arguments)
        except ToolSpecError as exc:
            invalid.append(InvalidCall(text=text, error=str(exc), name=c.name))
            continue
        calls.append(c)
    return calls, invalid


def parsed_calls(
    fmt: CallFormat, tools: Mapping[str, ToolSpec], text: str
) -> tuple[list[ToolCall], list[InvalidCall]]:
    """Parse `text` in `fmt`; split valid calls of `tools` from invalid ones."""
    try:
        parsed = fmt.parse(text)
    except CallFormatError as exc:
        return [], [InvalidCall(text=text, error=str(exc))]
    return checked_calls(tools, parsed, text)


def call_result(
    fmt: CallFormat,
    tools: Mapping[str, ToolSpec],
    mode: str,
    text: str,
    tokens: Sequence[int],
    reason: str,
    stats: CallStats,
    provisional: Sequence[ToolCall] = (),
    complete: Sequence[ToolCall] = (),
) -> CallResult:
    """The result of a response `text` (its `tokens`) decoded in `mode`, ended for
    `reason`. `complete`: the calls the decoder saw finished; when the output is cut at
    max_tokens inside a later call, so the text no longer parses, those are kept
    (checked like any call) instead of losing them with the cut one."""
    calls, invalid = parsed_calls(fmt, tools, text)
    if reason == "length":
        if not calls and complete:
            calls, invalid = checked_calls(tools, complete, text)
        invalid.append(InvalidCall(text=text, error="output truncated at max_tokens"))
    return CallResult(
        mode=mode,
        calls=tuple(calls),
        text=text,
        tokens=tuple(tokens),
        stats=stats,
        provisional=tuple(provisional),
        invalid=tuple(invalid),
        finish_reason=reason,
    )


def call_stats(
    totals: DecodeTotals,
    *,
    passes: int,
    prefill_passes: int,
    prompt_tokens: int,
    output_tokens: int,
    prompt_ms: float,
    cached_tokens: int,
    time_to_tool_ms: float | None,
    time_to_final_ms: float | None,
    total_ms: float,
    logit_bound: float | None,
) -> CallStats:
    """The cost of one response from what its decode loop did (`totals`): `passes`
    forward passes in all, of which `prefill_passes` prefilled the prompt before its last
    pass (which every mode pays); `time_to_final_ms`, where a call was finished, is
    reported as the phase ``time_to_final_call``."""
    phases = dict(totals.phases_ms)
    if time_to_final_ms is not None:
        phases["time_to_final_call"] = time_to_final_ms
    return CallStats(
        forward_passes=passes,
        decode_passes=passes - 1 - prefill_passes,
        prefill_tokens=prompt_tokens + totals.prefilled,
        decoded_tokens=totals.decoded,
        output_tokens=output_tokens,
        prompt_tokens=prompt_tokens,
        prompt_ms=prompt_ms,
        cached_tokens=cached_tokens,
        time_to_tool_ms=time_to_tool_ms,
        total_ms=total_ms,
        phases_ms=phases,
        drafted_tokens=totals.drafted,
        accepted_tokens=totals.accepted,
        forecast_drafted_tokens=totals.forecast_drafted,
        forecast_accepted_tokens=totals.forecast_accepted,
        session_drafted_tokens=totals.session_drafted,
        session_accepted_tokens=totals.session_accepted,
        logit_bound=logit_bound,
        near_ties=tuple(totals.near_ties),
    )
