"""`toolweave run`'s consent: the terminal question and the policy its flags build."""

from __future__ import annotations

import io

import anyio
import pytest

from toolweave.adapters.cli.consent import NO_TERMINAL, TerminalQuestion, cli_policy
from toolweave.consent import DENIED_BY_USER, ConsentDecision, ConsentRequest

REQUEST = ConsentRequest("create_note", {"title": "Dentist", "body": "Tue 10:00"}, 2)


@pytest.mark.parametrize(
    ("typed", "allowed"),
    [("y\n", True), ("YES\n", True), (" y \n", True), ("\n", False), ("n\n", False),
     ("", False), ("yy\n", False), ("y" * 500, False)],
)  # fmt: skip
def test_the_terminal_question_shows_the_call_and_only_yes_allows(
    typed: str, allowed: bool
) -> None:
    shown: list[str] = []
    question = TerminalQuestion(shown.append, io.StringIO(typed))
    assert question(REQUEST) is allowed
    assert shown == [
        'allow create_note({"title": "Dentist", "body": "Tue 10:00"}) (plan task 2)? [y/N] '
    ]


def decide(policy_args: dict[str, object], typed: str, tool: str) -> ConsentDecision:
    shown: list[str] = []
    policy = cli_policy(show=shown.append, **policy_args)  # type: ignore[arg-type]
    if isinstance(policy.callback, TerminalQuestion):
        policy.callback.stdin = io.StringIO(typed)
    request = ConsentRequest(tool, {"title": "x"})
    return anyio.run(policy.decide, request)


def test_the_flags_and_the_terminal_decide_as_documented() -> None:
    no_tty = {"yes": False, "allow": ["create_note"], "interactive": False}
    assert decide(no_tty, "", "create_note").allowed
    refused = decide(no_tty, "", "delete_note")
    assert not refused.allowed and refused.reason == NO_TERMINAL
    assert decide({**no_tty, "yes": True}, "", "delete_note").allowed
    tty = {**no_tty, "interactive": True}
    assert decide(tty, "", "create_note").allowed  # --allow: not asked
    assert decide(tty, "y\n", "delete_note") == ConsentDecision(True, "user")
    assert decide(tty, "\n", "delete_note") == ConsentDecision(False, "user", DENIED_BY_USER)
