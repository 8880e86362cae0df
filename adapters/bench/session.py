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
- ``early_tools``: ``toolweave`` with `ProvisionalToolMiddleware` in the agent (read-only
  tools start while the message is decoded).

``--exact`` runs the ChatToolweave configurations on the exact engine
(`Engine(batch_invariant=True)`), where a single-token step equals the same token's row
in a multi-token pass: what is left of the calls that differ from ``constrained``'s
there comes from how the prompts were split into prefill passes (prompt reuse), not
from jump-forward or verification.

Every configuration follows the same turn: the model must call a tool after the user's
message, then answers in text after the tool results. Per turn: time to the first tool
start, turn latency, prompt tokens prefilled, decode passes, the calls. Measured in a
warm process and then, with ``--new-process``, in a new process per configuration over
the states the warm run left on disk. `session_summary` summarizes, prints and plots the
records.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from toolweave.adapters.bench.session_models import CONFIGS
from toolweave.adapters.bench.session_run import Conversation, conversations
from toolweave.adapters.bench.session_summary import (
    by_source,
    plot_report,
    print_report,
    ratios,
    summarize,
)
from toolweave.errors import ToolweaveError
from toolweave.models import MODELS, resolve_model

__all__ = ["bench_session", "ratios", "run_configs", "summarize"]

CONFIG_NAMES = CONFIGS  # the configurations `make_config` builds, in report order
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
    exact: bool = False,
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
            exact=exact,
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
    exact: Annotated[
        bool,
        typer.Option(
            "--exact",
            help="ChatToolweave on the exact engine (batch_invariant=True: single-token "
            "passes on one thread, equal to batched rows).",
        ),
    ] = False,
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
        "exact": exact,
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
            exact=exact,
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
        "exact_engine": exact,
        "llama_threads": llama_threads,
        "thread_sweep_ms": sweep,
        "startup": startup,
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "summary": summary,
        "ratios": ratios(summary),
        "by_source": by_source(records),
        "records": records,
    }
    json_out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if plot is not None:
        plot_report(report, plot)
    print_report(report, Console(highlight=False))
