"""The line `toolweave call` prints under a call: what was reused, prefilled and decoded."""

from __future__ import annotations

from rich.console import Console

from toolweave.adapters.cli.call import render_result
from toolweave.results import CallResult, CallStats
from toolweave.toolspec import ToolCall


def _shown(stats: CallStats) -> str:
    call = ToolCall("get_current_weather", {"location": "Zürich"})
    result = CallResult(mode="fast", calls=(call,), text="", tokens=(), stats=stats)
    console = Console(record=True, width=300, color_system=None)
    render_result(result, console)
    return console.export_text()


def test_the_stats_line_tells_the_prompt_from_the_output_it_prefilled() -> None:
    # A restored prompt of 875 tokens is not 900 tokens prefilled: the line keeps the
    # prompt apart from the 25 tokens the skeleton wrote without decoding them.
    stats = CallStats(
        forward_passes=10,
        decode_passes=9,
        prefill_tokens=900,
        decoded_tokens=9,
        prompt_tokens=875,
        cached_tokens=874,
        time_to_tool_ms=225.4,
        total_ms=225.4,
    )
    text = _shown(stats)
    assert 'call get_current_weather(location="Zürich")' in text
    assert "875 prompt tokens (874 reused), 25 prefilled / 9 decoded output tokens" in text
    assert "tool at 225 ms" in text


def test_no_tool_time_is_a_dash() -> None:
    stats = CallStats(forward_passes=3, decode_passes=2, prefill_tokens=40, prompt_tokens=40)
    assert "40 prompt tokens (0 reused), 0 prefilled" in _shown(stats)
    assert "tool at -" in _shown(stats)
