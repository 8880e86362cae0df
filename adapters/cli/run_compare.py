"""`toolweave run --compare`: the run's model messages decoded again by a baseline.

`compare_messages` re-decodes every model message of a react run with the `constrained`
baseline decoder (same prompts, same model, tools not run again); `compare_plan` runs
the plan-out agent's prompts again prefilled from scratch without ExSpec drafts. Both
compare decode passes and time, and `print_comparison` shows the result as a table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from toolweave.adapters.cli.run_agents import SYSTEM, LLMCall

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage
    from langchain_core.tools import BaseTool
    from rich.console import Console

    from toolweave.adapters.cli.display import RunTrace

__all__ = ["compare_messages", "compare_plan", "print_comparison"]


def compare_messages(
    messages: Sequence[BaseMessage],
    tools: list[BaseTool],
    model: str | None,
    max_tokens: int,
    trace: RunTrace,
    chat_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Decode each model message again with the baseline (tools are not run again)."""
    from langchain_core.messages import AIMessage, SystemMessage

    from toolweave.adapters.langchain.chat_model import ChatToolweave

    trace.note("comparing: decoding the same messages with the constrained baseline")
    baseline = ChatToolweave(
        model=model,
        mode="constrained",
        max_tokens=max_tokens,
        auto_calls="user_turn",
        **(chat_options or {}),
    )
    rows: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        if not isinstance(m, AIMessage):
            continue
        history = [SystemMessage(SYSTEM), *messages[:i]]
        again = baseline.bind_tools(tools).invoke(history)
        ours, base = m.response_metadata.get("stats", {}), again.response_metadata["stats"]
        rows.append(
            {
                "message": len(rows) + 1,
                "fast_passes": ours.get("decode_passes", 0),
                "baseline_passes": base["decode_passes"],
                "fast_ms": ours.get("total_ms", 0.0),
                "baseline_ms": base["total_ms"],
                "same_calls": [(c["name"], c["args"]) for c in m.tool_calls]
                == [(c["name"], c["args"]) for c in again.tool_calls],
            }
        )
    return _with_speedup(rows)


def compare_plan(
    calls: Sequence[LLMCall],
    model: str | None,
    max_tokens: int,
    trace: RunTrace,
    chat_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run the Planner's and Arbiter's prompts again the plain way: every prompt prefilled
    from scratch (no saved or live state), greedy decoding under the same grammar without
    ExSpec drafts."""
    from toolweave.adapters.langchain.chat_model import ChatToolweave

    trace.note("comparing: the same prompts prefilled from scratch, decoded the same way")
    baseline = ChatToolweave(
        model=model,
        max_tokens=max(max_tokens, 256),
        reuse_prompt_cache=False,
        **(chat_options or {}),
    )
    rows: list[dict[str, Any]] = []
    for msgs, kind, bound, ours in calls:
        plain = {k: v for k, v in bound.items() if k != "exspec"}
        again = baseline.bind(**plain).invoke(list(msgs))
        base = again.response_metadata["stats"]
        mine = ours.get("stats", {})
        rows.append(
            {
                "message": f"{len(rows) // 2 + 1} {kind}",
                "fast_passes": mine.get("forward_passes", 0),
                "baseline_passes": base["forward_passes"],
                "fast_ms": ours.get("ms", 0.0),
                "baseline_ms": base["prompt_ms"] + base["total_ms"],
                "same_calls": again.content == ours.get("text"),
            }
        )
    return _with_speedup(rows)


def _with_speedup(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The comparison document: its rows and the baseline's time over ours."""
    fast = sum(r["fast_ms"] for r in rows)
    base_ms = sum(r["baseline_ms"] for r in rows)
    return {"messages": rows, "speedup": base_ms / fast if fast else None}


def print_comparison(console: Console, comparison: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title="toolweave vs the baseline (same prompts)")
    for col in ("message", "passes", "baseline passes", "ms", "baseline ms", "same output"):
        table.add_column(col)
    for r in comparison["messages"]:
        table.add_row(
            str(r["message"]),
            str(r["fast_passes"]),
            str(r["baseline_passes"]),
            f"{r['fast_ms']:.0f}",
            f"{r['baseline_ms']:.0f}",
            "yes" if r["same_calls"] else "no",
        )
    console.print(table)
    if comparison["speedup"]:
        console.print(f"speedup over the baseline: x{comparison['speedup']:.2f}")
