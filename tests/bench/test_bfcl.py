"""BFCL v4 data: the cache, single-turn and multi-turn loaders, the call parser.

The data comes from the real ``bfcl-eval`` wheel, downloaded once into the cache
(``$TOOLWEAVE_BFCL_DIR`` or ``~/.cache/toolweave``). Tests that need it are skipped
only when pip cannot reach the package index.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import FrozenInstanceError
from pathlib import Path
from typing import Any

import pytest

from toolweave.errors import CallFormatError
from toolweave.eval.bfcl import (
    SINGLE_TURN_CATEGORIES,
    BfclCase,
    DatasetError,
    bfcl_data_dir,
    load_cases,
    sample_cases,
)
from toolweave.eval.bfcl_multi_turn import (
    FUNC_DOC_FILES,
    MULTI_TURN_CATEGORIES,
    load_class_tools,
    load_multi_turn,
    parse_call,
)
from toolweave.eval.scoring import ExpectedCall, match_calls
from toolweave.toolspec import ToolCall, ToolSpec

# What pip prints when it cannot reach the index (the package itself exists on PyPI).
_OFFLINE_SIGNS = (
    "from versions: none",
    "NewConnectionError",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "Max retries exceeded",
    "took more than",
)


def _data_or_skip(cache_dir: Path | None = None) -> Path:
    try:
        return bfcl_data_dir(cache_dir)
    except DatasetError as exc:
        if any(sign in str(exc) for sign in _OFFLINE_SIGNS):
            print(f"BFCL data unavailable: {exc}")
            pytest.skip(f"pip download of bfcl-eval failed, no network: {exc}")
        raise


@pytest.fixture(scope="module")
def data_dir() -> Path:
    return _data_or_skip()


# -- the cache --------------------------------------------------------------------


def test_data_dir_holds_the_bfcl_files(data_dir: Path) -> None:
    assert (data_dir / "BFCL_v4_simple_python.json").is_file()
    assert (data_dir / "possible_answer" / "BFCL_v4_simple_python.json").is_file()
    assert (data_dir / "multi_turn_func_doc" / "gorilla_file_system.json").is_file()
    assert not (data_dir / "bfcl_eval").exists()  # only the data, unwrapped


def test_env_var_selects_the_cache(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLWEAVE_BFCL_DIR", str(data_dir))
    assert bfcl_data_dir() == data_dir
    assert bfcl_data_dir(data_dir) == data_dir


def test_fresh_download_fills_an_empty_cache(data_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "cache" / "bfcl"
    assert _data_or_skip(target) == target
    assert sorted(p.name for p in target.iterdir()) == sorted(p.name for p in data_dir.iterdir())
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["bfcl"]  # no temp left over


def test_foreign_directory_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(DatasetError, match="delete it"):
        bfcl_data_dir(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"


# -- single-turn -------------------------------------------------------------------


@pytest.mark.parametrize("category", SINGLE_TURN_CATEGORIES)
def test_single_turn_category_loads(data_dir: Path, category: str) -> None:
    cases = load_cases(category, data_dir=data_dir)
    assert len(cases) > 0
    assert len(cases.skipped) <= max(2, len(cases) // 100)
    assert len({case.id for case in cases}) == len(cases)
    for case in cases:
        assert case.category == category
        assert case.messages
        assert all(set(m) == {"role", "content"} for m in case.messages)
        assert case.messages[-1]["role"] == "user"
        assert all(isinstance(tool, ToolSpec) for tool in case.tools)
        properties = {tool.name: tool.parameters["properties"] for tool in case.tools}
        assert case.expected
        for expected in case.expected:
            assert expected.name in properties
            assert all(isinstance(values, tuple) for values in expected.arguments.values())
        assert case.n_args == sum(len(e.arguments) for e in case.expected)
        if "parallel" not in category:
            assert len(case.expected) == 1


def test_simple_is_short_for_simple_python(data_dir: Path) -> None:
    cases = load_cases("simple", data_dir=data_dir)
    assert [c.id for c in cases] == [c.id for c in load_cases("simple_python", data_dir=data_dir)]
    first = cases[0]
    assert first.id == "simple_python_0"
    assert first.expected == (
        ExpectedCall(
            "calculate_triangle_area", {"base": (10,), "height": (5,), "unit": ("units", "")}
        ),
    )
    assert first.n_args == 3


def test_unknown_category_is_an_error(data_dir: Path) -> None:
    with pytest.raises(DatasetError, match="unknown BFCL single-turn category"):
        load_cases("simple_cobol", data_dir=data_dir)


def test_unsatisfiable_ground_truth_is_skipped_with_a_reason(data_dir: Path) -> None:
    skipped = load_cases("live_multiple", data_dir=data_dir).skipped
    assert "lacks required argument" in skipped["live_multiple_964-207-0"]


@pytest.mark.parametrize("category", ["simple", "multiple", "parallel", "parallel_multiple"])
def test_ground_truth_satisfies_itself(data_dir: Path, category: str) -> None:
    """A call built from the first acceptable values matches, in any order."""
    for case in load_cases(category, data_dir=data_dir):
        required = {tool.name: set(tool.required) for tool in case.tools}
        calls = [ToolCall(e.name, _witness(e.arguments, required[e.name])) for e in case.expected]
        ordered = match_calls(calls, case.expected, ordered=True, specs=case.tools)
        assert ordered, (case.id, ordered.reason)
        assert match_calls(calls[::-1], case.expected, specs=case.tools), case.id


def _witness(arguments: Any, required: set[str]) -> dict[str, Any]:
    """Concrete arguments from ``{key: acceptable values}``, leaving optional ones out."""
    out = {}
    for key, values in arguments.items():
        concrete = [v for v in values if v != ""]
        if concrete and ("" not in values or key in required):
            out[key] = _concrete(concrete[0])
    return out


def _concrete(value: Any) -> Any:
    if isinstance(value, dict):
        return _witness(value, set())
    if isinstance(value, list):
        return [_concrete(item) for item in value]
    return value


def test_sample_is_deterministic(data_dir: Path) -> None:
    categories = ["simple", "multiple", "parallel", "parallel_multiple"]
    first = sample_cases(categories, 60, seed=3, data_dir=data_dir)
    again = sample_cases(categories, 60, seed=3, data_dir=data_dir)
    other = sample_cases(categories, 60, seed=4, data_dir=data_dir)
    assert [c.id for c in first] == [c.id for c in again]
    assert [c.id for c in first] != [c.id for c in other]
    assert len({c.id for c in first}) == 60


def test_sample_is_balanced_over_argument_counts(data_dir: Path) -> None:
    categories = ["simple", "multiple", "parallel", "parallel_multiple"]
    pool = Counter(c.n_args for name in categories for c in load_cases(name, data_dir=data_dir))
    picked = Counter(c.n_args for c in sample_cases(categories, 80, data_dir=data_dir))
    assert sum(picked.values()) == 80
    assert set(picked) == set(pool)  # every argument count is represented
    most = max(picked.values())
    for n_args, available in pool.items():
        # Round robin: every bucket gets its turn until it runs out.
        assert min(available, most - 1) <= picked[n_args] <= min(available, most)


def test_sample_without_strata_and_oversized(data_dir: Path) -> None:
    plain = sample_cases("live_parallel", 5, stratify=None, data_dir=data_dir)
    assert len({c.id for c in plain}) == 5
    everything = sample_cases("live_parallel", 10_000, data_dir=data_dir)
    assert sorted(c.id for c in everything) == sorted(
        c.id for c in load_cases("live_parallel", data_dir=data_dir)
    )
    with pytest.raises(ValueError, match="stratify"):
        sample_cases("simple", 3, stratify="length", data_dir=data_dir)


def test_cases_are_frozen(data_dir: Path) -> None:
    case: BfclCase = load_cases("simple", data_dir=data_dir)[0]
    field = "n_args"
    with pytest.raises(FrozenInstanceError):
        setattr(case, field, 0)
    assert len({case, case}) == 1


# -- multi-turn --------------------------------------------------------------------


def _multi_turn_calls(category: str, data_dir: Path) -> Iterator[tuple[str, ToolCall, ToolSpec]]:
    for case in load_multi_turn(category, data_dir=data_dir):
        tools = {tool.name: tool for tool in case.tools}
        for step in case.ground_truth:
            for call in step:
                yield case.id, call, tools[call.name]


@pytest.mark.parametrize("category", MULTI_TURN_CATEGORIES)
def test_multi_turn_category_loads(data_dir: Path, category: str) -> None:
    cases = load_multi_turn(category, data_dir=data_dir)
    assert len(cases) > 0
    assert not cases.skipped
    for case in cases:
        assert case.category == category
        assert len(case.turns) == len(case.ground_truth)
        assert set(case.involved_classes) <= set(FUNC_DOC_FILES)
        assert all(m["role"] == "user" for turn in case.turns for m in turn)
    for case_id, call, spec in _multi_turn_calls(category, data_dir):
        assert set(call.arguments) <= set(spec.parameters["properties"]), (case_id, call)
        missing = set(spec.required) - set(call.arguments)
        assert not missing, (case_id, call)


def test_multi_turn_base_ground_truth(data_dir: Path) -> None:
    case = load_multi_turn(data_dir=data_dir)[0]
    assert case.id == "multi_turn_base_0"
    assert case.involved_classes == ("TwitterAPI", "GorillaFileSystem")
    assert case.ground_truth[0][0] == ToolCall("cd", {"folder": "document"})
    assert case.ground_truth[2] == (ToolCall("sort", {"file_name": "final_report.pdf"}),)
    assert "GorillaFileSystem" in case.initial_config
    assert case.path[0] == "GorillaFileSystem.find"
    assert {"cd", "post_tweet"} <= {tool.name for tool in case.tools}


def test_miss_func_holds_tools_back(data_dir: Path) -> None:
    case = load_multi_turn("multi_turn_miss_func", data_dir=data_dir)[0]
    (turn, names), *_ = case.missed_functions.items()
    assert case.turns[turn] == ()  # the turn where BFCL hands the tool over
    before = {tool.name for tool in case.tools_at(turn - 1)}
    after = {tool.name for tool in case.tools_at(turn)}
    assert set(names).isdisjoint(before)
    assert set(names) <= after == {tool.name for tool in case.tools}


def test_class_tools(data_dir: Path) -> None:
    names = [tool.name for tool in load_class_tools("GorillaFileSystem", data_dir=data_dir)]
    assert {"cd", "ls", "mv", "grep"} <= set(names)
    with pytest.raises(DatasetError, match="unknown BFCL class"):
        load_class_tools("Nope", data_dir=data_dir)


# -- the call parser (no data needed) ------------------------------------------------

POST = ToolSpec.from_dict(
    {
        "name": "post_tweet",
        "parameters": {
            "type": "dict",
            "properties": {
                "content": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "mentions": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["content"],
        },
    }
)


def test_parse_keyword_call() -> None:
    parsed = parse_call("grep(file_name='final_report.pdf',pattern='budget analysis')")
    assert parsed == ToolCall(
        "grep", {"file_name": "final_report.pdf", "pattern": "budget analysis"}
    )


def test_parse_positional_arguments_by_parameter_order() -> None:
    text = "post_tweet('Tires checked!', tags=['#RoadTrip'], mentions=['@AutoUpdates'])"
    parsed = parse_call(text, {"post_tweet": POST})
    assert parsed == ToolCall(
        "post_tweet",
        {"content": "Tires checked!", "tags": ["#RoadTrip"], "mentions": ["@AutoUpdates"]},
    )


@pytest.mark.parametrize(
    ("text", "arguments"),
    [
        ("f(x=-3, y=2.5e3, z=None, b=True)", {"x": -3, "y": 2500.0, "z": None, "b": True}),
        ("f(d={'a': [1, (2, 3)]})", {"d": {"a": [1, (2, 3)]}}),
        ("  f()  ", {}),
    ],
)
def test_parse_literals(text: str, arguments: dict[str, Any]) -> None:
    assert parse_call(text) == ToolCall("f", arguments)


def test_parse_dotted_name() -> None:
    assert parse_call("math.hypot(x=3)").name == "math.hypot"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cd(folder=", "not a Python call"),
        ("cd", "not a call"),
        ("f(x)(y=1)", "not a name"),
        ("cd(folder=os.getcwd())", "not a literal"),
        ("cd('docs')", "need the tool"),
        ("post_tweet('a', [], [], 'extra')", "too many"),
        ("post_tweet('a', content='b')", "given twice"),
        ("f(**kw)", "kwargs"),
    ],
)
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(CallFormatError, match=message):
        parse_call(text, {"post_tweet": POST})
