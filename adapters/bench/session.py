"""`toolweave bench session`: LangChain agent sessions against what users run today.

    toolweave bench session --json OUT [--plot OUT.png] [--bfcl N] [--mcp N] [--turns T]

Several turns of `langchain.agents.create_agent` with tools, the prompt growing with the
history: BFCL v4 ``multi_turn_base`` conversations (tools run by BFCL's own classes) and
conversations over the demo MCP servers (stdio, through `MCPHub`). Configurations, on
the same model, interleaved per turn in one process (`session_models`):

- ``chat_llama_cpp``: langchain-community's `ChatLlamaCpp`, greedy, the decode thread
  count of a quick 1..cores sweep, 512-token batches, llama-cpp-python's `LlamaDiskCache`;
  it takes only a tool *name* as ``tool_choice``, so it is told the tool each turn needs
  (an oracle the others do without);
- ``grammar``: llama-cpp-python's `create_chat_completion` under the tools' JSON schema;
- ``constrained``: `ChatToolweave(mode="constrained")`, no state reuse;
- ``toolweave``: `ChatToolweave` as shipped (``lossless``, saved prompt states, drafts
  from the session's earlier calls and results);
- ``no_session_drafts``: the same without the session drafts (what they add).

Every configuration follows the same turn: the model must call a tool after the user's
message, then answers in text after the tool results. Per turn: time to the first tool
start, turn latency, prompt tokens prefilled, decode passes, the calls. Measured in a
warm process and then, with ``--new-process``, in a new process per configuration over
the states the warm run left on disk.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from toolweave.adapters.bench.plotting import pyplot
from toolweave.adapters.bench.session_run import Conversation, conversations
from toolweave.errors import ToolweaveError
from toolweave.models import MODELS, resolve_model

__all__ = ["bench_session", "ratios", "run_configs", "summarize"]

CONFIG_NAMES = ("chat_llama_cpp", "grammar", "constrained", "toolweave", "no_session_drafts")
#: Longest a new-process run of one configuration may take, per turn.
_WORKER_S_PER_TURN = 300.0


def run_configs(
    names: Sequence[str],
    convs: Sequence[Conversation],
    *,
    model_path: Path,
    n_ctx: int,
    max_tokens: int,
    llama_threads: int,
    state_dir: Path,
    phase: str,
    warm: bool,
    console: Console | None = None,
    chat_template: str | None = None,
) -> tuple[list[dict[str, Any]], float]:
    """Build configurations `names`, optionally warm them up, and run every turn; returns
    the turn records and the seconds the configurations took to build."""
    from toolweave.adapters.bench.session_models import make_config
    from toolweave.adapters.bench.session_run import run_session, warm_up

    t0 = time.perf_counter()
    configs = [
        make_config(
            n,
            model_path,
            n_ctx=n_ctx,
            max_tokens=max_tokens,
            llama_threads=llama_threads,
            state_dir=state_dir,
            chat_template=chat_template,
        )
        for n in names
    ]
    startup_s = time.perf_counter() - t0
    try:
        if warm:
            warm_up(configs)
        show = (lambda line: console.print(line)) if console is not None else (lambda _l: None)
        records = run_session(configs, convs, phase=phase, state_dir=state_dir, progress=show)
    finally:
        for cfg in configs:
            cfg.close()
    return records, startup_s


def _new_processes(
    names: Sequence[str],
    convs: Sequence[Conversation],
    spec: dict[str, Any],
    root: Path,
    console: Console,
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """One subprocess per configuration over the states on disk; its records and the
    seconds from its start to its configuration built."""
    records: list[dict[str, Any]] = []
    startup: dict[str, float] = {}
    turns = sum(len(c.turns) for c in convs)
    for name in names:
        job = root / f"worker-{name}"
        job.mkdir(parents=True, exist_ok=True)
        doc = {**spec, "config": name, "conversations": [c.to_json() for c in convs]}
        (job / "spec.json").write_text(json.dumps(doc), encoding="utf-8")
        cmd = [sys.executable, "-m", "toolweave.adapters.bench.session_worker", str(job)]
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=_WORKER_S_PER_TURN * turns + 120
            )
        except subprocess.TimeoutExpired:
            console.print(f"new process {name}: timed out")
            continue
        if proc.returncode != 0:
            tail = " ".join((proc.stderr or "").strip().splitlines()[-1:])[:300]
            console.print(f"new process {name}: failed ({proc.returncode}) {tail}")
            continue
        try:
            out = json.loads((job / "out.json").read_text(encoding="utf-8"))
            records += list(out["records"])
            startup[name] = float(out["startup_s"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            console.print(f"new process {name}: unreadable output ({exc})")
    return records, startup


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per phase and configuration: medians of the latencies, means of the counts, on
    how many turns the calls equal those of ``constrained`` in the same phase, the
    session drafts' acceptance, and the same latencies and passes on later turns (the
    second turn on, where a session has a past to draft from)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    ref = {
        (r["phase"], r["conversation"], r["turn"]): r["calls"]
        for r in records
        if r["config"] == "constrained"
    }
    for phase in dict.fromkeys(r["phase"] for r in records):
        rows = [r for r in records if r["phase"] == phase]
        out[phase] = {}
        for name in dict.fromkeys(r["config"] for r in rows):
            mine = [r for r in rows if r["config"] == name]
            later = [r for r in mine if r["turn"] > 0]
            keys = [(phase, r["conversation"], r["turn"]) for r in mine]
            same = [r["calls"] == ref[k] for r, k in zip(mine, keys, strict=True) if k in ref]
            firsts = [r["first_tool_ms"] for r in mine if r["first_tool_ms"] is not None]
            drafted = sum(r.get("session_drafted", 0) for r in mine)
            accepted = sum(r.get("session_accepted", 0) for r in mine)
            out[phase][name] = {
                "turns": len(mine),
                "turn_ms_median": _median([r["turn_ms"] for r in mine]),
                # Background work a turn left (state saves), waited for untimed.
                "settle_ms_median": _median([r.get("settle_ms", 0.0) for r in mine]),
                "first_tool_ms_median": _median(firsts),
                "turns_with_tool": len(firsts),
                "prefilled_tokens_mean": statistics.fmean(r["prefilled_tokens"] for r in mine),
                "decode_passes_mean": statistics.fmean(r["decode_passes"] for r in mine),
                "errors": sum(1 for r in mine if r["error"]),
                "same_calls_as_constrained": sum(same) if same else None,
                "session_drafted": drafted,
                "session_accepted": accepted,
                "session_acceptance": accepted / drafted if drafted else None,
                "later_turns": len(later),
                "later_first_tool_ms_median": _median(
                    [r["first_tool_ms"] for r in later if r["first_tool_ms"] is not None]
                ),
                "later_decode_passes_mean": statistics.fmean(r["decode_passes"] for r in later)
                if later
                else None,
            }
    return out


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def ratios(summary: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, float | None]]:
    """Per phase: ChatToolweave as shipped against `ChatLlamaCpp` in time to the first
    tool start and turn latency (how many times faster), and what the session drafts
    add on later turns (``no_session_drafts`` over ``toolweave``)."""
    out: dict[str, dict[str, float | None]] = {}
    for phase, rows in summary.items():
        tw = rows.get("toolweave", {})
        base = rows.get("chat_llama_cpp", {})
        bare = rows.get("no_session_drafts", {})
        out[phase] = {
            "first_tool_vs_chat_llama_cpp": _ratio(
                base.get("first_tool_ms_median"), tw.get("first_tool_ms_median")
            ),
            "turn_vs_chat_llama_cpp": _ratio(base.get("turn_ms_median"), tw.get("turn_ms_median")),
            "session_drafts_later_first_tool": _ratio(
                bare.get("later_first_tool_ms_median"), tw.get("later_first_tool_ms_median")
            ),
            "session_drafts_later_decode_passes": _ratio(
                bare.get("later_decode_passes_mean"), tw.get("later_decode_passes_mean")
            ),
        }
    return out


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}{unit}"
    return f"{value}{unit}"


def _print(report: dict[str, Any], console: Console) -> None:
    for phase, rows in report["summary"].items():
        table = Table(title=f"session turns, {phase.replace('_', ' ')} (medians; means of counts)")
        for col in ("config", "turns", "1st tool", "turn", "prefilled", "decode passes"):
            table.add_column(col, justify="left" if col == "config" else "right")
        table.add_column("same calls as constrained", justify="right")
        table.add_column("session drafts accepted", justify="right")
        table.add_column("errors", justify="right")
        for name, m in rows.items():
            same = m["same_calls_as_constrained"]
            drafted = m.get("session_drafted", 0)
            table.add_row(
                name,
                str(m["turns"]),
                _fmt(m["first_tool_ms_median"], " ms"),
                _fmt(m["turn_ms_median"], " ms"),
                _fmt(m["prefilled_tokens_mean"]),
                _fmt(m["decode_passes_mean"]),
                "-" if same is None else f"{same}/{m['turns']}",
                f"{m['session_accepted']}/{drafted}" if drafted else "-",
                str(m["errors"]),
            )
        console.print(table)
        r = report.get("ratios", {}).get(phase, {})
        shown = {k: f"x{v:.2f}" for k, v in r.items() if v is not None}
        if shown:
            console.print("  " + ", ".join(f"{k} {v}" for k, v in shown.items()))


def _plot(report: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    summary = report["summary"]
    names = list(dict.fromkeys(n for rows in summary.values() for n in rows))
    phases = list(summary)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / max(1, len(phases))
    for ax, key, title in (
        (axes[0], "first_tool_ms_median", "time to first tool start (median, ms)"),
        (axes[1], "turn_ms_median", "turn latency (median, ms)"),
    ):
        for j, phase in enumerate(phases):
            values = [summary[phase].get(n, {}).get(key) or 0.0 for n in names]
            xs = [i + (j - (len(phases) - 1) / 2) * width for i in range(len(names))]
            ax.bar(xs, values, width=width, label=phase.replace("_", " "))
        ax.set_xticks(range(len(names)), names, rotation=15)
        ax.set_title(title)
        ax.legend()
    template = report.get("chat_template")
    on = f" with the {template} template" if template else ""
    fig.suptitle(f"LangChain agent sessions on {report['model']['name']}{on}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def bench_session(
    json_out: Annotated[Path, typer.Option("--json", help="Where to write the results.")],
    plot: Annotated[Path | None, typer.Option("--plot", help="PNG of the per-config bars.")] = None,
    model: Annotated[
        str | None, typer.Option("--model", help=f"GGUF path or {', '.join(MODELS)}.")
    ] = None,
    bfcl: Annotated[int, typer.Option("--bfcl", min=0, help="BFCL multi-turn sessions.")] = 4,
    mcp: Annotated[int, typer.Option("--mcp", min=0, max=2, help="Demo-server sessions.")] = 2,
    turns: Annotated[int, typer.Option("--turns", min=1, max=4, help="Turns per session.")] = 3,
    max_tools: Annotated[
        int, typer.Option("--max-tools", min=1, help="Tools offered per BFCL session (at least).")
    ] = 8,
    configs: Annotated[
        str, typer.Option("--configs", help=f"Comma-separated subset of {', '.join(CONFIG_NAMES)}.")
    ] = ",".join(CONFIG_NAMES),
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=8, help="Per message.")] = 96,
    n_ctx: Annotated[int, typer.Option("--n-ctx", min=512)] = 4096,
    llama_threads: Annotated[
        int, typer.Option("--llama-threads", min=0, help="llama-cpp-python threads (0: sweep).")
    ] = 0,
    new_process: Annotated[
        bool, typer.Option("--new-process/--no-new-process", help="Also a new process per config.")
    ] = True,
    state_dir: Annotated[
        Path | None, typer.Option("--state-dir", help="Saved states (default: a temp dir).")
    ] = None,
    chat_template: Annotated[
        Path | None,
        typer.Option(
            "--chat-template",
            metavar="FILE",
            help="Jinja chat template replacing the model's own, in every configuration.",
        ),
    ] = None,
) -> None:
    """Multi-turn LangChain agent sessions: ChatLlamaCpp, grammar, ChatToolweave."""
    from toolweave.native.baselines.chat_llama_cpp import best_thread_count, chat_llama_cpp_missing

    console = Console(highlight=False, stderr=True)
    names = [n.strip() for n in configs.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIG_NAMES]
    if unknown or not names:
        raise ToolweaveError(f"unknown config {unknown or '(none)'}; choose from {CONFIG_NAMES}")
    missing = chat_llama_cpp_missing() if "chat_llama_cpp" in names else None
    if missing is not None:
        console.print(f"skipping chat_llama_cpp: {missing}")
        names.remove("chat_llama_cpp")
    template = None
    if chat_template is not None:
        from toolweave.prompting.template_file import load_chat_template

        template = load_chat_template(chat_template)
        if "grammar" in names:  # its prompt is toolweave's own tool prompt
            console.print("skipping grammar: it renders toolweave's tool prompt, no template")
            names.remove("grammar")
    if not names:
        raise ToolweaveError("no configuration left to run")
    path = resolve_model(model)
    convs = conversations(bfcl, mcp, turns, max_tools)
    sweep: dict[int, float] = {}
    if llama_threads == 0 and {"chat_llama_cpp", "grammar"} & set(names):
        llama_threads, sweep = best_thread_count(path, convs[0].turns[0] * 40)
        console.print(f"llama-cpp-python threads: {llama_threads} (ms/step {sweep})")
    llama_threads = llama_threads or (os.cpu_count() or 1)
    root = Path(tempfile.mkdtemp(prefix="toolweave-session-")) if state_dir is None else state_dir
    root.mkdir(parents=True, exist_ok=True)
    spec = {
        "model": str(path),
        "n_ctx": n_ctx,
        "max_tokens": max_tokens,
        "llama_threads": llama_threads,
        "state_dir": str(root),
        "chat_template": template,
    }
    load_before = os.getloadavg()
    try:
        records, warm_startup = run_configs(
            names,
            convs,
            model_path=path,
            n_ctx=n_ctx,
            max_tokens=max_tokens,
            llama_threads=llama_threads,
            state_dir=root,
            phase="warm",
            warm=True,
            console=console,
            chat_template=template,
        )
        startup: dict[str, Any] = {"warm_all_configs_s": warm_startup}
        if new_process:
            more, per_config = _new_processes(names, convs, spec, root, console)
            records += more
            startup["new_process_s"] = per_config
    finally:
        if state_dir is None:
            shutil.rmtree(root, ignore_errors=True)
    summary = summarize(records)
    report = {
        "benchmark": "session",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "model": {"name": path.name, "path": str(path)},
        "chat_template": None if chat_template is None else chat_template.name,
        "configs": names,
        "conversations": [c.to_json() for c in convs],
        "turns": turns,
        "max_tokens": max_tokens,
        "n_ctx": n_ctx,
        "llama_threads": llama_threads,
        "thread_sweep_ms": sweep,
        "startup": startup,
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "summary": summary,
        "ratios": ratios(summary),
        "records": records,
    }
    json_out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if plot is not None:
        _plot(report, plot)
    _print(report, Console(highlight=False))
