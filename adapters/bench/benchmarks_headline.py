"""The headline figures of the benchmark page: one row per suite, from the JSON files of
`toolweave bench all` (`headline_rows`, also the README's results table), and the
loaders the page shares with them. A missing or malformed file raises
`BenchmarkDocError` naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from toolweave.adapters.bench.report import md_table
from toolweave.errors import ToolweaveError

__all__ = [
    "GEMMA",
    "NAMES",
    "BenchmarkDocError",
    "Doc",
    "figures_of",
    "headline_rows",
    "headline_table",
    "load_doc",
]

Doc = Mapping[str, Any]
#: The suites of the page, in order; each has DIR/NAME.json.
NAMES = ("engine", "fastpath", "serving", "pipeline", "session")
#: Runs of suites on Gemma 3 270M kept next to the report directory: (suite, file stem).
GEMMA = (
    ("engine", "engine_gemma3"),
    ("fastpath", "fastpath_gemma3"),
    ("session", "session_bfcl_mcp_gemma3"),
)


class BenchmarkDocError(ToolweaveError):
    """A benchmark JSON file is missing or does not have the layout the page needs."""


def load_doc(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BenchmarkDocError(f"{path}: file not found (run `toolweave bench all`)") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BenchmarkDocError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise BenchmarkDocError(f"{path}: expected a JSON object, found {type(doc).__name__}")
    return doc


def figures_of(path: Path, make: Callable[[], Any]) -> Any:
    """`make()`, with a layout error turned into one line naming `path`."""
    try:
        return make()
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, StopIteration) as exc:
        raise BenchmarkDocError(
            f"{path}: unexpected layout ({type(exc).__name__}: {exc})"
        ) from None


def _suite_docs(report_dir: Path) -> dict[str, dict[str, Any]]:
    return {name: load_doc(report_dir / f"{name}.json") for name in NAMES}


# ---------------------------------------------------------------------- headline
def _headline(docs: Mapping[str, Doc], gemma_session: Doc | None) -> list[tuple[str, str, str]]:
    e, f, s, p, se = (docs[n] for n in NAMES)
    table, calls = e["cost_table"], e["calls"]
    modes = calls["modes"]
    fm = f["modes"]
    ss = s["summary"]
    ps, pr = p["summary"], p["ratios"]
    ram, ours = ss["llama_cpp_ram"], ss["toolweave"]
    return [
        (
            "engine",
            "cost of a pass; `constrained` vs `grammar` ms per output token",
            f"serial step {table['serial_step_ms']:.1f} ms; 4 sequences in one pass "
            f"x{table['ratios']['sequences']['4']:.2f} of a step; prefill "
            f"x{table['ratios']['prefill_per_token']:.2f} of a step per token; "
            f"{modes['constrained']['ms_per_token']:.1f} vs "
            f"{modes['grammar']['ms_per_token']:.1f} ms/token "
            f"(x{calls['grammar_over_constrained']:.2f})",
        ),
        (
            "fastpath",
            f"time to tool on {f['calls']} BFCL v4 calls (geometric mean)",
            f"`lossless` {fm['lossless']['time_to_tool_ms']:.0f} ms vs `constrained` "
            f"{fm['constrained']['time_to_tool_ms']:.0f} ms "
            f"(x{fm['lossless']['speedup_time_to_tool_vs_constrained']:.2f}) and `grammar` "
            f"{fm['grammar']['time_to_tool_ms']:.0f} ms; "
            f"{fm['lossless']['passes_vs_constrained']:.2f}x the decode passes; "
            f"output equals `jump` on {f['lossless_equals_jump']}/{f['calls']}",
        ),
        (
            "serving",
            f"{s['steps']} consecutive agent requests, ms per step (geometric mean)",
            f"`StateStore` {ours['step_ms_geomean']:.0f} ms "
            f"(x{ours['speedup_vs_no_reuse']:.2f} vs no reuse, "
            f"{ss['no_reuse']['step_ms_geomean']:.0f} ms) at {ours['memory_mb']:.0f} MB; "
            f"`LlamaRAMCache` {ram['step_ms_geomean']:.0f} ms at {ram['memory_mb']:.0f} MB",
        ),
        (
            "pipeline",
            f"Planner -> tools -> Arbiter on {p['requests']} BFCL multi-turn requests, "
            "end to end (geometric mean)",
            f"{ps['baseline']['e2e_ms']:.0f} ms -> {ps['both']['e2e_ms']:.0f} ms with "
            f"PromptWeaver + ExSpec (x{pr['e2e_both']:.2f}), {ps['all']['e2e_ms']:.0f} ms "
            f"with jump-forward too (x{pr['e2e_all']:.2f})",
        ),
        _session_row(se, gemma_session),
    ]


def _session_row(doc: Doc, gemma: Doc | None) -> tuple[str, str, str]:
    phase = "new_process" if "new_process" in doc["summary"] else "warm"
    rows, ratios = doc["summary"][phase], doc["ratios"][phase]
    ours, base = rows["toolweave"], rows["chat_llama_cpp"]
    return (
        "session",
        f"{len(doc['conversations'])} LangChain agent sessions of {doc['turns']} turns, "
        f"{phase.replace('_', ' ')}, time to the first tool start (median)",
        f"`ChatToolweave` {ours['first_tool_ms_median']:.0f} ms vs `ChatLlamaCpp` "
        f"{base['first_tool_ms_median']:.0f} ms "
        f"(x{ratios['first_tool_vs_chat_llama_cpp']:.2f}; prompt tokens prefilled a turn "
        f"{ours['prefilled_tokens_mean']:.0f} vs {base['prefilled_tokens_mean']:.0f}, "
        f"see docs/session.md){_warm_ratio(doc, phase)}{_source_ratios(doc, phase)}; "
        f"session drafts {ours['session_accepted']}/{ours['session_drafted']} tokens accepted"
        f"{_gemma_ratios(gemma, phase)}",
    )


def _gemma_ratios(doc: Doc | None, phase: str) -> str:
    """The same ratios from the Gemma 3 run kept beside the report (`GEMMA`), if any."""
    if doc is None:
        return ""
    ratios = doc["ratios"]
    ratio = ratios.get(phase, {}).get("first_tool_vs_chat_llama_cpp")
    if ratio is None:
        return ""
    warm = ratios.get("warm", {}).get("first_tool_vs_chat_llama_cpp")
    aside = f" (warm x{warm:.2f})" if phase != "warm" and warm is not None else ""
    return f"; Gemma 3 270M x{ratio:.2f}{aside}"


def _source_ratios(doc: Doc, phase: str) -> str:
    """The same ratio on each source's turns alone, when the run has more than one source."""
    parts = []
    for source, part in sorted(doc.get("by_source", {}).items()):
        ratio = part.get("ratios", {}).get(phase, {}).get("first_tool_vs_chat_llama_cpp")
        if ratio is not None:
            parts.append(f"{source.upper()} turns x{ratio:.2f}")
    return f"; {', '.join(parts)}" if parts else ""


def _warm_ratio(doc: Doc, phase: str) -> str:
    """The warm process's ratio beside the new process's (it may fall the other way)."""
    warm = doc["ratios"].get("warm", {}).get("first_tool_vs_chat_llama_cpp")
    if phase == "warm" or warm is None:
        return ""
    return f"; warm process x{warm:.2f}"


def headline_rows(report_dir: Path) -> list[tuple[str, str, str]]:
    """(suite, what is measured, headline figures) per suite: the README's results table."""
    docs = _suite_docs(report_dir)
    gemma_path = report_dir.parent / f"{dict(GEMMA)['session']}.json"
    gemma = load_doc(gemma_path) if gemma_path.exists() else None
    return figures_of(report_dir, lambda: _headline(docs, gemma))


def headline_table(report_dir: Path) -> str:
    """`headline_rows` as a Markdown table."""
    return md_table(["suite", "measured", "result"], headline_rows(report_dir))
