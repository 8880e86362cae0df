"""`toolweave serve`: run the OpenAI-compatible server until Ctrl-C.

    toolweave serve [--host 127.0.0.1] [--port 8000] [--model PATH] [--mode MODE]
                    [--api-key KEY] [--max-tokens N] [--max-calls N] [--auto-calls WHO]
                    [--n-ctx N] [--queue N] [--prompt-cache DIR | --no-prompt-cache]

Registered by the command line as ``"serve": "toolweave.adapters.serve.command:serve"``.
The key may also come from ``TOOLWEAVE_API_KEY``. The server listens on the loopback
interface unless told otherwise; on any other address without a key it warns first.
"""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path
from typing import Annotated

import typer

from toolweave.models import MODELS
from toolweave.modes import MODES, check_mode

__all__ = ["API_KEY_ENV", "main", "serve"]

#: Environment variable holding the API key clients must send.
API_KEY_ENV = "TOOLWEAVE_API_KEY"
_CHAT_MODES = [m for m in MODES if m != "grammar"]


def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="TCP port.")] = 8000,
    model: Annotated[
        str | None,
        typer.Option("--model", help=f"GGUF path or model name ({', '.join(MODELS)})."),
    ] = None,
    mode: Annotated[
        str, typer.Option("--mode", help=f"Tool-call decoding mode: {', '.join(_CHAT_MODES)}.")
    ] = "lossless",
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key", envvar=API_KEY_ENV, show_envvar=True, help="Key clients must send."
        ),
    ] = None,
    max_tokens: Annotated[
        int, typer.Option("--max-tokens", min=1, help="Default most tokens of an answer.")
    ] = 512,
    max_calls: Annotated[
        int,
        typer.Option(
            "--max-calls",
            min=0,
            max=64,
            help="Most tool calls in one message (0: no limit; 1 if parallel_tool_calls is false).",
        ),
    ] = 1,
    auto_calls: Annotated[
        str,
        typer.Option(
            "--auto-calls",
            help="With tool_choice auto, who decides to call: 'model', or 'user_turn' "
            "(always call after a user message; for agents on tiny models).",
        ),
    ] = "model",
    n_ctx: Annotated[int, typer.Option("--n-ctx", min=256, help="Context window.")] = 8192,
    queue: Annotated[
        int, typer.Option("--queue", min=0, help="Most requests waiting for the engine.")
    ] = 32,
    prompt_cache: Annotated[
        Path | None,
        typer.Option("--prompt-cache", help="Directory keeping prompt states across restarts."),
    ] = None,
    no_prompt_cache: Annotated[
        bool, typer.Option("--no-prompt-cache", help="Prefill every prompt from scratch.")
    ] = False,
) -> None:
    """Serve the model over OpenAI's chat-completions API."""
    import uvicorn

    from toolweave.adapters.serve.app import ServeConfig, create_app
    from toolweave.adapters.serve.backend import Backend
    from toolweave.adapters.serve.protocol import Limits

    check_mode(mode, offered=_CHAT_MODES)
    if auto_calls not in ("model", "user_turn"):
        raise typer.BadParameter("--auto-calls must be 'model' or 'user_turn'")
    if not api_key and not _is_loopback(host):
        print(
            f"toolweave: warning: serving on {host} without an API key: anyone who can reach "
            f"it can use the model (set --api-key or {API_KEY_ENV})",
            file=sys.stderr,
        )
    store = None
    if not no_prompt_cache:
        from toolweave.native.states.store import StateStore

        store = StateStore(prompt_cache)
    backend = Backend(
        model,
        mode=mode,
        n_ctx=n_ctx,
        max_tokens=max_tokens,
        max_calls=max_calls or None,
        auto_calls="user_turn" if auto_calls == "user_turn" else "model",
        state_store=store,
        reuse_prompt_cache=not no_prompt_cache,
    )
    backend.load()
    config = ServeConfig(
        api_key=api_key or None,
        limits=Limits(max_tokens=n_ctx),
        max_waiting=queue,
    )
    print(
        f"toolweave: serving {backend.model_id} ({mode}) on http://{host}:{port}/v1",
        file=sys.stderr,
    )
    try:
        uvicorn.run(create_app(backend, config), host=host, port=port, log_level="warning")
    finally:
        if store is not None:
            store.close()


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: list[str] | None = None) -> None:
    """`python -m toolweave.adapters.serve`: the command on its own, with the command
    line's conventions (a bad input exits with code 2 and one line on stderr)."""
    from toolweave.errors import ToolweaveError

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(serve)
    command = typer.main.get_command(app)
    try:
        command.main(
            args=sys.argv[1:] if argv is None else argv,
            prog_name="toolweave serve",
            standalone_mode=False,
        )
    except typer.Exit as done:
        raise SystemExit(done.exit_code) from None
    except (typer.TyperException, ToolweaveError, OSError) as exc:
        text = exc.format_message() if isinstance(exc, typer.TyperException) else str(exc)
        print(f"toolweave: error: {' '.join(text.split())}", file=sys.stderr)
        raise SystemExit(2) from None
    except (typer.Abort, KeyboardInterrupt):
        raise SystemExit(130) from None
