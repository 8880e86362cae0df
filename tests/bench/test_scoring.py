"""BFCL-style argument matching: accept and reject cases, single and parallel."""

from __future__ import annotations

from typing import Any

import pytest

from toolweave.eval.scoring import (
    ExpectedCall,
    MatchResult,
    match_call,
    match_calls,
    normalise_string,
)
from toolweave.toolspec import ToolCall, ToolSpec

TRIANGLE = ExpectedCall(
    "calculate_triangle_area",
    {"base": (10,), "height": (5,), "unit": ("units", "")},
)
TRIANGLE_SPEC = ToolSpec.from_dict(
    {
        "name": "calculate_triangle_area",
        "description": "Area of a triangle.",
        "parameters": {
            "type": "dict",
            "properties": {
                "base": {"type": "integer"},
                "height": {"type": "integer"},
                "unit": {"type": "string"},
            },
            "required": ["base", "height"],
        },
    }
)
MEAN_SPEC = ToolSpec.from_dict(
    {
        "name": "stats.mean",
        "parameters": {
            "type": "dict",
            "properties": {"values": {"type": "array", "items": {"type": "float"}}},
            "required": ["values"],
        },
    }
)


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name, arguments)


def test_exact_call_matches() -> None:
    result = match_call(call("calculate_triangle_area", base=10, height=5), TRIANGLE)
    assert result == MatchResult(True, "")
    assert result


def test_optional_argument_may_be_given_or_left_out() -> None:
    assert match_call(call("calculate_triangle_area", base=10, height=5, unit="units"), TRIANGLE)
    assert match_call(call("calculate_triangle_area", base=10, height=5), TRIANGLE)
    assert TRIANGLE.optional == ("unit",)


def test_optional_argument_with_wrong_value_is_rejected() -> None:
    result = match_call(call("calculate_triangle_area", base=10, height=5, unit="cm"), TRIANGLE)
    assert not result
    assert "'unit'" in result.reason


def test_missing_non_optional_argument_is_rejected() -> None:
    result = match_call(call("calculate_triangle_area", base=10), TRIANGLE)
    assert not result
    assert result.reason == "missing argument 'height'"


def test_missing_required_argument_reported_from_spec() -> None:
    result = match_call(call("calculate_triangle_area", base=10), TRIANGLE, TRIANGLE_SPEC)
    assert result.reason == "missing required argument 'height'"


def test_unexpected_argument_is_rejected() -> None:
    result = match_call(call("calculate_triangle_area", base=10, height=5, colour="red"), TRIANGLE)
    assert result.reason == "unexpected argument 'colour'"


def test_argument_outside_the_schema_is_rejected_with_a_spec() -> None:
    expected = ExpectedCall("calculate_triangle_area", {"base": (10,), "height": (5,), "x": (1,)})
    assert match_call(call("calculate_triangle_area", base=10, height=5, x=1), expected)
    assert not match_call(
        call("calculate_triangle_area", base=10, height=5, x=1), expected, TRIANGLE_SPEC
    )


def test_wrong_name_is_rejected() -> None:
    result = match_call(call("calculate_square_area", base=10, height=5), TRIANGLE)
    assert not result
    assert "wrong tool" in result.reason


@pytest.mark.parametrize("written", ["math.hypot", "math_hypot"])
def test_dots_and_underscores_in_names_are_interchangeable(written: str) -> None:
    assert match_call(call(written, x=4), ExpectedCall("math.hypot", {"x": (4,)}))


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("April 1, 2024", True),
        ("april 1,2024", True),
        ("APRIL-1-2024", True),
        ("April_1_2024.", True),
        ("April 2, 2024", False),
        ("", False),
    ],
)
def test_strings_compare_normalised(value: str, ok: bool) -> None:
    expected = ExpectedCall("book", {"date": ("April 1, 2024",)})
    assert bool(match_call(call("book", date=value), expected)) is ok


def test_normalise_string_follows_bfcl() -> None:
    assert normalise_string("New York, NY") == "newyorkny"
    assert normalise_string("a*b^c/d") == "abcd"
    assert normalise_string("it's") == 'it"s'


def test_string_acceptable_for_a_non_string_schema_compares_exactly() -> None:
    spec = ToolSpec.from_dict(
        {
            "name": "music",
            "parameters": {"type": "object", "properties": {"year": {"type": "integer"}}},
        }
    )
    expected = ExpectedCall("music", {"year": ("", "dontcare")})
    assert match_call(call("music", year="dontcare"), expected, spec)
    assert not match_call(call("music", year="DONTCARE"), expected, spec)
    assert match_call(call("music", year="DONTCARE"), expected)  # no schema: normalised


@pytest.mark.parametrize(
    ("value", "ok"),
    [(2, True), (2.0, True), (2.5, True), (3, False), ("2.5", False), (True, False)],
)
def test_int_accepted_where_float_expected(value: Any, ok: bool) -> None:
    expected = ExpectedCall("scale", {"factor": (2.0, 2.5)})
    assert bool(match_call(call("scale", factor=value), expected)) is ok


def test_float_rejected_where_schema_says_integer() -> None:
    expected = ExpectedCall("calculate_triangle_area", {"base": (10,), "height": (5,)})
    assert not match_call(
        call("calculate_triangle_area", base=10.0, height=5), expected, TRIANGLE_SPEC
    )
    # Without a schema nothing says the argument is an integer.
    assert match_call(call("calculate_triangle_area", base=10.0, height=5), expected)


