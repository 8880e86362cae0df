"""Consent on the command line: `toolweave run` asks on a terminal, denies without one.

On a terminal every call of a tool that is not read-only is shown with its arguments
and runs only after ``y``; ``--yes`` allows every side effect and ``--allow TOOL``
the named ones without asking. Without a terminal (stdin is not a tty) nothing can
be asked, so a side effect runs only when ``--yes`` or ``--allow`` covers it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TextIO

import typer

from toolweave.consent import ConsentPolicy, ConsentRequest
from toolweave.tools import Tool

__all__ = [
    "NO_TERMINAL",
    "TerminalQuestion",
    "check_tool_names",
    "cli_policy",
    "consent_note",
    "read_only_overrides",
]

#: What the model reads for a side effect that no flag allows when nobody can be asked.
NO_TERMINAL = (
    "not run: no terminal to ask the user for consent (toolweave run --yes or --allow TOOL)"
)
#: Longest answer line read from the terminal.
MAX_ANSWER = 64


class TerminalQuestion:
    """Asks ``allow tool({...})? [y/N]`` and reads one line; only y or yes allows.

    ``show`` prints the question (the live display, so it never splits another line);
    questions are asked one at a time, whichever thread asks.
    """

    def __init__(self, show: Callable[[str], None], stdin: TextIO | None = None) -> None:
        self.show = show
        self.stdin = stdin
        self._lock = threading.Lock()

    def __call__(self, request: ConsentRequest) -> bool:
        where = f" (plan task {request.task})" if request.task is not None else ""
        with self._lock:
            self.show(f"allow {request.call_text()}{where}? [y/N] ")
            answer = (self.stdin or sys.stdin).readline(MAX_ANSWER)
        return answer.strip().lower() in ("y", "yes")


def cli_policy(
    *, yes: bool, allow: Iterable[str], interactive: bool, show: Callable[[str], None]
) -> ConsentPolicy:
    """The policy of one `toolweave run`: ``--yes``, ``--allow``, and a terminal or not."""
    if yes:
        return ConsentPolicy.allow_all()
    if interactive:
        return ConsentPolicy.ask(TerminalQuestion(show), allow=allow)
    return ConsentPolicy.allow_tools(allow, NO_TERMINAL)


def read_only_overrides(read_only: Sequence[str], not_read_only: Sequence[str]) -> dict[str, bool]:
    """``--read-only`` and ``--not-read-only`` as ``{name: read_only}``; a name in both
    is a usage error."""
    both = sorted(set(read_only) & set(not_read_only))
    if both:
        raise typer.BadParameter(
            f"{', '.join(both)} cannot be both --read-only and --not-read-only"
        )
    return {**dict.fromkeys(read_only, True), **dict.fromkeys(not_read_only, False)}


def check_tool_names(tools: Sequence[Tool], names: Sequence[str], flag: str) -> None:
    """A usage error when ``names`` (given to ``flag``) holds a name no tool has."""
    known = {t.name for t in tools}
    unknown = sorted(set(names) - known)
    if unknown:
        raise typer.BadParameter(
            f"{flag} names no tool of these servers: {', '.join(unknown)} "
            f"(tools: {', '.join(sorted(known))})"
        )


def consent_note(tools: Sequence[Tool], yes: bool, allowed: Sequence[str], tty: bool) -> str:
    """One display line: which tools have side effects and how their calls are decided."""
    effects = [t.name for t in tools if not t.read_only]
    if not effects:
        return "no tool has side effects"
    if yes:
        how = "all allowed (--yes)"
    elif tty:
        how = "each call asked on the terminal" + (
            f", except {', '.join(allowed)} (--allow)" if allowed else ""
        )
    else:
        how = "denied without a terminal" + (
            f", except {', '.join(allowed)} (--allow)" if allowed else ""
        )
    return f"side effects ({', '.join(effects)}): {how}"
