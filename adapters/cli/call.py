"""`toolweave call --tools FILE --query TEXT`: one tool call from the local model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from toolweave.checkpoints import session_name
from toolweave.disk_cache import cache_root, parse_size
from toolweave.formats import FORMATS, get_format
from toolweave.models import MODELS, resolve_model
from toolweave.modes import MODES, check_mode
from toolweave.sampling import Sampling
from toolweave.toolspec import ToolCall, ToolSpec, load_tools_file

if TYPE_CHECKING:
    from toolweave.native.caller import ToolCaller
    from toolweave.native.engine import Engine
    from toolweave.results import CallResult

__all__ = [
    "SeedOption",
    "TemperatureOption",
    "TopKOption",
    "TopPOption",
    "call",
    "cli_sampling",
    "open_engine",
    "render_result",
]

#: Context window of `call`: room for a long tool prompt, never past what the model saw.
CALL_CONTEXT = 8192
#: Most calls `--max-calls` may ask for (one answer, one context window).
MAX_CALLS = 64

_MODEL_HELP = f"GGUF path or model name ({', '.join(MODELS)}); default: the embedded SmolLM2."

#: The sampling options of `call` and `run` (docs/sampling.md).
TemperatureOption = Annotated[
    float, typer.Option("--temperature", help="Sampling temperature (0: greedy decoding).")
]
TopPOption = Annotated[
    float, typer.Option("--top-p", help="Nucleus sampling: the likeliest tokens up to this total.")
]
TopKOption = Annotated[int, typer.Option("--top-k", help="Sample among the K likeliest (0: off).")]
SeedOption = Annotated[
    int | None, typer.Option("--seed", help="Sampler seed: the same seed, the same answer.")
]
#: `--cache-limit` of the commands that save prompt states.
CacheLimitOption = Annotated[
    str | None,
    typer.Option(
        "--cache-limit",
        help="Disk limit of all saved states, e.g. 2GiB or none "
        "(default: $TOOLWEAVE_CACHE_LIMIT, else 4GiB).",
    ),
]


def cli_sampling(temperature: float, top_p: float, top_k: int, seed: int | None) -> Sampling:
    """The sampling settings of the command line, or a one-line `typer.BadParameter`."""
    try:
        return Sampling(temperature=temperature, top_p=top_p, top_k=top_k, seed=seed)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def open_engine(model: str | None, n_ctx: int = CALL_CONTEXT) -> Engine:
    """Load `model` (a path or a known name) with a context of `n_ctx`, capped at the
    model's training context."""
    from toolweave.native.engine import Engine

    engine = Engine(resolve_model(model), n_ctx=n_ctx)
    if 0 < engine.n_ctx_train < n_ctx:
        path = engine.model_path
        engine.close()
        engine = Engine(path, n_ctx=engine.n_ctx_train)
    return engine


def call(
    tools: Annotated[Path, typer.Option("--tools", help="JSON file with a list of tools.")],
    query: Annotated[str, typer.Option("--query", help="The user request.")],
    mode: Annotated[
        str, typer.Option("--mode", help=f"Decoding mode: {', '.join(MODES)}.")
    ] = "constrained",
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    model: Annotated[str | None, typer.Option("--model", help=_MODEL_HELP)] = None,
    fmt: Annotated[
        str | None,
        typer.Option("--format", help=f"Call format ({', '.join(FORMATS)}); default: the model's."),
    ] = None,
    max_calls: Annotated[
        int,
        typer.Option(
            "--max-calls", min=0, max=MAX_CALLS, help="Most calls in the answer (0: no limit)."
        ),
    ] = 1,
    max_tokens: Annotated[
        int,
        typer.Option("--max-tokens", min=1, max=CALL_CONTEXT, help="Most tokens in the answer."),
    ] = 512,
    chat_template: Annotated[
        Path | None,
        typer.Option(
            "--chat-template",
            metavar="FILE",
            help="Jinja chat template replacing the model's own (default: the GGUF's).",
        ),
    ] = None,
    prompt_cache: Annotated[
        Path | None,
        typer.Option(
            "--prompt-cache",
            metavar="DIR",
            help="Saved prompt states, reused by later calls of the same model "
            "[default: <cache root>/prompt-states].",
        ),
    ] = None,
    cache_limit: CacheLimitOption = None,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Prefill the prompt from scratch, save nothing.")
    ] = False,
    temperature: TemperatureOption = 0.0,
    top_p: TopPOption = 1.0,
    top_k: TopKOption = 0,
    seed: SeedOption = None,
) -> None:
    """Answer QUERY with a tool call from TOOLS."""
    if not query.strip():  # the model would still pick a tool and invent its arguments
        raise typer.BadParameter("--query is empty: say what the call is for")
    # Imported here: llama.cpp loads in this process only when a call is made.
    from toolweave.native.caller import ToolCaller
    from toolweave.prompting.template_file import load_chat_template

    specs = _check_call_inputs(tools, mode, fmt)
    sampling = cli_sampling(temperature, top_p, top_k, seed)
    if mode == "grammar" and not sampling.greedy:
        raise typer.BadParameter("--mode grammar decodes greedily: sample in another mode")
    if cache_limit is not None:
        try:
            parse_size(cache_limit)
        except ValueError as exc:
            raise typer.BadParameter(f"--cache-limit: {exc}") from None
    template = None if chat_template is None else load_chat_template(chat_template)
    cache: dict[str, Any] | None = None
    with open_engine(model) as engine:
        caller = ToolCaller(
            engine,
            specs,
            fmt=fmt,
            max_calls=max_calls or None,
            max_tokens=max_tokens,
            chat_template=template,
        )
        if no_cache or mode == "grammar":  # `grammar` runs on llama-cpp-python's own cache
            result = caller.call(query, mode, sampling=sampling)
        else:
            directory = prompt_cache or cache_root() / "prompt-states"
            result, cache = _call_with_states(caller, query, mode, directory, cache_limit, sampling)
    if as_json:
        doc = result.to_json()
        doc["prompt_cache"] = cache
        print(json.dumps(doc, ensure_ascii=False))
    else:
        console = Console(highlight=False, soft_wrap=True)
        if cache is not None:  # before the call, so the stats stay the last line
            console.print(
                f"[dim]prompt cache: {cache['reused']} of {cache['prompt_tokens']} prompt "
                f"tokens restored ({cache['source']}), {cache['prefilled']} prefilled, "
                f"{cache['prompt_ms']:.0f} ms before the call[/dim]"
            )
        render_result(result, console)


