"""SchemaFill forecasts: BM25 tool ranking, the drafters, and verification on BFCL."""

from __future__ import annotations

import pytest
from reference_check import assert_same_tokens

from toolweave.drafting.forecast import CallForecast, ToolRanking, continuation, tool_document
from toolweave.eval.bfcl import sample_cases
from toolweave.native.caller import ToolCaller
from toolweave.native.engine import Engine
from toolweave.toolspec import ToolCall, ToolSpec


def _tool(name: str, description: str, **props: str) -> ToolSpec:
    return ToolSpec.from_dict(
        {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {k: {"type": "string", "description": v} for k, v in props.items()},
                "required": list(props),
            },
        }
    )


TOOLS = [
    _tool("send_email", "Send an email message.", recipient="Address", body="Text"),
    _tool("getCurrentWeather", "Current conditions.", city="The city, e.g. London"),
    _tool("play_song", "Play a song by an artist.", artist="Who sings it"),
]


def test_tool_document_reads_identifiers_as_words() -> None:
    doc = tool_document(TOOLS[1])
    assert doc.startswith("get Current Weather Current conditions.")
    assert "city" in doc and "London" in doc


def test_bm25_ranks_the_tool_the_request_talks_about_first() -> None:
    ranking = ToolRanking(TOOLS)
    assert ranking.rank("What's the weather in London right now?")[0] == "getCurrentWeather"
    assert ranking.rank("play something by the artist Adele")[0] == "play_song"
    # no shared word: the catalogue order, deterministically
    assert ranking.rank("zzz qqq") == [t.name for t in TOOLS]
    assert ranking.rank("") == [t.name for t in TOOLS]


def test_the_previous_calls_tool_comes_first() -> None:
    forecast = CallForecast.for_request(ToolRanking(TOOLS), "the weather in Paris, please")
    assert forecast.candidates([])[0] == "getCurrentWeather"
    after = forecast.candidates([ToolCall("play_song", {"artist": "x"})])
    assert after[0] == "play_song" and sorted(after) == sorted(t.name for t in TOOLS)
    assert forecast.candidates([ToolCall("unknown", {})]) == list(forecast.ranking)


def test_continuation_copies_what_followed_in_the_source() -> None:
    request = "Play songs by Taylor Swift and by Ed Sheeran"
    assert continuation([request], '{"artist":"Taylor').startswith(" Swift and")
    assert continuation([request], "x by Ed", max_chars=4) == " She"  # longest match wins
    assert continuation([request], "xyz") == ""
    assert continuation([request], "an", min_match=3) == ""  # too short to trust


@pytest.mark.slow
@pytest.mark.parametrize("category", ["parallel", "parallel_multiple"])
def test_forecasts_are_verified_so_lossless_still_equals_jump(
    engine: Engine, category: str
) -> None:
    cases = sample_cases((category,), 3, seed=3)
    accepted = 0
    for i, case in enumerate(cases):
        request = [dict(m) for m in case.messages]
        caller = ToolCaller(engine, case.tools, max_calls=None, max_tokens=160, forecast=True)
        jump = caller.call(request, "jump")
        lossless = caller.call(request, "lossless")
        assert_same_tokens(jump.tokens, lossless, (case.id, jump.text, lossless.text))
        if i == 0:  # forecast=False drafts none
            off = ToolCaller(engine, case.tools, max_calls=None, max_tokens=160, forecast=False)
            assert off.call(request, "lossless").stats.forecast_drafted_tokens == 0
        accepted += lossless.stats.forecast_accepted_tokens
        assert lossless.stats.forecast_accepted_tokens <= lossless.stats.forecast_drafted_tokens
    assert accepted > 0  # forecasts were drafted, verified and used


def test_forecasts_copying_unicode_from_the_request_stay_exact(engine: Engine) -> None:
    # A request token can end inside a character: the copy drafter must stop before it.
    spec = _tool("save_note", "Save a note exactly as given.", text="The note")
    caller = ToolCaller(engine, [spec], max_tokens=120, forecast=True)
    for request in (
        "Save the note '陌陌集团' (Hello Group) - a Chinese technology company",
        "Save the note: Ünïcödé naïve café 東京は大きい, then 集团 again",
    ):
        jump = caller.call(request, "jump")
        assert_same_tokens(jump.tokens, caller.call(request, "lossless"))
        assert caller.call(request, "fast").tokens == jump.tokens


def test_forecasts_are_on_by_default_only_on_the_exact_engine(
    engine: Engine, exact_engine: Engine
) -> None:
    spec = _tool("save_note", "Save a note exactly as given.", text="The note")
    assert ToolCaller(engine, [spec]).forecast is False
    assert ToolCaller(exact_engine, [spec]).forecast is True
    assert ToolCaller(engine, [spec], forecast=True).forecast is True


@pytest.mark.parametrize(
    "template",
    [
        None,  # the built-in hermes format
        "mistralai-Mistral-Nemo-Instruct-2407",
        "CohereForAI-c4ai-command-r7b-12-2024-tool_use",
        "llama-cpp-microsoft-Phi-4-mini-instruct",
    ],
)
def test_the_forecast_head_of_a_later_call_is_what_the_format_writes(
    engine: Engine, template: str | None
) -> None:
    """A later call's forecast starts where the previous call ended: the separator, then
    the call's head, without the opening marker a template's syntax writes once."""
    import json
    from pathlib import Path

    from toolweave.formats import CallFormat, detect_call_format, get_format
    from toolweave.native.decode.forecasting import Forecaster

    fmt: CallFormat = get_format("hermes")
    if template is not None:
        path = Path(__file__).parents[1] / "data" / "templates" / f"{template}.jinja"
        fmt = detect_call_format(path.read_text(encoding="utf-8"))
    marker = json.dumps("__key__") + ":0"
    first, later = ToolCall("send_email", {"recipient": "a@b.c"}), ToolCall("play_song", {})
    heads = {}
    for spec in TOOLS:
        text = fmt.serialize_call(ToolCall(spec.name, {"__key__": 0}))
        heads[spec.name] = text[: text.index(marker)]
    forecaster = Forecaster(engine, fmt, {t.name: t for t in TOOLS}, heads, None, "")
    both = fmt.serialize([first, ToolCall(later.name, {"__key__": 0})])
    one = fmt.serialize([first])
    close = getattr(getattr(fmt, "syntax", None), "close", "")
    if close and one.endswith(close):
        one = one[: -len(close)]
    assert both.startswith(one), (both, one)
    rest = both[len(one) :]
    assert rest[: rest.index(marker)] == forecaster._call_head(later.name, later=True, index=1)
    assert forecaster._call_head(later.name, later=False) == heads[later.name]
