"""Read-only classification: measured on a hand-labeled set, and its order of evidence."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from toolweave.adapters.cli.app import main
from toolweave.errors import ToolSpecError
from toolweave.readonly import (
    DECIDED_KEY,
    ReadOnlyDecision,
    classify_tool,
    classify_tools,
    with_read_only,
)
from toolweave.readonly_score import load_labeled, score_read_only
from toolweave.toolspec import ToolSpec, load_tools_file

ROOT = Path(__file__).resolve().parents[2]
LABELED = Path(__file__).resolve().parents[1] / "data" / "readonly_labeled.json"
MCP_TOOLS = Path(__file__).resolve().parents[1] / "data" / "readonly_mcp_tools.json"
ASSISTANT_TOOLS = ROOT / "examples" / "tools" / "assistant_tools.json"


def spec(
    name: str, description: str = "", annotations: Mapping[str, Any] | None = None
) -> ToolSpec:
    return ToolSpec.from_dict(
        {"name": name, "description": description, "annotations": dict(annotations or {})}
    )


# ---------------------------------------------------------------------- labeled set
def test_labeled_set_precision_is_perfect_and_recall_high() -> None:
    labels = {t["name"]: t["read_only"] for t in json.loads(LABELED.read_text(encoding="utf-8"))}
    specs = load_tools_file(LABELED)
    assert len(specs) >= 90 and not any(s.annotations for s in specs)
    decisions = classify_tools(specs)
    predicted = {d.name for d in decisions if d.read_only}
    actual = {name for name, ro in labels.items() if ro}
    tp, fp, fn = len(predicted & actual), len(predicted - actual), len(actual - predicted)
    precision, recall = tp / (tp + fp), tp / (tp + fn)
    print(
        f"\nread-only on {len(specs)} labeled tools ({len(actual)} read-only): "
        f"precision {precision:.3f}, recall {recall:.3f} (TP {tp}, FP {fp}, FN {fn}); "
        f"missed: {', '.join(sorted(actual - predicted))}"
    )
    assert predicted - actual == set(), "tools wrongly called read-only"
    assert recall >= 0.85  # measured 0.887


def test_published_mcp_tools_precision_is_perfect() -> None:
    tools = load_labeled(MCP_TOOLS)
    servers = {t.server for t in tools}
    assert len(tools) >= 300 and len(servers) >= 8
    assert sum(t.read_only for t in tools) >= 150 and any(t.spec.annotations for t in tools)
    score = score_read_only(tools)
    print(f"\nread-only on published MCP tools: {score.summary()}; missed: {score.missed}")
    assert score.wrongly_read_only == ()
    assert score.precision == 1.0
    assert score.recall >= 0.82  # measured 0.844 (152 of 180)


def test_published_mcp_tools_without_annotations_stay_precise() -> None:
    score = score_read_only(load_labeled(MCP_TOOLS), trust_annotations=False)
    # Its only sign of a side effect is destructiveHint, which is ignored here on purpose.
    assert score.wrongly_read_only == ("toolweave/adversarial:get_report",)
    assert score.recall >= 0.78  # measured 0.82


def test_every_decision_has_a_reason_and_a_known_source() -> None:
    sources = {"override", "annotations", "name", "description", "name+description", "default"}
    specs = load_tools_file(LABELED) + load_tools_file(ASSISTANT_TOOLS)
    for d in classify_tools(specs):
        assert d.source in sources
        assert d.reason.strip(), d


# ---------------------------------------------------------------------- order of evidence
def test_read_only_hint_counts_when_nothing_contradicts_it() -> None:
    d = classify_tool(spec("weather", "The weather in a city.", {"readOnlyHint": True}))
    assert (d.read_only, d.source) == (True, "annotations")
    d = classify_tool(spec("get_weather", "Get the weather.", {"readOnlyHint": False}))
    assert (d.read_only, d.source) == (False, "annotations")


def test_a_side_effect_in_name_or_description_beats_read_only_hint() -> None:
    d = classify_tool(spec("delete_cache_entry", "Delete an entry.", {"readOnlyHint": True}))
    assert (d.read_only, d.source) == (False, "name+description")
    assert "contradicts annotation readOnlyHint true" in d.reason
    d = classify_tool(
        spec("kubectl_context", "Manage contexts - list, get, or set the current context",
             {"readOnlyHint": True})
    )  # fmt: skip
    assert d.read_only is False and "'set'" in d.reason


def test_snake_case_hint_is_accepted() -> None:
    d = classify_tool(spec("queue_depth", "Depth of a queue.", {"read_only_hint": True}))
    assert (d.read_only, d.source) == (True, "annotations")
    assert "read_only_hint" in d.reason
    d = classify_tool(spec("purge_queue", "Purge a queue.", {"read_only_hint": True}))
    assert d.read_only is False


def test_destructive_hint_beats_read_only_hint() -> None:
    d = classify_tool(spec("get_report", "Get the report.", {"destructiveHint": True}))
    assert (d.read_only, d.source) == (False, "annotations")
    d = classify_tool(spec("get_report", "", {"readOnlyHint": True, "destructiveHint": True}))
    assert (d.read_only, d.source) == (False, "annotations")
    assert "beats readOnlyHint true" in d.reason


def test_defaulted_hints_are_not_the_servers_claim() -> None:
    # An adapter filled destructiveHint with the MCP default: it must not count.
    hints = {"readOnlyHint": True, "destructiveHint": True, "x-defaulted": ["destructiveHint"]}
    d = classify_tool(spec("get_report", "Get the report.", hints))
    assert (d.read_only, d.source) == (True, "annotations")


def test_untrusted_annotations_are_ignored() -> None:
    claims_read_only = spec("weather", "The weather.", {"readOnlyHint": True})
    d = classify_tool(claims_read_only, trust_annotations=False)
    assert (d.read_only, d.source) == (False, "default")
    assert d.reason.endswith("annotations not trusted")
    claims_destructive = spec("get_weather", "Get the weather.", {"destructiveHint": True})
    d = classify_tool(claims_destructive, trust_annotations=False)
    assert (d.read_only, d.source) == (True, "name+description")


def test_a_decision_made_before_is_final() -> None:
    tool = spec("delete_cache_entry", "Delete an entry.", {DECIDED_KEY: True})
    assert classify_tool(tool).read_only is True
    assert classify_tool(tool, {"delete_cache_entry": False}).read_only is False


def test_annotations_without_hints_fall_through_to_words() -> None:
    d = classify_tool(spec("list_users", "List users.", {"title": "Users", "openWorldHint": True}))
    assert (d.read_only, d.source) == (True, "name+description")


def test_overrides_win_over_annotations_and_words() -> None:
    tools = [spec("send_email", "Send an email."), spec("get_time", "", {"readOnlyHint": True})]
    decisions = classify_tools(tools, {"send_email": True, "get_time": False})
    assert [(d.read_only, d.source) for d in decisions] == [(True, "override"), (False, "override")]


def test_unknown_override_names_raise_and_are_listed() -> None:
    with pytest.raises(ToolSpecError, match="unknown tools: get_tiem, sned_email"):
        classify_tools([spec("get_time")], {"sned_email": False, "get_tiem": True})


def test_with_read_only_returns_copies() -> None:
    tools = [spec("get_time", "Get the time."), spec("send_email", "Send an email.")]
    marked = with_read_only(tools, {"send_email": False})
    assert [t.read_only for t in marked] == [True, False]
    assert [t.read_only for t in tools] == [None, None]
    assert marked[0].name == "get_time" and marked[0].description == "Get the time."


def test_to_dict_is_the_cli_row() -> None:
    d = ReadOnlyDecision("get_time", True, "name", "name has 'get'")
    assert d.to_dict() == {
        "name": "get_time",
        "read_only": True,
        "source": "name",
        "reason": "name has 'get'",
    }


# ---------------------------------------------------------------------- words
@pytest.mark.parametrize(
    ("name", "description", "source"),
    [
        ("list_regions", "", "name"),
        ("weather_now", "Returns the current weather.", "description"),
        ("github.list_issues", "List issues of a repository.", "name+description"),
        ("getPullRequestReviews", "", "name"),
        ("preview_send", "Render the email as it would be sent, without sending it.", None),
        ("dry-run-deploy", "Show what would be deployed; nothing is deployed.", None),
    ],
)
def test_read_only_words(name: str, description: str, source: str | None) -> None:
    d = classify_tool(spec(name, description))
    assert d.read_only is True, d
    assert source is None or d.source == source


@pytest.mark.parametrize(
    ("name", "description", "evidence"),
    [
        ("get_or_create_user", "", "create"),
        ("fetch_and_mark_read", "", "mark"),
        ("check_in_flight", "", "check in"),
        ("github.createIssue", "", "create"),
        ("get_messages", "Get new messages and mark them as read.", "mark"),
        ("get_user", "Return a user; creates it if missing.", "creates"),
        ("fetch_jobs", "Fetch jobs. Fetched jobs are removed from the queue.", "removed"),
        ("preview_deployment", "Deploy the branch to a preview URL.", "deploy"),
        ("run_query", "Run a SQL query.", "run"),
        ("preview_and_send", "", "send"),
        ("get_draft", "Get a draft; the draft is not sent but is deleted.", "deleted"),
    ],
)
def test_side_effects_beat_read_words(name: str, description: str, evidence: str) -> None:
    d = classify_tool(spec(name, description))
    assert d.read_only is False, d
    assert f"'{evidence}'" in d.reason and "side effect" in d.reason


@pytest.mark.parametrize(
    ("name", "description", "evidence"),
    [
        ("find_and_ban_user", "Finds a user and bans them.", "ban"),
        ("show_status", "Show the status and shut down the server.", "shut down"),
        ("view_file", "View a file, then truncate it.", "truncate"),
        ("list_jobs", "List the jobs and kick off a new build.", "kick off"),
        ("browser_clear_history", "", "clear"),
        ("docs.browser_clear_history", "", "clear"),
        ("browser_evaluate", "Evaluate JavaScript on the page.", "evaluate"),
        ("show_banner", "Show a notification to the user.", "notification"),
    ],
)
def test_side_effects_after_the_first_word_count(
    name: str, description: str, evidence: str
) -> None:
    d = classify_tool(spec(name, description))
    assert d.read_only is False, d
    assert f"'{evidence}'" in d.reason


def test_a_prefix_does_not_change_the_answer() -> None:
    for own in ["clear_history", "get_history", "start_video", "list_tabs"]:
        prefixed = classify_tool(spec(f"browser_{own}")).read_only
        assert prefixed == classify_tool(spec(own)).read_only, own


def test_objects_before_a_read_verb_are_nouns() -> None:
    for name in ["issue_read", "pull_request_read", "list_notifications", "get_notification"]:
        assert classify_tool(spec(name)).read_only is True, name


def test_side_effect_nouns_are_not_verbs() -> None:
    # "order", "commit" and "restarts" are nouns here; "cancelled" describes the flight.
    for name, description in [
        ("get_order_status", "Get the status of an order."),
        ("list_commits", "Shows the commit logs"),
        ("list_pods", "List pods with their phase, restarts and age."),
        ("check_flight_status", "Check whether a flight is on time, delayed or cancelled."),
    ]:
        assert classify_tool(spec(name, description)).read_only is True, name


def test_unsure_means_not_read_only() -> None:
    for tool in [spec("weather"), spec("thermostat", "The living room thermostat.")]:
        d = classify_tool(tool)
        assert (d.read_only, d.source) == (False, "default")
        assert d.reason.startswith("unsure")


# ---------------------------------------------------------------------- CLI
def run_cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def test_cli_json_matches_the_library(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(
        capsys, "classify", "--tools", ASSISTANT_TOOLS, "--json", "--override", "play_music=true"
    )
    assert code == 0, err
    rows = json.loads(out)
    expected = classify_tools(load_tools_file(ASSISTANT_TOOLS), {"play_music": True})
    assert rows == [d.to_dict() for d in expected]
    by_name = {r["name"]: r for r in rows}
    assert by_name["play_music"]["source"] == "override"
    assert by_name["get_current_weather"]["read_only"] is True
    assert by_name["create_note"]["read_only"] is False


def test_cli_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "classify", "--tools", ASSISTANT_TOOLS)
    assert code == 0
    assert "create_note" in out and "annotations" in out and "yes" in out and "no" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tools", "missing.json"], "does not exist"),
        (["--tools", ASSISTANT_TOOLS, "--override", "play_music"], "NAME=true"),
        (["--tools", ASSISTANT_TOOLS, "--override", "play_music=maybe"], "NAME=true"),
        (["--tools", ASSISTANT_TOOLS, "--override", "no_such_tool=true"], "no_such_tool"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], args: list[str | Path], message: str
) -> None:
    code, out, err = run_cli(capsys, "classify", *args)
    assert code == 2 and out == ""
    assert err.startswith("toolweave: error: ") and err.count("\n") == 1
    assert message in err


def test_cli_evaluate_reproduces_the_measurement(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "classify", "--evaluate", MCP_TOOLS, "--json")
    assert code == 0, err
    assert json.loads(out) == score_read_only(load_labeled(MCP_TOOLS)).to_dict()
    code, out, _ = run_cli(capsys, "classify", "--evaluate", LABELED)
    assert code == 0 and out.startswith("precision 1.000, recall ")


@pytest.mark.parametrize(
    "args",
    [[], ["--tools", ASSISTANT_TOOLS, "--evaluate", LABELED], ["--evaluate", ASSISTANT_TOOLS]],
)
def test_cli_evaluate_bad_input_is_one_line(
    capsys: pytest.CaptureFixture[str], args: list[str | Path]
) -> None:
    code, out, err = run_cli(capsys, "classify", *args)
    assert code == 2 and out == ""
    assert err.startswith("toolweave: error: ") and err.count("\n") == 1


# ---------------------------------------------------------------------- shared leads
SYSTEM = (
    "This tool belongs to the file system. It allows users to perform basic file "
    "operations such as navigating directories, creating files, reading and writing "
    "to files, etc. Tool description: "
)


def test_a_system_preamble_the_tools_share_is_not_their_own_words() -> None:
    tools = [
        spec("ls", SYSTEM + "List the contents of the current directory."),
        spec("grep", SYSTEM + "Search for lines in a file that contain a pattern."),
        spec("mkdir", SYSTEM + "Make a new directory in the current directory."),
        spec("rm", SYSTEM + "Remove a file or directory."),
    ]
    # One by one, "creating" and "writing" in the preamble make every tool write.
    assert [classify_tool(t).read_only for t in tools] == [False] * 4
    decisions = classify_tools(tools)
    assert [d.read_only for d in decisions] == [True, True, False, False]
    assert decisions[0].reason.startswith("description says 'list' (read-only)")
    assert "after the lead shared with other tools: 'This tool belongs" in decisions[0].reason
    assert decisions[3].reason.startswith("description says 'remove' (side effect)")
    assert decisions[2].source == "default"  # "make" is no known verb: unsure


def test_a_shared_lead_that_names_only_a_side_effect_still_counts() -> None:
    # True of every tool that shares it: no list of what a system can do.
    for lead in (
        "Each call revokes the previous credential. ",
        "Reads and removes the next message. ",  # reading too, but no word of ability
        "The service lets users create accounts. ",  # ability, but no reading
    ):
        tools = [spec("get_token", lead + "Get a token."), spec("get_key", lead + "Get a key.")]
        decisions = classify_tools(tools)
        assert [d.read_only for d in decisions] == [False, False], lead
        assert "after the lead" not in decisions[0].reason


def test_a_lead_must_be_shared_and_end_at_a_sentence_end() -> None:
    alone = [spec("ls", SYSTEM + "List the files."), spec("cat", "Print a file.")]
    assert [d.read_only for d in classify_tools(alone)] == [False, False]
    # The same opening words, but no sentence ends before the tools part.
    words = "Lets users create, read and write files and then "
    mid = [spec("ls", words + "lists them."), spec("rm", words + "removes one.")]
    assert [d.read_only for d in classify_tools(mid)] == [False, False]
    # A description that is all lead has no words of its own after it: read whole.
    same = [spec("a_get", "Gets a file."), spec("b_get", "Gets a file.")]
    assert all(d.read_only and "after the lead" not in d.reason for d in classify_tools(same))


def test_a_shared_lead_cannot_hide_a_side_effect_in_the_rest() -> None:
    tools = [
        spec("get_report", SYSTEM + "Get the report and mark it as read."),
        spec("list_jobs", SYSTEM + "List the jobs."),
    ]
    assert [d.read_only for d in classify_tools(tools)] == [False, True]


def test_shared_lead_must_open_the_description() -> None:
    with pytest.raises(ValueError, match="must open"):
        classify_tool(spec("ls", "List files."), shared_lead="This tool belongs")
    assert classify_tool(spec("ls", SYSTEM + "List."), shared_lead=SYSTEM.strip()).read_only
