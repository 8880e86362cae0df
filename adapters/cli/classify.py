"""`toolweave classify`: which tools of a file are read-only, and why.

    toolweave classify --tools FILE [--json] [--override NAME=true|false ...]
    toolweave classify --evaluate LABELLED_FILE [--json]
    ... [--ignore-annotations]

With ``--json`` it prints ``[{"name", "read_only", "source", "reason"}]``; otherwise a
table. ``--evaluate`` scores the classifier on a labelled file (a list of tools with
``"read_only": true|false``) and prints precision, recall and the tools it got wrong.
Bad files and bad overrides raise, and `toolweave.adapters.cli.app.main` turns that
into exit code 2 and one line on stderr.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from toolweave.readonly import ReadOnlyDecision, classify_tools
from toolweave.readonly_score import load_labeled, score_read_only
from toolweave.toolspec import load_tools_file

__all__ = ["classify", "parse_overrides"]

_BOOLEANS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def classify(
    tools: Annotated[
        Path | None, typer.Option("--tools", help="JSON file with a list of tools.")
    ] = None,
    evaluate: Annotated[
        Path | None,
        typer.Option(
            "--evaluate",
            help="Score the classifier on a labelled JSON file (tools with read_only: bool).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the decisions as JSON.")] = False,
    override: Annotated[
        list[str] | None,
        typer.Option(
            "--override", metavar="NAME=true|false", help="Force a tool's answer (repeatable)."
        ),
    ] = None,
    ignore_annotations: Annotated[
        bool,
        typer.Option(
            "--ignore-annotations", help="Ignore readOnlyHint/destructiveHint: words decide."
        ),
    ] = False,
) -> None:
    """Classify the tools of TOOLS as read-only or not (unsure means not)."""
    if (tools is None) == (evaluate is None):
        raise typer.BadParameter("give either --tools FILE or --evaluate FILE")
    if evaluate is not None:
        if override:
            raise typer.BadParameter("--override does not apply to --evaluate")
        _evaluate(evaluate, as_json, trust_annotations=not ignore_annotations)
        return
    assert tools is not None
    decisions = classify_tools(
        load_tools_file(tools),
        parse_overrides(override or []),
        trust_annotations=not ignore_annotations,
    )
    if as_json:
        print(json.dumps([d.to_dict() for d in decisions], ensure_ascii=False))
    else:
        render_decisions(decisions, Console(highlight=False, soft_wrap=True))


def _evaluate(path: Path, as_json: bool, *, trust_annotations: bool) -> None:
    score = score_read_only(load_labeled(path), trust_annotations=trust_annotations)
    if as_json:
        print(json.dumps(score.to_dict(), ensure_ascii=False))
        return
    print(score.summary())
    for label, names in (("wrongly read-only", score.wrongly_read_only), ("missed", score.missed)):
        if names:
            print(f"{label}: {', '.join(names)}")


def parse_overrides(items: Sequence[str]) -> dict[str, bool]:
    """``["send_email=false", ...]`` -> ``{"send_email": False}``; `typer.BadParameter` if bad."""
    overrides: dict[str, bool] = {}
    for item in items:
        name, sep, value = item.partition("=")
        answer = _BOOLEANS.get(value.strip().lower())
        if not sep or not name.strip() or answer is None:
            raise typer.BadParameter(
                f"override {item!r} must look like NAME=true or NAME=false",
                param_hint="'--override'",
            )
        overrides[name.strip()] = answer
    return overrides


def render_decisions(decisions: Sequence[ReadOnlyDecision], console: Console) -> None:
    """One row per tool: name, read-only yes/no, source, reason."""
    table = Table("tool", "read-only", "source", "reason")
    for d in decisions:
        answer = "[green]yes[/green]" if d.read_only else "[red]no[/red]"
        table.add_row(escape(d.name), answer, d.source, escape(d.reason))
    console.print(table)
