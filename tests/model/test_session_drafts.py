"""Session drafts: argument text copied from a conversation's earlier calls and tool
results, verified like every draft, on the real SmolLM2 engine (default engine)."""

from __future__ import annotations

import json

import pytest
from reference_check import assert_same_tokens
from test_forecast import _tool

from toolweave.native.caller import ToolCaller
from toolweave.native.engine import Engine
from toolweave.prompting.chat_template import assistant_calls_message
from toolweave.prompting.conversation import SESSION_DRAFT_CHARS, session_texts
from toolweave.toolspec import ToolCall

TOOLS = [
    _tool("list_files", "List the files in a folder.", folder="The folder"),
    _tool("read_file", "Read a file.", path="The file's name"),
    _tool("get_ticket", "Look up a support ticket.", ticket_id="The ticket's id"),
]

#: (earlier call, its result, the assistant's answer, the next request).
SESSIONS = [
    (
        ToolCall("list_files", {"folder": "documents"}),
        {"files": ["quarterly_report_2026_final.txt", "meeting_notes_march.md"]},
        "Your documents folder holds quarterly_report_2026_final.txt and meeting_notes_march.md.",
        "Read the quarterly report file for me.",
    ),
    (
        ToolCall("list_files", {"folder": "support"}),
        {"open_tickets": ["TCK-2026-004417-BILLING", "TCK-2026-004502-LOGIN"]},
        "There are two open tickets: TCK-2026-004417-BILLING and TCK-2026-004502-LOGIN.",
        "Look up the billing ticket.",
    ),
    (
        ToolCall("read_file", {"path": "config/settings_production.yaml"}),
        {"content": "timeout: 30"},
        "The timeout in config/settings_production.yaml is 30 seconds.",
        "Read that same settings file again.",
    ),
    (
        ToolCall("get_ticket", {"ticket_id": "TCK-2026-004417-BILLING"}),
        {"status": "open", "owner": "maria.delgado@example.com"},
        "Ticket TCK-2026-004417-BILLING is open and owned by maria.delgado@example.com.",
        "Get me that ticket once more.",
    ),
]


def _messages(caller: ToolCaller, session: tuple[ToolCall, dict, str, str]) -> list[dict]:
    call, result, answer, request = session
    first = {"list_files": "Which files are there?", "read_file": "Read the settings file."}
    return [
        {"role": "user", "content": first.get(call.name, "Look up my ticket.")},
        {"role": "assistant", "content": caller.fmt.serialize_call(call)},
        {"role": "tool", "content": json.dumps(result)},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": request},
    ]


def test_session_texts_are_the_messages_before_the_last_request() -> None:
    msgs = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "call"},
        {"role": "tool", "content": "result"},
        {"role": "user", "content": "now"},
    ]
    assert session_texts(msgs) == ("first", "call", "result")
    assert session_texts("a bare request") == ()
    assert session_texts([{"role": "user", "content": "only"}]) == ()
    long = [{"role": "tool", "content": "x" * (SESSION_DRAFT_CHARS + 10) + "end"}, msgs[-1]]
    (kept,) = session_texts(long)
    assert len(kept) == SESSION_DRAFT_CHARS and kept.endswith("end")
    # A call handed to the template as `tool_calls`: its arguments, as toolweave writes them.
    called = assistant_calls_message([ToolCall("read_file", {"path": "a b.txt", "n": 2})])
    assert session_texts([msgs[1], called, msgs[-1]]) == ("first", '{"path":"a b.txt","n":2}')
    as_string = assistant_calls_message([ToolCall("f", {"x": 1})], arguments_as_string=True)
    assert session_texts([as_string, msgs[-1]]) == ('{"x": 1}',)


@pytest.mark.slow
def test_session_drafts_are_verified_and_keep_jumps_tokens(engine: Engine) -> None:
    caller = ToolCaller(engine, TOOLS)
    bare = ToolCaller(engine, TOOLS, session_drafts=False)
    drafted = accepted = 0
    for session in SESSIONS:
        msgs = _messages(caller, session)
        reference = caller.call(msgs, "jump")
        got = caller.call(msgs, "lossless")
        assert_same_tokens(reference.tokens, got, (session[3], reference.text, got.text))
        assert got.calls == reference.calls
        drafted += got.stats.session_drafted_tokens
        accepted += got.stats.session_accepted_tokens
        assert got.stats.session_accepted_tokens <= got.stats.session_drafted_tokens
        off = bare.call(msgs, "lossless")
        assert off.stats.session_drafted_tokens == 0
        assert_same_tokens(reference.tokens, off, session[3])
        fast = caller.call(msgs, "fast")
        assert fast.calls, fast.text
    # The sessions' values are long copies of earlier text: drafts are made and accepted.
    assert drafted > 0 and accepted > 0, (drafted, accepted)
    # A bare request has no past to draft from.
    one = caller.call(SESSIONS[0][3], "lossless")
    assert one.stats.session_drafted_tokens == 0
