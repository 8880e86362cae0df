"""A plan-out agent (Planner -> tools -> Arbiter) over your own MCP servers.

    python examples/plan_out_mcp.py
    python examples/plan_out_mcp.py --query "How far is Madrid from Rome?"
    python examples/plan_out_mcp.py --server "python my_server.py" --server http://localhost:8000/mcp

`MCPHub` starts the MCP servers (stdio commands or streamable-HTTP URLs; default: the
bundled `weather` demo server) and turns their tools into toolweave `Tool`s.
`PlanOutAgent` on `ChatToolweave` (the embedded SmolLM2 unless `--model`) writes the
whole plan in one message; each task starts as soon as its plan line is complete, while
the Planner is still writing, and the Arbiter then answers or asks for a new plan. The
observer below prints each phase as it happens.
"""

from __future__ import annotations

import argparse
import re
import threading
import time

from toolweave import ConsentPolicy
from toolweave.adapters.demo_servers import plan_examples
from toolweave.adapters.langchain.chat_model import ChatToolweave
from toolweave.adapters.langchain.plan_agent import PlanOutAgent
from toolweave.adapters.mcp.client import MCPHub, ServerConfig, demo_server_configs
from toolweave.events import (
    ArbiterDone,
    ArbiterStart,
    PlanDone,
    PlanLine,
    PlannerStart,
    RunEvent,
    TaskDone,
    TaskStart,
)


class PhasePrinter:
    """Prints the agent's events with the seconds since the start (events come from
    the Planner's thread and the tools' tasks, so printing is serialised)."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.lock = threading.Lock()

    def __call__(self, event: RunEvent) -> None:
        line = self.describe(event)
        if line is not None:
            with self.lock:
                print(f"{time.perf_counter() - self.t0:6.2f}s {line}", flush=True)

    @staticmethod
    def describe(event: RunEvent) -> str | None:
        match event:
            case PlannerStart(round=n):
                return f"planner: round {n}, writing the plan"
            case PlanLine(index=index, tool=tool):
                return f"  plan line {index} complete: {tool}"
            case TaskStart(index=index, tool=tool):
                return f"  task {index} {tool} started"
            case TaskDone(index=index, error=error, ms=ms, observation=observation):
                status = "failed" if error else "done"
                return f"  task {index} {status} in {ms:.0f} ms: {observation}"
            case PlanDone(plan=plan, planner_s=planner_s):
                shown = plan.strip().replace("\n", "\n    ")
                return f"  plan written in {planner_s:.1f} s:\n    {shown}"
            case ArbiterStart():
                return "arbiter: reading the results"
            case ArbiterDone(finish=finish, thought=thought):
                decision = "finish" if finish else "replan"
                return f"  arbiter decision: {decision} (thought: {thought})"
        return None


def examples_for(tool_names: set[str]) -> list[tuple[str, str]]:
    """The bundled demo plans whose every call is to one of `tool_names`."""
    return [
        (query, plan)
        for query, plan in plan_examples()
        if set(re.findall(r"(\w+)\(", plan)) - {"join"} <= tool_names
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--query", default="What's the weather in London and in Paris right now?")
    parser.add_argument(
        "--server",
        action="append",
        default=[],
        help='MCP server: "CMD ARGS" (stdio) or an http(s) URL; repeatable',
    )
    parser.add_argument("--demo", default="weather", help="demo servers without --server")
    parser.add_argument("--model", default=None, help="GGUF path or model name (default: SmolLM2)")
    parser.add_argument("--max-rounds", type=int, default=2, help="Planner/Arbiter rounds")
    args = parser.parse_args(argv)

    if args.server:
        configs = [ServerConfig.parse(s) for s in args.server]
    else:  # their state lives in $TOOLWEAVE_DEMO_STATE (default: a fixed temp directory)
        configs = demo_server_configs(names=args.demo.split(","))
    show = PhasePrinter()
    with MCPHub(configs) as hub:
        names = {t.name for t in hub.tools}
        print(f"servers: {', '.join(c.name for c in configs)}; tools: {', '.join(sorted(names))}")
        # A tiny Planner copies the format of a worked example: give it the bundled ones
        # that use only these tools (your own servers: pass your own examples).
        chat = ChatToolweave(model=args.model, max_tokens=256)
        agent = PlanOutAgent(
            chat,
            hub.tools,
            examples=examples_for(names),
            max_rounds=args.max_rounds,
            observer=show,
            # Tools with side effects run only when you say yes (the default denies them).
            consent=ConsentPolicy.ask(
                lambda r: input(f"allow {r.call_text()}? [y/N] ").strip().lower() in ("y", "yes")
            ),
        )
        result = agent.run(args.query)

    calls = sum(len(r.run.records) for r in result.rounds)
    print(f"answer: {result.answer}")
    print(
        f"{len(result.rounds)} round(s), {calls} tool call(s), "
        f"{'finished' if result.finished else 'not finished'} in {result.total_s:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
