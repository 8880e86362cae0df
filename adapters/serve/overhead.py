"""What serving over HTTP adds: time to the first tool-call delta, HTTP against in-process.

    python -m toolweave.adapters.serve.overhead [ROUNDS]

The same streamed request (a forced tool call) runs `rounds` times in process through
`ChatToolweave.astream`, `rounds` times through the server's own decoding path
(`Backend.deltas`, no HTTP) and `rounds` times through the server with the official
`openai` client, interleaved (the order rotates each round) so all see the same machine
load and the same warm prompt cache. Prints medians as JSON.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from typing import Any

__all__ = ["measure_overhead"]

_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
_QUESTION = "What is the weather in Paris today?"


def measure_overhead(
    rounds: int = 7, *, model: str | None = None, mode: str = "lossless"
) -> dict[str, Any]:
    """Median milliseconds to the first tool-call delta in process and over HTTP."""
    import openai
    from langchain_core.messages import HumanMessage

    from toolweave.adapters.serve.app import create_app
    from toolweave.adapters.serve.backend import Backend
    from toolweave.adapters.serve.background import ServerThread
    from toolweave.adapters.serve.protocol import parse_chat_request
    from toolweave.adapters.serve.responses import CallStart
    from toolweave.native.states.store import StateStore

    store = StateStore()
    backend = Backend(model, mode=mode, n_ctx=2048, max_tokens=48, state_store=store)
    backend.load()
    bound = backend.chat(None).bind_tools([_TOOL], tool_choice="get_weather")

    async def in_process() -> float:
        t0 = time.perf_counter()
        first = None
        async for piece in bound.astream([HumanMessage(_QUESTION)]):
            if first is None and piece.tool_call_chunks:
                first = time.perf_counter() - t0
        assert first is not None, "no tool-call chunk"
        return first * 1000

    request = parse_chat_request(
        {
            "model": backend.model_id,
            "messages": [{"role": "user", "content": _QUESTION}],
            "tools": [_TOOL],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "stream": True,
        }
    )

    async def deltas() -> float:
        t0 = time.perf_counter()
        first = None
        async for delta in backend.deltas(request):
            if first is None and isinstance(delta, CallStart):
                first = time.perf_counter() - t0
        assert first is not None, "no call delta"
        return first * 1000

    local: list[float] = []
    direct: list[float] = []
    remote: list[float] = []
    with ServerThread(create_app(backend)) as server:
        client = openai.OpenAI(api_key="none", base_url=server.base_url, max_retries=0)

        def over_http() -> float:
            t0 = time.perf_counter()
            first = None
            request: dict[str, Any] = {
                "model": backend.model_id,
                "messages": [{"role": "user", "content": _QUESTION}],
                "tools": [_TOOL],
                "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            }
            stream = client.chat.completions.create(**request, stream=True)
            for c in stream:
                if first is None and c.choices and c.choices[0].delta.tool_calls:
                    first = time.perf_counter() - t0
            assert first is not None, "no tool-call delta"
            return first * 1000

        over_http()  # warm both paths (prompt cache, tool caller, connection)
        asyncio.run(in_process())
        asyncio.run(deltas())
        for r in range(rounds):
            runs = [
                lambda: local.append(asyncio.run(in_process())),
                lambda: direct.append(asyncio.run(deltas())),
                lambda: remote.append(over_http()),
            ]
            for run in runs[r % 3 :] + runs[: r % 3]:  # rotate the order each round
                run()
    store.close()
    med_local, med_remote = statistics.median(local), statistics.median(remote)
    return {
        "rounds": rounds,
        "mode": mode,
        "in_process_ms": round(med_local, 1),
        "server_path_in_process_ms": round(statistics.median(direct), 1),
        "http_ms": round(med_remote, 1),
        "overhead_pct": round(100 * (med_remote - med_local) / med_local, 1),
        # Medians of the per-round differences (the rounds see the same load).
        "paired_overhead_ms": round(_paired(remote, local, relative=False), 1),
        "paired_overhead_pct": round(_paired(remote, local, relative=True), 1),
        "paired_http_over_server_path_ms": round(_paired(remote, direct, relative=False), 1),
        "in_process_all_ms": [round(x, 1) for x in local],
        "server_path_all_ms": [round(x, 1) for x in direct],
        "http_all_ms": [round(x, 1) for x in remote],
    }


def _paired(a: list[float], b: list[float], *, relative: bool) -> float:
    pairs = zip(a, b, strict=True)
    return statistics.median(100 * (x - y) / y if relative else x - y for x, y in pairs)


if __name__ == "__main__":
    print(json.dumps(measure_overhead(int(sys.argv[1]) if len(sys.argv) > 1 else 7), indent=2))
