"""The `toolweave` command line: parse arguments, call the library, print.

    toolweave call --tools FILE --query TEXT [--mode MODE] [--json] [--model M]
                   [--format F] [--max-calls N] [--max-tokens N]
    toolweave classify --tools FILE [--json] [--override NAME=true|false ...]
    toolweave run "REQUEST" [--server CMD|URL ...] [--model M] [--json] [--compare]
    toolweave serve [--host H] [--port P] [--model M] [--mode MODE] [--api-key KEY]
    toolweave bench engine --json OUT [--model M] [--calls N]

Each command's module is imported only when that command runs or shows its help.
Bad input never ends in a traceback: a `ToolweaveError`, an `OSError` or a usage error
exits with code 2 and one line on stderr, `toolweave: error: ...`. Anything else is a
bug in toolweave, never the user's input, and still ends in one line (exit code 1,
`toolweave: internal error: ...`); Ctrl-C exits with 130. Library log records stay off
stderr. ``TOOLWEAVE_DEBUG=1`` shows log records and the traceback of an internal error.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import typer

from toolweave.adapters.cli.lazy import lazy_group
from toolweave.errors import ToolweaveError

__all__ = ["DEBUG_ENV", "ERROR_EXIT", "INTERNAL_EXIT", "INTERRUPTED_EXIT", "app", "main"]

#: Exit code of every bad-input error (the convention of argparse and click).
ERROR_EXIT = 2
#: Exit code of an error that is toolweave's fault, not the input's.
INTERNAL_EXIT = 1
#: Exit code after Ctrl-C (128 + SIGINT).
INTERRUPTED_EXIT = 130
#: Set to 1 to see library log records and the traceback of an internal error.
DEBUG_ENV = "TOOLWEAVE_DEBUG"
#: Longest error message printed (a message can quote a whole input).
MAX_MESSAGE_CHARS = 2000

_BENCH = "toolweave.adapters.bench"
app = typer.Typer(
    name="toolweave",
    help="Fast tool calling on small local models (llama.cpp).",
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=lazy_group(
        {
            "classify": "toolweave.adapters.cli.classify:classify",
            "run": "toolweave.adapters.cli.run:run",
            "call": "toolweave.adapters.cli.call:call",
            "serve": "toolweave.adapters.serve.command:serve",
        }
    ),
)
bench_app = typer.Typer(
    help="Benchmarks; each writes JSON.",
    cls=lazy_group(
        {
            "engine": f"{_BENCH}.engine:bench_engine",
            "fastpath": f"{_BENCH}.fastpath:bench_fastpath",
            "serving": f"{_BENCH}.serving:bench_serving",
            "pipeline": f"{_BENCH}.pipeline:bench_pipeline",
            "session": f"{_BENCH}.session:bench_session",
            "simulate": f"{_BENCH}.simulation:bench_simulation",
            "all": f"{_BENCH}.suites:bench_all",
        }
    ),
)
app.add_typer(bench_app, name="bench")


# ---------------------------------------------------------------------- entry point
def version_line() -> str:
    """toolweave's version and the engine package's, read from the installed metadata
    (llama.cpp is not loaded), for bug reports."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return f"toolweave {installed('toolweave')} (llama-cpp-python {installed('llama-cpp-python')})"


def _show_version(value: bool) -> None:
    if value:
        typer.echo(version_line())
        raise typer.Exit(0)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    show_version: bool = typer.Option(
        False,
        "--version",
        is_eager=True,
        callback=_show_version,
        help="Print the versions of toolweave and llama-cpp-python and exit.",
    ),
) -> None:
    """Fast tool calling on small local models (llama.cpp)."""
    show_help_without_command(ctx)


@bench_app.callback(invoke_without_command=True)
def _bench(ctx: typer.Context) -> None:
    """Benchmarks; each writes JSON."""
    show_help_without_command(ctx)


def show_help_without_command(ctx: typer.Context) -> None:
    """`toolweave` or `toolweave bench` alone: print the help and succeed."""
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


def _fail(message: str, *, code: int = ERROR_EXIT, kind: str = "error") -> None:
    # One line, whatever the message holds: scripts grep stderr.
    line = " ".join(message.split())
    if len(line) > MAX_MESSAGE_CHARS:
        line = line[:MAX_MESSAGE_CHARS] + f"... [{len(line) - MAX_MESSAGE_CHARS} more characters]"
    print(f"toolweave: {kind}: {line}", file=sys.stderr)
    raise SystemExit(code)


def _debugging() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


def _route_logging(debug: bool) -> None:
    """Keep library log records (the MCP SDK's, llama.cpp's wrappers') off stderr, where
    only the one error line belongs, unless debugging."""
    root = logging.getLogger()
    if debug:
        logging.basicConfig(level=logging.DEBUG, format="%(name)s: %(levelname)s: %(message)s")
        return
    if not root.handlers:
        root.addHandler(logging.NullHandler())  # replaces logging's last-resort stderr handler
    # toolweave's own warnings (a damaged cache file skipped, a bad setting ignored) are
    # for the user: one line each on stderr.
    ours = logging.getLogger("toolweave")
    if not any(isinstance(h, _OneLineWarnings) for h in ours.handlers):
        ours.addHandler(_OneLineWarnings())


class _OneLineWarnings(logging.StreamHandler):
    """``toolweave: warning: <first line>`` for WARNING and above, nothing else."""

    def __init__(self) -> None:
        super().__init__()
        self.setLevel(logging.WARNING)

    def format(self, record: logging.LogRecord) -> str:
        first = record.getMessage().splitlines()[0] if record.getMessage() else ""
        return f"toolweave: warning: {first[:500]}"


def main(argv: Sequence[str] | None = None) -> None:
    """Run the CLI; exits with the command's code (2 on any bad input)."""
    debug = _debugging()
    _route_logging(debug)
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
    except (typer.Abort, KeyboardInterrupt):
        _fail("interrupted", code=INTERRUPTED_EXIT)
    except (ToolweaveError, OSError) as exc:
        _fail(str(exc) or type(exc).__name__)
    except Exception as exc:  # a bug: still one line, the traceback on request
        if debug:
            raise
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        _fail(
            f"{detail} (set {DEBUG_ENV}=1 for the traceback)",
            code=INTERNAL_EXIT,
            kind="internal error",
        )
    raise SystemExit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
