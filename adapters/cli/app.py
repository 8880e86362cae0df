"""The `toolweave` command line: parse arguments, call the library, print.

    toolweave call --tools FILE --query TEXT [--mode MODE] [--json] [--model M]
                   [--format F] [--max-calls N] [--max-tokens N]
    toolweave classify --tools FILE [--json] [--override NAME=true|false ...]
    toolweave run "REQUEST" [--server CMD|URL ...] [--model M] [--json] [--compare]
    toolweave bench engine --json OUT [--model M] [--calls N]

Bad input never ends in a traceback: a `ToolweaveError`, an `OSError` or a usage error
exits with code 2 and one line on stderr, `toolweave: error: ...`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from toolweave.adapters.bench.engine import bench_app
from toolweave.adapters.bench.fastpath import bench_fastpath
from toolweave.adapters.bench.pipeline import bench_pipeline
from toolweave.adapters.bench.serving import bench_serving
from toolweave.adapters.bench.suites import bench_all
from toolweave.adapters.cli.classify import classify
from toolweave.adapters.cli.run import run
from toolweave.errors import ToolweaveError
from toolweave.formats import FORMATS, get_format
from toolweave.models import MODELS, resolve_model
from toolweave.modes import MODES, check_mode
from toolweave.native.caller import ToolCaller
from toolweave.native.engine import Engine
from toolweave.results import CallResult
from toolweave.toolspec import ToolCall, ToolSpec, load_tools_file

__all__ = ["app", "main", "open_engine"]

#: Exit code of every bad-input error (the convention of argparse and click).
ERROR_EXIT = 2
#: Context window of `call`: room for a long tool prompt, never past what the model saw.
CALL_CONTEXT = 8192

app = typer.Typer(
    name="toolweave",
    help="Fast tool calling on small local models (llama.cpp).",
    add_completion=False,
    pretty_exceptions_enable=False,
)
bench_app.command("fastpath")(bench_fastpath)
bench_app.command("serving")(bench_serving)
bench_app.command("pipeline")(bench_pipeline)
bench_app.command("all")(bench_all)
app.add_typer(bench_app, name="bench")
app.command("classify")(classify)
app.command("run")(run)

_MODEL_HELP = f"GGUF path or model name ({', '.join(MODELS)}); default: the embedded SmolLM2."


def open_engine(model: str | None, n_ctx: int = CALL_CONTEXT) -> Engine:
    """Load `model` (a path or a known name) with a context of `n_ctx`, capped at the
    model's training context."""
    engine = Engine(resolve_model(model), n_ctx=n_ctx)
    if 0 < engine.n_ctx_train < n_ctx:
        path = engine.model_path
        engine.close()
        engine = Engine(path, n_ctx=engine.n_ctx_train)
    return engine


# ---------------------------------------------------------------------- call
@app.command()
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
        int, typer.Option("--max-calls", min=0, help="Most calls in the answer (0: no limit).")
    ] = 1,
    max_tokens: Annotated[
        int, typer.Option("--max-tokens", min=1, help="Most tokens in the answer.")
    ] = 512,
) -> None:
    """Answer QUERY with a tool call from TOOLS."""
    specs = _check_call_inputs(tools, mode, fmt)
    with open_engine(model) as engine:
        caller = ToolCaller(
            engine, specs, fmt=fmt, max_calls=max_calls or None, max_tokens=max_tokens
        )
        result = caller.call(query, mode)
    if as_json:
        print(json.dumps(result.to_json(), ensure_ascii=False))
    else:
        render_result(result, Console(highlight=False, soft_wrap=True))


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
        f"{s.prefill_tokens} prefilled / {s.decoded_tokens} decoded tokens, "
        f"tool at {tool_at}, total {s.total_ms:.0f} ms (prompt {s.prompt_ms:.0f} ms)[/dim]"
    )


def _call_text(c: ToolCall) -> str:
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in c.arguments.items())
    return f"[bold]{escape(c.name)}[/bold]({escape(args)})"


# ---------------------------------------------------------------------- entry point
@app.callback(invoke_without_command=True)
def _root(ctx: typer.Context) -> None:
    """Fast tool calling on small local models (llama.cpp)."""
    show_help_without_command(ctx)


def show_help_without_command(ctx: typer.Context) -> None:
    """`toolweave` or `toolweave bench` alone: print the help and succeed."""
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


def _fail(message: str) -> None:
    # One line, whatever the message holds: scripts grep stderr.
    print(f"toolweave: error: {' '.join(message.split())}", file=sys.stderr)
    raise SystemExit(ERROR_EXIT)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the CLI; exits with the command's code (2 on any bad input)."""
    command = typer.main.get_command(app)
    code: Any = 0
    try:
        code = command.main(
            args=list(argv) if argv is not None else None,
            prog_name="toolweave",
            standalone_mode=False,
        )
    except typer.TyperException as exc:  # usage errors: missing or malformed options
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        ctx = getattr(exc, "ctx", None)
        _fail(message + (f" (see {ctx.command_path} --help)" if ctx else ""))
    except typer.Abort:
        _fail("aborted")
    except (ToolweaveError, OSError) as exc:
        _fail(str(exc) or type(exc).__name__)
    raise SystemExit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