def _call_with_states(
    caller: ToolCaller,
    query: str,
    mode: str,
    directory: Path,
    cache_limit: str | None,
    sampling: Sampling | None = None,
) -> tuple[CallResult, dict[str, Any] | None]:
    """The call with its prompt started from the longest saved state, and that prompt's
    state saved for the next process. The cache's figures: what was restored, from
    where, and how many prompt tokens still had to be prefilled."""
    from toolweave.native.states.store import StateStore

    with StateStore(directory, disk_limit=cache_limit) as store:  # closing waits for writes
        engine = caller.engine
        prompt = caller.prompt_tokens(query)
        with engine.lock:
            store.prefill(engine, caller.seq, prompt, caller.max_tokens, session=_session(caller))
            record = store.last
            result = caller.call(query, mode, sampling=sampling)  # finds the prompt cached
            store.save(engine, caller.seq)  # the whole prompt, unless already saved
    if record is None:  # pragma: no cover - prefill always leaves a record
        return result, None
    cache = {
        "directory": str(directory),
        "prompt_tokens": record.prompt_tokens,
        "reused": record.reused,
        "prefilled": record.prefilled,
        "source": record.source,
        "prompt_ms": round(record.prompt_ms, 3),
    }
    return result, cache


def _session(caller: ToolCaller) -> str:
    """The store session of calls on one catalogue and system prompt (``call:`` and a
    digest): their states share one budget of the store's policy, and calls on another
    tools file do not evict them."""
    return session_name("call", [caller.system, [[t.name, t.description] for t in caller.tools]])


def _check_call_inputs(tools: Path, mode: str, fmt: str | None) -> tuple[ToolSpec, ...]:
    """Everything checkable before the model loads, so bad input fails fast."""
    specs = load_tools_file(tools)
    check_mode(mode)
    if fmt is not None:
        get_format(fmt)
    return specs


def render_result(result: CallResult, console: Console) -> None:
    """The calls, provisional calls and invalid output, then one line of stats."""
    for c in result.provisional:
        console.print(f"[dim]provisional[/dim] {_call_text(c)}")
    for c in result.calls:
        console.print(f"[bold green]call[/bold green] {_call_text(c)}")
    for bad in result.invalid:
        console.print(f"[bold red]invalid[/bold red] {escape(bad.error)}: {escape(bad.text)}")
    if not result.calls and not result.invalid:
        console.print(f"[yellow]no call[/yellow] {escape(result.text)}")
    s = result.stats
    tool_at = "-" if s.time_to_tool_ms is None else f"{s.time_to_tool_ms:.0f} ms"
    console.print(
        f"[dim]{result.mode}: {s.forward_passes} passes ({s.decode_passes} decode), "
        f"{s.prompt_tokens} prompt tokens ({s.cached_tokens} reused), "
        f"{s.prefill_tokens - s.prompt_tokens} prefilled / {s.decoded_tokens} decoded "
        "output tokens, "
        f"tool at {tool_at}, total {s.total_ms:.0f} ms (prompt {s.prompt_ms:.0f} ms)[/dim]"
    )


def _call_text(c: ToolCall) -> str:
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in c.arguments.items())
    return f"[bold]{escape(c.name)}[/bold]({escape(args)})"
