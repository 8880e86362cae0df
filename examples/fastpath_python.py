"""The fast path from Python: one tool call decoded in four modes on the same engine.

    python examples/fastpath_python.py
    python examples/fastpath_python.py --query "Convert 12 miles to km" --tools my_tools.json

Loads a tools file, opens the engine on the embedded SmolLM2 (or `--model`), and
decodes the same request with `ToolCaller` in `constrained` (serial greedy decoding
under the call grammar), `jump` (plus prefill of the tokens the grammar forces),
`fast` (schema skeleton, values in parallel where the engine's cost table says it
pays, provisional calls) and `lossless` (`fast` with its drafts verified). It prints
each call with its forward passes and time, then checks that `lossless` gave exactly
the tokens of `jump`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from toolweave import CallResult, Engine, ToolCaller, load_tools_file, resolve_model

TOOLS = Path(__file__).resolve().parent / "tools" / "assistant_tools.json"
MODES = ("constrained", "jump", "fast", "lossless")


def show(result: CallResult) -> None:
    s = result.stats
    for call in result.provisional:
        print(f"  provisional {call.name}({json.dumps(dict(call.arguments), ensure_ascii=False)})")
    for call in result.calls:
        print(f"  call {call.name}({json.dumps(dict(call.arguments), ensure_ascii=False)})")
    if not result.calls:
        print(f"  no valid call; text: {result.text!r}")
    tool_at = "-" if s.time_to_tool_ms is None else f"{s.time_to_tool_ms:.0f} ms"
    print(
        f"  {s.forward_passes} forward passes ({s.decode_passes} decode), "
        f"{s.output_tokens} output tokens, tool at {tool_at}, total {s.total_ms:.0f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=Path, default=TOOLS, help="JSON list of tools")
    parser.add_argument("--query", default="What's the weather like in London right now?")
    parser.add_argument("--model", default=None, help="GGUF path or model name (default: SmolLM2)")
    args = parser.parse_args(argv)

    tools = load_tools_file(args.tools)
    print(f"{len(tools)} tools from {args.tools}")
    print(f"query: {args.query}")
    with Engine(resolve_model(args.model), n_ctx=8192) as engine:
        caller = ToolCaller(engine, tools)
        # Untimed warm-up: the prompt prefill lands in the KV cache (every mode reuses it)
        # and the engine cost table `fast` plans with is measured once.
        caller.call(args.query, "jump")
        caller.costs()
        results = {}
        for mode in MODES:
            results[mode] = caller.call(args.query, mode)
            print(f"{mode}:")
            show(results[mode])

    jump, lossless = results["jump"], results["lossless"]
    same = lossless.tokens == jump.tokens and lossless.text == jump.text
    print(f"lossless == jump (tokens and text): {'yes' if same else 'NO'}")
    base = results["constrained"].stats.total_ms
    print(
        "total time vs constrained: "
        + ", ".join(f"{m} x{base / results[m].stats.total_ms:.2f}" for m in MODES[1:])
    )
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