def test_booleans_only_equal_booleans() -> None:
    expected = ExpectedCall("ls", {"a": (True,)})
    assert match_call(call("ls", a=True), expected)
    assert not match_call(call("ls", a=1), expected)
    assert not match_call(call("ls", a="true"), expected)
    assert not match_call(call("count", n=1), ExpectedCall("count", {"n": (True,)}))


def test_none_is_an_acceptable_value() -> None:
    expected = ExpectedCall("power", {"mod": ("", None)})
    assert match_call(call("power", mod=None), expected)
    assert match_call(call("power"), expected)
    assert not match_call(call("power", mod=0), expected)


def test_lists_compare_element_wise() -> None:
    expected = ExpectedCall("stats.mean", {"values": ([1.0, 2.5, 3.0], [3.0, 2.5, 1.0])})
    assert match_call(call("stats.mean", values=[1, 2.5, 3]), expected, MEAN_SPEC)
    assert match_call(call("stats.mean", values=[3.0, 2.5, 1.0]), expected, MEAN_SPEC)
    assert match_call(call("stats.mean", values=(1.0, 2.5, 3.0)), expected, MEAN_SPEC)
    assert not match_call(call("stats.mean", values=[1.0, 3.0, 2.5]), expected, MEAN_SPEC)
    assert not match_call(call("stats.mean", values=[1.0, 2.5]), expected, MEAN_SPEC)
    assert not match_call(call("stats.mean", values=1.0), expected, MEAN_SPEC)


def test_list_strings_are_normalised() -> None:
    expected = ExpectedCall("find", {"tags": (["Pet-friendly", "Disabled Access"],)})
    assert match_call(call("find", tags=["pet friendly", "disabled_access"]), expected)


def test_dicts_compare_recursively_with_optional_keys() -> None:
    expected = ExpectedCall(
        "fetch",
        {"conditions": ({"school": ["Bluebird High School", "Bluebird HS"], "year": [2020, ""]},)},
    )
    assert match_call(call("fetch", conditions={"school": "bluebird hs"}), expected)
    assert match_call(call("fetch", conditions={"school": "Bluebird HS", "year": 2020}), expected)
    assert not match_call(call("fetch", conditions={"year": 2020}), expected)
    assert not match_call(call("fetch", conditions={"school": "Bluebird HS", "x": 1}), expected)
    assert not match_call(call("fetch", conditions="Bluebird HS"), expected)


def test_list_of_dicts() -> None:
    expected = ExpectedCall(
        "order",
        {
            "items": (
                [{"item": ["burgers"], "quantity": [5]}, {"item": ["wings"], "quantity": [6]}],
            )
        },
    )
    good = [{"item": "Burgers", "quantity": 5}, {"item": "wings", "quantity": 6}]
    assert match_call(call("order", items=good), expected)
    assert not match_call(call("order", items=good[::-1]), expected)


def test_parallel_calls_match_in_any_order() -> None:
    expected = [
        ExpectedCall("weather", {"city": ("Paris",)}),
        ExpectedCall("weather", {"city": ("Rome",)}),
        ExpectedCall("time", {"city": ("Paris",)}),
    ]
    calls = [
        call("time", city="paris"),
        call("weather", city="Rome"),
        call("weather", city="Paris"),
    ]
    assert match_calls(calls, expected)
    assert not match_calls(calls, expected, ordered=True)
    assert match_calls([calls[2], calls[1], calls[0]], expected, ordered=True)


def test_parallel_matching_is_one_to_one() -> None:
    expected = [ExpectedCall("weather", {"city": ("Paris",)})] * 2
    result = match_calls([call("weather", city="Paris"), call("weather", city="Rome")], expected)
    assert not result
    assert "'city'" in result.reason


def test_parallel_matching_is_not_greedy() -> None:
    # The first call fits both expected calls; a greedy pairing would take the wrong one.
    expected = [
        ExpectedCall("f", {"x": (1, 2)}),
        ExpectedCall("f", {"x": (1,)}),
    ]
    assert match_calls([call("f", x=1), call("f", x=2)], expected)


def test_extra_call_is_rejected() -> None:
    expected = [ExpectedCall("weather", {"city": ("Paris",)})]
    result = match_calls([call("weather", city="Paris"), call("weather", city="Rome")], expected)
    assert result.reason == "expected 1 call(s), got 2"


def test_missing_call_is_rejected() -> None:
    expected = [ExpectedCall("weather", {"city": ("Paris",)}), ExpectedCall("time", {})]
    assert not match_calls([call("weather", city="Paris")], expected)
    assert not match_calls([], expected)
    assert match_calls([], [])


def test_unmatched_call_names_the_missing_tool() -> None:
    expected = [ExpectedCall("weather", {"city": ("Paris",)}), ExpectedCall("time", {})]
    result = match_calls([call("weather", city="Paris"), call("date")], expected)
    assert result.reason == "no call of 'time'"


def test_match_calls_uses_specs_by_name() -> None:
    expected = [ExpectedCall("calculate_triangle_area", {"base": (10,), "height": (5,)})]
    calls = [call("calculate_triangle_area", base=10.0, height=5)]
    assert match_calls(calls, expected)
    assert not match_calls(calls, expected, specs=[TRIANGLE_SPEC])
