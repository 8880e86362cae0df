"""A LangChain agent on the embedded model with the bundled demo MCP servers.

    python examples/langchain_agent.py
    python examples/langchain_agent.py --query "What's the forecast for Oslo?" --servers weather

`create_agent` runs unchanged on `ChatToolweave`; `ProvisionalToolMiddleware` lets a
read-only tool start while the model is still writing its message. The script prints
each tool call, whether it started early, and when it started relative to the end of
the model message that asked for it.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from toolweave.adapters.langchain.chat_model import ChatToolweave
from toolweave.adapters.langchain.provisional import ProvisionalToolMiddleware
from toolweave.adapters.langchain.tools import to_langchain
from toolweave.adapters.mcp.client import MCPHub, demo_server_configs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--query", default="What's the weather in Zurich right now?")
    parser.add_argument("--servers", default="weather", help="demo servers, comma-separated")
    parser.add_argument("--model", default=None, help="GGUF path (default: embedded SmolLM2)")
    args = parser.parse_args(argv)

    state = tempfile.mkdtemp(prefix="toolweave-demo-")
    configs = demo_server_configs(state, names=args.servers.split(","))
    with MCPHub(configs) as hub:
        tools = [to_langchain(t) for t in hub.tools]
        early = ProvisionalToolMiddleware()
        # Tiny models rarely open a tool call on their own: call on the user's turn,
        # let the model decide after tool results (see ChatToolweave.auto_calls).
        model = ChatToolweave(model=args.model, auto_calls="user_turn", max_tokens=96)
        agent = create_agent(model, tools, middleware=[early])
        print(f"tools: {', '.join(t.name for t in tools)}")
        print(f"read-only: {', '.join(t.name for t in hub.tools if t.read_only)}")
        t0 = time.perf_counter()
        out = agent.invoke({"messages": [HumanMessage(args.query)]})
        total = time.perf_counter() - t0

    for m in out["messages"]:
        if isinstance(m, AIMessage):
            for call in m.tool_calls:
                print(f"model called {call['name']}({call['args']})")
            if m.content:
                print(f"model: {m.content}")
        elif isinstance(m, ToolMessage):
            print(f"tool {m.name}: {str(m.content)[:160]}")
    for ex in early.executions:
        lead = ex.lead_ms or 0.0
        when = f"{lead:.0f} ms before" if lead > 0 else f"{-lead:.0f} ms after"
        how = "started early, result reused" if ex.early else "run by the agent"
        print(f"{ex.name}: {how}; started {when} the model's message was complete")
    print(f"total {total:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
