"""BFCL multi-turn tools run by BFCL's own code, loaded from the real ``bfcl-eval`` wheel.

The code is downloaded once into the cache (``$TOOLWEAVE_BFCL_CODE_DIR`` or
``~/.cache/toolweave``). Tests are skipped only when pip cannot reach the package index.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from toolweave.adapters.bench.bfcl_tools import (
    BFCL_CLASS_MODULES,
    bfcl_code_dir,
    bfcl_environment,
    load_bfcl_class,
)
from toolweave.eval.bfcl_data import DatasetError
from toolweave.eval.bfcl_multi_turn import load_multi_turn
from toolweave.eval.workload import PlanRequest, load_workload
from toolweave.plan.executor import PlanRun, execute_plan
from toolweave.plan.format import Plan, PlanTask
from toolweave.readonly import classify_tool, classify_tools
from toolweave.tools import Tool

pytestmark = pytest.mark.anyio

# What pip prints when it cannot reach the index (the package itself exists on PyPI).
_OFFLINE_SIGNS = (
    "from versions: none",
    "NewConnectionError",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "Max retries exceeded",
    "took more than",
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _or_skip(exc: DatasetError) -> None:
    if any(sign in str(exc) for sign in _OFFLINE_SIGNS):
        pytest.skip(f"pip download of bfcl-eval failed, no network: {exc}")


@pytest.fixture(scope="module")
def code_dir() -> Path:
    try:
        return bfcl_code_dir()
    except DatasetError as exc:
        _or_skip(exc)
        raise


@pytest.fixture(scope="module")
def requests(code_dir: Path) -> list[PlanRequest]:
    try:
        return list(load_workload("test"))
    except DatasetError as exc:
        _or_skip(exc)
        raise


def _first(requests: list[PlanRequest], theme: tuple[str, ...], turn: int) -> PlanRequest:
    return next(r for r in requests if r.theme == theme and r.turn >= turn)


async def _run_in_order(plan: Plan, tools: list[Tool]) -> PlanRun:
    async def stream() -> AsyncIterator[PlanTask]:
        for task in plan.tasks:
            yield task

    return await execute_plan(stream(), {tool.name: tool for tool in tools})


async def _call(tools: list[Tool], name: str, **arguments: object) -> str:
    result = await next(tool for tool in tools if tool.name == name).run(arguments)
    assert not result.is_error, result.text
    return result.text


# -- the code cache and the classes -------------------------------------------------


def test_code_dir_holds_only_the_tool_code(code_dir: Path) -> None:
    names = {path.name for path in code_dir.iterdir()}
    assert {f"{module}.py" for module in BFCL_CLASS_MODULES.values()} <= names
    assert "long_context.py" in names
    assert not (code_dir / "bfcl_eval").exists()
    assert not any(name.endswith(".json") for name in names)  # no data files


def test_env_var_selects_the_code_dir(code_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLWEAVE_BFCL_CODE_DIR", str(code_dir))
    assert bfcl_code_dir() == code_dir
    assert bfcl_code_dir(code_dir) == code_dir


def test_fresh_download_fills_an_empty_code_dir(code_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "cache" / "code"
    try:
        assert bfcl_code_dir(target) == target
    except DatasetError as exc:
        _or_skip(exc)
        raise
    # Python may have written __pycache__ into the shared cache while importing from it.
    assert sorted(p.name for p in target.glob("*.py")) == sorted(
        p.name for p in code_dir.glob("*.py")
    )
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["code"]  # no temp left over


def test_foreign_directory_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(DatasetError, match="delete it"):
        bfcl_code_dir(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_classes_load_under_a_private_name(code_dir: Path) -> None:
    had_bfcl = {name for name in sys.modules if name.startswith("bfcl_eval")}
    for class_name in BFCL_CLASS_MODULES:
        loaded = load_bfcl_class(class_name, code_dir=code_dir)
        assert loaded.__name__ == class_name
        assert loaded.__module__.startswith("_toolweave_bfcl_")
        assert load_bfcl_class(class_name, code_dir=code_dir) is loaded  # imported once
    # The aliases that answer BFCL's absolute imports are gone again.
    assert {name for name in sys.modules if name.startswith("bfcl_eval")} == had_bfcl


def test_unknown_class_is_an_error(code_dir: Path) -> None:
    with pytest.raises(DatasetError, match="unknown BFCL class 'WebSearchAPI'"):
        load_bfcl_class("WebSearchAPI", code_dir=code_dir)


# -- environments ---------------------------------------------------------------------


async def test_ground_truth_plans_of_the_test_split_run_without_errors(
    requests: list[PlanRequest],
) -> None:
    failed: list[str] = []
    for request in requests:
        run = await _run_in_order(request.plan, bfcl_environment(request))
        assert len(run.records) == len(request.plan.tasks)
        if not run.ok:
            failed.append(f"{request.id}: {run.observations_text()}")
    fraction = 1 - len(failed) / len(requests)
    print(f"ground-truth plans without error: {len(requests) - len(failed)}/{len(requests)}")
    assert len({r.theme for r in requests}) >= 10
    assert fraction >= 0.95, "\n".join(failed[:5])


async def test_replaying_history_reaches_the_turns_state(requests: list[PlanRequest]) -> None:
    later = [r for r in requests if r.turn > 0 and "GorillaFileSystem" in r.theme][:40]
    outcomes: Counter[tuple[bool, bool]] = Counter()
    for request in later:
        for replay in (True, False):
            tools = bfcl_environment(request, replay_history=replay)
            outcomes[replay, (await _run_in_order(request.plan, tools)).ok] += 1
    assert outcomes[True, True] == len(later)
    assert outcomes[False, False] > 0  # without the earlier turns, some calls fail


async def test_a_wrong_argument_is_an_error_observation(requests: list[PlanRequest]) -> None:
    tools = bfcl_environment(_first(requests, ("GorillaFileSystem",), 0))
    plan = Plan(
        (
            PlanTask(1, "cd", {"folder": "no_such_folder"}),
            PlanTask(2, "pwd", {}),
        )
    )
    run = await _run_in_order(plan, tools)
    assert run.record(1).failed
    assert "no_such_folder" in run.record(1).observation.text
    assert run.record(1).observation.structured == {"error": run.record(1).observation.text}
    assert not run.record(2).failed
    # An exception inside BFCL's method is an observation too.
    cd = next(tool for tool in tools if tool.name == "cd")
    raised = await cd.run({"directory": "x"})
    assert raised.is_error
    assert "TypeError" in raised.text


async def test_environments_do_not_share_state(requests: list[PlanRequest]) -> None:
    request = _first(requests, ("GorillaFileSystem",), 0)
    first, second = bfcl_environment(request), bfcl_environment(request)
    before = await _call(second, "ls")
    await _call(first, "mkdir", dir_name="only_in_first")
    assert "only_in_first" in await _call(first, "ls")
    assert await _call(second, "ls") == before
    # The conversation's initial_config is not changed by what an environment does.
    assert await _call(bfcl_environment(request), "ls") == before


async def test_a_case_gives_all_its_tools_in_the_initial_state(code_dir: Path) -> None:
    case = next(c for c in load_multi_turn("multi_turn_base") if "TwitterAPI" in c.involved_classes)
    tools = bfcl_environment(case, code_dir=code_dir)
    assert [tool.name for tool in tools] == [spec.name for spec in case.tools]
    assert {tool.source for tool in tools} == {f"bfcl:{name}" for name in case.involved_classes}


def test_unknown_conversation_is_an_error(requests: list[PlanRequest]) -> None:
    stray = replace(requests[0], conversation_id="multi_turn_base_99999")
    with pytest.raises(DatasetError, match="multi_turn_base_99999"):
        bfcl_environment(stray)


# -- read-only classification --------------------------------------------------------

# BFCL methods whose code only reads its instance (checked by reading each one in
# bfcl-eval 2026.3.23; `get_flight_cost` fills a private cache, `get_current_speed`
# draws from the instance's random generator: neither changes what a tool returns).
BFCL_READ_ONLY = frozenset(
    [
        "absolute_value",
        "check_tire_pressure",
        "compute_exchange_rate",
        "diff",
        "displayCarStatus",
        "du",
        "estimate_distance",
        "estimate_drive_feasibility_by_mileage",
        "find",
        "find_nearest_tire_shop",
        "gallon_to_liter",
        "get_account_info",
        "get_all_credit_cards",
        "get_available_stocks",
        "get_booking_history",
        "get_budget_fiscal_year",
        "get_credit_card_balance",
        "get_current_speed",
        "get_current_time",
        "get_flight_cost",
        "get_message_stats",
        "get_nearest_airport_by_city",
        "get_order_details",
        "get_order_history",
        "get_outside_temperature_from_google",
        "get_outside_temperature_from_weather_com",
        "get_stock_info",
        "get_symbol_by_name",
        "get_ticket",
        "get_transaction_history",
        "get_tweet",
        "get_tweet_comments",
        "get_user_id",
        "get_user_stats",
        "get_user_tickets",
        "get_user_tweets",
        "get_watchlist",
        "get_zipcode_based_on_city",
        "grep",
        "imperial_si_conversion",
        "list_all_airports",
        "list_all_following",
        "list_users",
        "liter_to_gallon",
        "logarithm",
        "ls",
        "max_value",
        "mean",
        "message_get_login_status",
        "min_value",
        "percentage",
        "posting_get_login_status",
        "pwd",
        "retrieve_invoice",
        "search_messages",
        "search_tweets",
        "si_unit_conversion",
        "square_root",
        "standard_deviation",
        "sum_values",
        "ticket_get_login_status",
        "trading_get_login_status",
        "travel_get_login_status",
        "view_messages_sent",
        "wc",
    ]
)


def test_read_only_bfcl_tools_are_found_under_their_class_preamble(code_dir: Path) -> None:
    # Every BFCL description opens with its class's preamble ("... allows users to
    # perform basic file operations such as navigating directories, creating files ...").
    said: dict[str, bool] = {}
    alone: dict[str, bool] = {}
    for case in load_multi_turn("multi_turn_base"):
        for spec, decision in zip(case.tools, classify_tools(case.tools), strict=True):
            assert said.setdefault(spec.name, decision.read_only) == decision.read_only
            alone.setdefault(spec.name, classify_tool(spec).read_only)
    called = {name for name, read_only in said.items() if read_only}
    assert called <= BFCL_READ_ONLY, sorted(called - BFCL_READ_ONLY)  # precision
    # The file system's readers, each "creating" and "writing" by its preamble alone.
    assert {"ls", "grep", "find", "wc", "du", "pwd", "diff", "get_ticket"} <= called
    assert not {"mkdir", "rm", "mv", "cp", "touch", "echo", "cd", "sort"} & called
    assert not alone["ls"] and not alone["grep"]  # one by one, the preamble decides
