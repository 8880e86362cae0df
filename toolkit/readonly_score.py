"""Score the read-only classifier on a labelled file of tools (`toolweave classify --evaluate`).

A labelled file is a JSON list of ``{"name", "description", "annotations" (or null),
"read_only": bool, ...}``; other keys ("server", "why", "parameters") are kept out of
the decision. Rows are scored one by one, so two servers' tools may share a name.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolweave.errors import ToolSpecError
from toolweave.readonly import classify_tool
from toolweave.toolspec import ToolSpec

__all__ = ["LabeledTool", "ReadOnlyScore", "load_labeled", "score_read_only"]


@dataclass(frozen=True)
class LabeledTool:
    """One tool of a labelled file and whether it really is read-only."""

    spec: ToolSpec
    read_only: bool
    server: str = ""


@dataclass(frozen=True)
class ReadOnlyScore:
    """Precision and recall of the "read-only" answers on a labelled set.

    ``wrongly_read_only`` lists tools with side effects called read-only (precision's
    misses, the costly kind); ``missed`` lists read-only tools called not read-only.
    """

    tools: int
    read_only: int
    true_positives: int
    wrongly_read_only: tuple[str, ...]
    missed: tuple[str, ...]

    @property
    def precision(self) -> float:
        """Share of the "read-only" answers that are right (1.0 when there are none)."""
        answered = self.true_positives + len(self.wrongly_read_only)
        return self.true_positives / answered if answered else 1.0

    @property
    def recall(self) -> float:
        """Share of the read-only tools that are called read-only (1.0 when there are none)."""
        return self.true_positives / self.read_only if self.read_only else 1.0

    def to_dict(self) -> dict[str, Any]:
        """The score as JSON-ready data (``toolweave classify --evaluate FILE --json``)."""
        return {
            "tools": self.tools,
            "read_only": self.read_only,
            "precision": round(self.precision, 4),
            "recall": round(self.recall, 4),
            "true_positives": self.true_positives,
            "wrongly_read_only": list(self.wrongly_read_only),
            "missed": list(self.missed),
        }

    def summary(self) -> str:
        """One line: "precision 1.000, recall 0.850 on 400 tools (180 read-only)"."""
        return (
            f"precision {self.precision:.3f}, recall {self.recall:.3f} on {self.tools} tools "
            f"({self.read_only} read-only; {len(self.wrongly_read_only)} wrongly called "
            f"read-only, {len(self.missed)} missed)"
        )


def load_labeled(path: str | Path) -> list[LabeledTool]:
    """Read a labelled file; `ToolSpecError` (one line) when it is missing or malformed."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ToolSpecError(None, f"labelled file {file} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolSpecError(None, f"cannot read labelled file {file}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ToolSpecError(None, f"labelled file {file} is not valid JSON: {exc.msg}") from None
    if not isinstance(data, list):
        raise ToolSpecError(None, f"labelled file {file} must hold a JSON list of tools")
    return [_labeled(row, i) for i, row in enumerate(data)]


def score_read_only(
    tools: Iterable[LabeledTool], *, trust_annotations: bool = True
) -> ReadOnlyScore:
    """Classify every tool (without overrides) and compare with its label."""
    tools = list(tools)
    tp, wrong, missed = 0, [], []
    for tool in tools:
        said = classify_tool(tool.spec, trust_annotations=trust_annotations).read_only
        where = f"{tool.server}:{tool.spec.name}" if tool.server else tool.spec.name
        if said and tool.read_only:
            tp += 1
        elif said:
            wrong.append(where)
        elif tool.read_only:
            missed.append(where)
    labelled = sum(t.read_only for t in tools)
    return ReadOnlyScore(len(tools), labelled, tp, tuple(wrong), tuple(missed))


def _labeled(row: object, index: int) -> LabeledTool:
    if not isinstance(row, Mapping):
        raise ToolSpecError(None, f"labelled tool #{index} must be an object")
    label = row.get("read_only")
    if not isinstance(label, bool):
        raise ToolSpecError(row.get("name"), f"labelled tool #{index} needs read_only: bool")
    spec = ToolSpec.from_dict(
        {
            "name": row.get("name"),
            "description": row.get("description") or "",
            "annotations": row.get("annotations") or {},
        }
    )
    return LabeledTool(spec, label, str(row.get("server") or ""))
