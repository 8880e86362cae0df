"""Serving an agent session with state checkpoints that survive a restart.

    python examples/serving_session.py
    python examples/serving_session.py --steps 10 --window 2 --state-dir /tmp/agent-states

An agent rebuilds its whole request before every action: fixed rules, the tool
catalogue and the task, then a sliding window of its last actions with their results.
Consecutive requests share the fixed part and diverge where the window starts.
`StateStore.prefill` puts each request in the engine's KV cache, reusing the longest
prefix it already holds (live, or a checkpoint saved in memory or on disk), and saves
a checkpoint at the point where consecutive requests diverge. The script prints, per
request, its length and the tokens actually prefilled; then it opens a second engine
and store on the same directory, as a restarted server would, and serves the agent's
next requests from the checkpoints found on disk.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from toolweave import ToolCall, load_tools_file, resolve_model
from toolweave.eval.serving_trace import DEFAULT_RULES, AgentAction, tool_catalogue
from toolweave.native.chat import chat_tokens
from toolweave.native.engine import BatchToken, Engine
from toolweave.native.states.store import StateStore

TOOLS = Path(__file__).resolve().parent / "tools" / "assistant_tools.json"
TASK = (
    "Plan my trip from London to Paris on 2025-05-02: check the weather, find a morning "
    "flight, book dinner for two, and keep my calendar, reminders and partner up to date."
)
# What the agent did, one action per request, with what the tools answered.
ACTIONS = [
    (ToolCall("get_current_weather", {"location": "Paris"}), '{"temp_c":14,"sky":"light rain"}'),
    (
        ToolCall(
            "search_flights",
            {"origin": "London", "destination": "Paris", "departure_date": "2025-05-02"},
        ),
        '{"flights":[{"id":"AF1081","departs":"09:15","price_gbp":142}]}',
    ),
    (
        ToolCall(
            "book_restaurant",
            {
                "restaurant_name": "Le Comptoir",
                "date": "2025-05-02",
                "time": "20:00",
                "party_size": 2,
            },
        ),
        '{"confirmation":"LC-5521"}',
    ),
    (
        ToolCall(
            "create_calendar_event",
            {"title": "Dinner at Le Comptoir", "start_time": "2025-05-02T20:00"},
        ),
        '{"event_id":"ev-88"}',
    ),
    (
        ToolCall(
            "set_reminder",
            {"message": "Flight AF1081 at 09:15", "remind_at": "2025-05-02T06:30"},
        ),
        '{"reminder_id":"r-17"}',
    ),
    (
        ToolCall("convert_currency", {"amount": 200, "from_currency": "GBP", "to_currency": "EUR"}),
        '{"amount":234.6,"currency":"EUR"}',
    ),
    (ToolCall("add_todo_item", {"task": "Pack an umbrella"}), '{"item_id":"t-3"}'),
    (
        ToolCall("get_directions", {"origin": "Paris CDG", "destination": "Le Comptoir"}),
        '{"minutes":52,"route":"RER B, then metro 4"}',
    ),
    (
        ToolCall(
            "send_email",
            {
                "to": "sam@example.com",
                "subject": "Paris trip",
                "body": "Flight AF1081 at 09:15, dinner at Le Comptoir at 20:00.",
            },
        ),
        '{"sent":true}',
    ),
    (
        ToolCall("create_note", {"title": "Paris trip", "content": "AF1081, LC-5521, ev-88"}),
        '{"note_id":"n-40"}',
    ),
    (ToolCall("search_news", {"query": "Paris transport strike"}), '{"articles":[]}'),
    (ToolCall("start_timer", {"duration_seconds": 600, "label": "leave for the airport"}), "{}"),
]


def agent_request(system: str, history: list[AgentAction], window: int) -> list[dict[str, str]]:
    """The messages the agent sends before its next action."""
    recent = history[-window:] if window else []
    first = len(history) - len(recent) + 1
    lines = [f"Task: {TASK}", ""]
    if recent:
        lines.append(f"Recent actions (last {len(recent)} of {len(history)}):")
        lines += [f"{first + i}. {a.render()}" for i, a in enumerate(recent)]
    else:
        lines.append("Recent actions: none yet.")
    lines += ["", "Next call:"]
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


def reply(engine: Engine, logits: np.ndarray, pos: int, n: int) -> str:
    """Greedy decoding of up to `n` tokens on sequence 0 (the agent's next call)."""
    out: list[int] = []
    for i in range(n):
        token = int(np.argmax(logits))
        if engine.is_eog(token):
            break
        out.append(token)
        if i == n - 1:
            break
        logits = engine.forward([BatchToken(token, pos + i, (0,), True)])[0]
    engine.seq_remove(0, pos)  # keep the request cached, drop the reply
    return engine.detokenize(out)


def serve(engine: Engine, store: StateStore, prompt: list[int], step: int, decode: int) -> int:
    """Prefill one request through the store, decode `decode` tokens, print the cost."""
    t0 = time.perf_counter()
    pre = store.prefill(engine, 0, prompt, decode, session="trip-agent")
    text = reply(engine, pre.logits, len(prompt), decode)
    ms = (time.perf_counter() - t0) * 1000
    rec = store.last
    how = f"reused {pre.reused} from {rec.source}" if rec and pre.reused else "nothing reused"
    if rec is not None and rec.saved_at is not None:
        how += f", checkpoint saved at token {rec.saved_at}"
    new = len(prompt) - pre.reused
    line = f"step {step:2d}: prompt {len(prompt):4d} tokens, new {new:4d} ({how}), {ms:5.0f} ms"
    print(line + (f" -> {text.strip()[:60]!r}" if decode else ""))
    return new


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8, help="requests before the restart")
    parser.add_argument("--restart-steps", type=int, default=2, help="requests after it")
    parser.add_argument("--window", type=int, default=3, help="recent actions shown")
    parser.add_argument("--decode", type=int, default=0, help="reply tokens to decode per request")
    parser.add_argument("--state-dir", type=Path, default=None, help="default: a temp dir")
    parser.add_argument("--model", default=None, help="GGUF path or model name (default: SmolLM2)")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.restart_steps < 0 or args.steps + args.restart_steps > len(ACTIONS):
        parser.error(f"--steps >= 1 and --steps plus --restart-steps <= {len(ACTIONS)}")

    tools = load_tools_file(TOOLS)
    system = f"{DEFAULT_RULES}\n\nTools:\n{tool_catalogue(tools)}"
    history = [AgentAction(call, obs) for call, obs in ACTIONS]
    requests = [agent_request(system, history[:k], args.window) for k in range(len(ACTIONS))]
    model = resolve_model(args.model)
    with tempfile.TemporaryDirectory(prefix="toolweave-states-") as tmp:
        directory = args.state_dir or Path(tmp)
        print(f"checkpoints in {directory}")

        with Engine(model, n_ctx=2048, n_seq_max=1) as engine, StateStore(directory) as store:
            prompts = [chat_tokens(engine, r) for r in requests]
            total = sum(len(p) for p in prompts[: args.steps])
            new = sum(
                serve(engine, store, p, k + 1, args.decode)
                for k, p in enumerate(prompts[: args.steps])
            )
            print(
                f"{args.steps} requests: {new} of {total} prompt tokens prefilled "
                f"({new / total:.0%}); {len(store.checkpoints())} checkpoints, "
                f"{store.memory_bytes() / 1e6:.0f} MB in memory"
            )

        print("restart: a new engine and store over the same directory")
        with Engine(model, n_ctx=2048, n_seq_max=1) as engine, StateStore(directory) as store:
            print(f"{len(store.checkpoints())} checkpoints found on disk")
            later = range(args.steps, args.steps + args.restart_steps)
            for k in later:
                serve(engine, store, prompts[k], k + 1, args.decode)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
