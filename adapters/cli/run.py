"""`toolweave run "REQUEST"`: an agent on the local model and MCP tool servers.

By default the embedded SmolLM2 answers with the bundled demo MCP servers; `--server`
(repeatable: a command for stdio, or an http(s) URL) uses your own instead. The agent
is LangChain's `create_agent` on `ChatToolweave` with early starts of read-only tools.
Each phase is printed as it happens; `--json` prints the same events as one JSON
document instead. `--compare` re-decodes every model message of the run with the
`constrained` baseline decoder (same prompts, same model, tools not run again) and
compares decode passes and time.

Tools that are not read-only need consent: on a terminal each such call is shown with
its arguments and runs only after ``y``; without a terminal it is denied unless
``--yes`` (every side effect) or ``--allow TOOL`` (repeatable) allows it. A denied
call is shown, and the model reads why it did not run. ``--read-only NAME`` and
``--not-read-only NAME`` override how a tool is classified. ``--chat-template FILE``
replaces the model's chat template with the Jinja template in FILE (checked before any
server starts: it must render a two-message chat).

``--model openai:URL`` runs both agents on a remote OpenAI-compatible server instead
(`toolweave.adapters.remote`, docs/remote.md): ``--remote-model``, ``--api-key`` and
``--remote-timeout`` configure it; the options of the local engine are refused or
ignored with one line.

The agents themselves are in `run_agents`, the ``--compare`` baselines in `run_compare`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from toolweave.adapters.cli.call import (
    CacheLimitOption,
    SeedOption,
    TemperatureOption,
    TopKOption,
    TopPOption,
    cli_sampling,
)
from toolweave.adapters.cli.run_agents import (
    MAX_STEPS,
    SYSTEM,
    LLMCall,
    demo_examples,
    denied_to,
    nearest_examples,
    react_summary,
    run_agent,
    run_plan,
    state_store,
)
from toolweave.adapters.cli.run_compare import compare_messages, compare_plan, print_comparison
from toolweave.disk_cache import cache_root, parse_size

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

__all__ = ["run"]


def run(
    request: Annotated[str, typer.Argument(help="What to ask the agent.")],
    server: Annotated[
        list[str] | None,
        typer.Option(
            "--server",
            help="MCP server: a command (stdio) or an http(s) URL; repeatable. "
            "Default: the bundled demo servers.",
        ),
    ] = None,
    mcp_config: Annotated[
        Path | None,
        typer.Option(
            "--mcp-config",
            metavar="FILE",
            help="MCP servers from an mcpServers JSON file (Claude Desktop, Cursor, VS Code); "
            "combines with --server.",
        ),
    ] = None,
    no_sampling: Annotated[
        bool,
        typer.Option(
            "--no-sampling", help="Do not answer servers' sampling requests with the local model."
        ),
    ] = False,
    demo: Annotated[
        str | None,
        typer.Option("--demo", help="Demo servers to start, comma-separated (default: all)."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="GGUF path, model name (default: SmolLM2), or openai:URL for a remote "
            "OpenAI-compatible server.",
        ),
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option("--mode", help="Decoding mode of tool calls [default: lossless]."),
    ] = None,
    chat_template: Annotated[
        Path | None,
        typer.Option(
            "--chat-template",
            metavar="FILE",
            help="Jinja chat template replacing the model's own (default: the GGUF's).",
        ),
    ] = None,
    agent: Annotated[
        str, typer.Option("--agent", help="plan (Planner/executor/Arbiter) or react.")
    ] = "plan",
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON trace.")] = False,
    compare: Annotated[
        bool, typer.Option("--compare", help="Compare with the constrained baseline decoder.")
    ] = False,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=16)] = 160,
    state_dir: Annotated[
        Path | None, typer.Option("--state-dir", help="Where the demo servers keep state.")
    ] = None,
    prompt_cache: Annotated[
        Path | None,
        typer.Option(
            "--prompt-cache",
            help="Saved prompt states, reused by later runs of the same model "
            "[default: <cache root>/prompt-states].",
        ),
    ] = None,
    cache_limit: CacheLimitOption = None,
    no_prompt_cache: Annotated[
        bool, typer.Option("--no-prompt-cache", help="Prefill every prompt from scratch.")
    ] = False,
    yes: Annotated[
        bool,
        typer.Option("--yes", "-y", help="Run every tool call with side effects without asking."),
    ] = False,
    allow: Annotated[
        list[str] | None,
        typer.Option(
            "--allow",
            metavar="TOOL",
            help="Run calls of TOOL (not read-only) without asking; repeatable.",
        ),
    ] = None,
    read_only: Annotated[
        list[str] | None,
        typer.Option(
            "--read-only", metavar="NAME", help="Treat tool NAME as read-only; repeatable."
        ),
    ] = None,
    not_read_only: Annotated[
        list[str] | None,
        typer.Option(
            "--not-read-only",
            metavar="NAME",
            help="Treat tool NAME as having side effects; repeatable.",
        ),
    ] = None,
    remote_model: Annotated[
        str | None,
        typer.Option(
            "--remote-model",
            metavar="NAME",
            help="Model name on the openai:URL server [default: the first it lists].",
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            help="Key for the openai:URL server [default: $TOOLWEAVE_API_KEY, else "
            "$OPENAI_API_KEY].",
        ),
    ] = None,
    remote_timeout: Annotated[
        float | None,
        typer.Option(
            "--remote-timeout",
            metavar="SECONDS",
            help="Longest wait for the openai:URL server's next bytes [default: 120].",
        ),
    ] = None,
    temperature: TemperatureOption = 0.0,
    top_p: TopPOption = 1.0,
    top_k: TopKOption = 0,
    seed: SeedOption = None,
) -> None:
    """Answer REQUEST with an agent on the local model and MCP tools, showing each phase."""
    # The checks first, on light imports: a bad option is one line at once. LangChain's
    # agent stack and the MCP client take seconds to import; they come after.
    from rich.console import Console

    from toolweave.adapters.cli.consent import (
        check_tool_names,
        cli_policy,
        consent_note,
        read_only_overrides,
    )
    from toolweave.adapters.cli.display import RunTrace
    from toolweave.adapters.mcp.config import ServerConfig, demo_server_configs
    from toolweave.adapters.mcp.config_file import MCPConfigError, load_mcp_config
    from toolweave.adapters.remote.command import remote_for_run, run_remote
    from toolweave.consent import with_consent
    from toolweave.errors import ToolweaveError
    from toolweave.models import resolve_model
    from toolweave.modes import MODES, check_mode
    from toolweave.prompting.template_file import load_chat_template

    if not request.strip():  # an agent asked nothing would plan and run tools all the same
        raise typer.BadParameter("REQUEST is empty: say what the agent should do")
    if agent not in ("plan", "react"):
        raise typer.BadParameter(f"--agent must be plan or react, got {agent!r}")
    try:  # before any server starts: a bad spec, option or server is one line
        remote = remote_for_run(
            model, remote_model, api_key, remote_timeout,
            max_tokens if agent == "react" else max(max_tokens, 256),
            {"--mode": mode, "--chat-template": chat_template, "--compare": compare,
             "--prompt-cache": prompt_cache, "--no-prompt-cache": no_prompt_cache,
             "--cache-limit": cache_limit, "--temperature": temperature or None,
             "--top-p": None if top_p == 1 else top_p, "--top-k": top_k or None,
             "--seed": seed},
        )  # fmt: skip
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    mode = mode or "lossless"
    # Before any server starts: the chat model offers every mode but llama.cpp's grammar.
    check_mode(mode, offered=[m for m in MODES if m != "grammar"])
    # Read and checked before any server starts: a bad file is one line, exit code 2.
    template = None if chat_template is None else load_chat_template(chat_template)
    chat_options: dict[str, Any] = {} if template is None else {"chat_template": template}
    sampling = cli_sampling(temperature, top_p, top_k, seed)
    if not sampling.greedy:  # every local chat model samples alike (docs/sampling.md)
        chat_options.update(temperature=temperature, top_p=top_p, top_k=top_k, seed=seed)
    if remote is None:
        resolve_model(model)  # a missing model file fails before any server starts
    console = Console(highlight=False, stderr=as_json)
    trace = RunTrace(console, quiet=as_json)
    if remote is not None:
        trace.note(f"remote model {remote.model} at {remote.base_url}")
        for notice in remote.notices:
            trace.note(notice)
    try:
        configs = [ServerConfig.parse(s) for s in server or []]
        if mcp_config is not None:
            configs += load_mcp_config(mcp_config)
        if not configs:
            configs = demo_server_configs(state_dir, names=demo.split(",") if demo else None)
    except MCPConfigError as exc:
        raise typer.BadParameter(f"--mcp-config: {exc}") from None
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    own_servers = bool(server or mcp_config)
    overrides = read_only_overrides(read_only or [], not_read_only or [])
    allowed = list(allow or [])
    policy = cli_policy(yes=yes, allow=allowed, interactive=sys.stdin.isatty(), show=trace.prompt)
    trace.note(f"starting {len(configs)} MCP server(s): {', '.join(c.name for c in configs)}")
    if cache_limit is not None and remote is None:
        try:
            parse_size(cache_limit)
        except ValueError as exc:
            raise typer.BadParameter(f"--cache-limit: {exc}") from None
    from toolweave.adapters.mcp.sampling import DeferredSampler, chat_model_sampler
    from toolweave.adapters.mcp.starting import HubStart

    # The servers start now and come up while the agent's modules and the model load.
    deferred = None if no_sampling else DeferredSampler()
    starting = HubStart(
        configs, read_only_overrides=overrides, progress=trace.progress, sampling=deferred
    )
    try:
        from langgraph.errors import GraphRecursionError

        from toolweave.adapters.langchain.chat_model import ChatToolweave
        from toolweave.adapters.langchain.tools import to_langchain

        directory = prompt_cache or cache_root() / "prompt-states"
        store = None if no_prompt_cache or remote else state_store(directory, cache_limit)
    except BaseException:
        starting.cancel()
        raise
    try:
        try:
            if deferred is not None:
                # A remote model answers the servers' sampling requests too.
                answerer = (
                    remote.chat
                    if remote
                    else ChatToolweave(model=model, max_tokens=256, **chat_options)
                )
                deferred.resolve(chat_model_sampler(answerer, max_tokens=min(max_tokens, 256)))
            hub = starting.result()
        except BaseException:
            if deferred is not None:
                deferred.resolve(None)
            starting.cancel()
            raise
        with hub:
            if not hub.tools:
                raise ToolweaveError("the MCP servers offer no tools")
            check_tool_names(hub.tools, allowed, "--allow")
            read_only_names = [t.name for t in hub.tools if t.read_only]
            trace.note(
                f"{len(hub.tools)} tools; read-only (may start early): "
                f"{', '.join(read_only_names) or 'none'}"
            )
            trace.note(consent_note(hub.tools, yes, allowed, sys.stdin.isatty()))
            guarded = [with_consent(t, policy, denied_to(trace)) for t in hub.tools]
            tools = [to_langchain(t) for t in guarded]
            messages: list[BaseMessage] = []
            calls: list[LLMCall] = []
            plan_examples = not own_servers and agent == "plan"
            examples = nearest_examples(demo_examples(), request) if plan_examples else []
            if remote is not None:
                answer, summary = run_remote(
                    remote, agent, request, hub.tools, tools, examples, trace, policy, SYSTEM,
                    MAX_STEPS,
                )  # fmt: skip
            elif agent == "plan":
                answer, summary, calls = run_plan(
                    hub,
                    request,
                    model,
                    mode,
                    max_tokens,
                    examples,
                    trace,
                    store,
                    policy,
                    chat_options,
                )
            else:
                messages, answer = run_agent(
                    tools, request, model, mode, max_tokens, trace, store, chat_options
                )
                summary = react_summary(messages)
    except KeyboardInterrupt:
        console.print("interrupted: servers stopped, nothing left running")
        raise typer.Exit(130) from None
    except GraphRecursionError:
        raise ToolweaveError(
            f"the agent did not finish within {MAX_STEPS} steps (see the phases above)"
        ) from None
    finally:
        if store is not None:
            store.close()  # waits for the state files being written
    # The baseline only reads the tools' schemas: no tool runs again after the hub closed.
    comparison = None
    if compare and agent == "plan":
        comparison = compare_plan(calls, model, max_tokens, trace, chat_options)
    elif compare:
        comparison = compare_messages(messages, tools, model, max_tokens, trace, chat_options)
    if as_json:
        doc = {
            "request": request,
            "answer": answer,
            "events": trace.events,
            "summary": summary,
            "compare": comparison,
        }
        print(json.dumps(doc, ensure_ascii=False, indent=2, default=str))
        return
    console.print(f"\n[bold]answer[/bold]: {answer}")
    console.print(
        ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in summary.items())
        + f"; {trace.elapsed():.1f} s in total"
    )
    if comparison:
        print_comparison(console, comparison)
