"""Read-only decisions through `MCPHub` on a real stdio server whose hints overclaim:
the trust policy, per-server ``trust_annotations``, ``read_only_overrides``, and two
servers whose derived names clash.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from toolweave.adapters.cli.app import main
from toolweave.adapters.mcp.client import MCPHub, ServerConfig
from toolweave.adapters.mcp.hub import ServerNameError
from toolweave.errors import ToolSpecError

HINT_SERVER = Path(__file__).resolve().parents[1] / "data" / "hint_server.py"
COMMAND = f"{sys.executable} {HINT_SERVER}"
PREAMBLE_SERVER = Path(__file__).resolve().parents[1] / "data" / "preamble_server.py"


def read_only(hub: MCPHub) -> dict[str, bool]:
    return {tool.name: tool.read_only for tool in hub.tools}


def test_hints_are_checked_and_overrides_win() -> None:
    # Server names that are read verbs: "view_clear_history" would read as a view.
    trusted = ServerConfig.parse(f"view={COMMAND}")
    untrusted = ServerConfig.parse(f"show={COMMAND}", trust_annotations=False)
    overrides = {"view_list_items": False, "show_city_weather": True}
    with MCPHub([trusted, untrusted], read_only_overrides=overrides) as hub:
        assert read_only(hub) == {
            "view_get_report": False,  # destructiveHint beats readOnlyHint
            "view_city_weather": True,  # the hint, uncontradicted
            "view_clear_history": False,  # classified on the server's own name
            "view_list_items": False,  # override
            "show_get_report": True,  # hints ignored: "get" decides
            "show_city_weather": True,  # override
            "show_clear_history": False,
            "show_list_items": True,  # "list" decides
        }
        decisions = hub.read_only_decisions
        assert decisions["view_get_report"].source == "annotations"
        assert "destructiveHint" in decisions["view_get_report"].reason
        assert decisions["view_list_items"].source == "override"
        assert decisions["view_clear_history"].reason == "name has 'clear' (side effect)"
        assert hub.call("view_list_items").text == "ran list_items"


def test_an_override_naming_no_tool_is_a_clear_error() -> None:
    with pytest.raises(ToolSpecError, match="unknown tools: no_such_tool"):
        MCPHub([COMMAND], read_only_overrides={"no_such_tool": True})


def test_clashing_derived_server_names_become_unique() -> None:
    with MCPHub([COMMAND, COMMAND]) as hub:
        assert hub.servers == ("hint_server", "hint_server_2")
        names = [tool.name for tool in hub.tools]
        assert "hint_server_2_clear_history" in names and "hint_server_clear_history" in names
        assert hub.call("hint_server_2_city_weather").text == "ran city_weather"
        assert read_only(hub)["hint_server_2_city_weather"] is True


def test_the_same_explicit_name_twice_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(ServerNameError, match="'notes': two servers have this name"):
        MCPHub([f"notes={COMMAND}", f"notes={COMMAND}"])
    # A derived name steps aside for an explicit one.
    with MCPHub([COMMAND, f"hint_server={COMMAND}"]) as hub:
        assert hub.servers == ("hint_server_2", "hint_server")
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "hi", "--server", f"x={COMMAND}", "--server", f"x={COMMAND}"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.startswith("toolweave: error: ") and err.count("\n") == 1, err


def test_a_preamble_the_servers_tools_share_is_not_their_own_words() -> None:
    with MCPHub([f"store={sys.executable} {PREAMBLE_SERVER}"]) as hub:
        assert read_only(hub) == {
            "list_files": True,  # "create" and "write" are the store's, in the preamble
            "make_dir": False,  # unsure
            "get_token": False,  # the shared lead revokes: true of both tools
            "get_key": False,
            "status": False,  # its "delete" is shared by no other tool
        }
        reason = hub.read_only_decisions["list_files"].reason
        assert "after the lead shared with other tools: 'This tool belongs" in reason
        assert hub.call("list_files").text == "ran list_files"
