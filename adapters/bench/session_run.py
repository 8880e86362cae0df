"""The sessions of `toolweave bench session`: conversations, their tools, the turns.

A `Conversation` is JSON-ready (the new-process worker receives it in a file): BFCL v4
``multi_turn_base`` conversations, their tools run by BFCL's own classes
(`bfcl_environment`), or conversations over the demo MCP servers (weather, notes), run
as stdio servers through `MCPHub`, each configuration with its own server state. Every
turn goes through `langchain.agents.create_agent` under `TurnPolicy`; configurations
take turn i one after another (the order rotated per turn) before any takes turn i+1.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import BaseTool

from toolweave.adapters.bench.bfcl_tools import bfcl_environment
from toolweave.adapters.bench.session_models import SessionConfig, TurnPolicy
from toolweave.adapters.langchain.chat_model import ChatToolweave
from toolweave.adapters.langchain.tools import to_langchain
from toolweave.adapters.mcp.client import demo_server_configs
from toolweave.adapters.mcp.hub import MCPHub
from toolweave.errors import ToolweaveError
from toolweave.eval.bfcl_multi_turn import MultiTurnCase, load_multi_turn
from toolweave.native.numerics import engine_bound

__all__ = ["SYSTEM", "Conversation", "conversations", "run_session", "warm_up"]

SYSTEM = "You are a helpful assistant. Use the tools to act on the user's requests."
#: Longest text kept per answer in the report.
_ANSWER_CHARS = 200

#: Conversations over the demo weather and notes servers: (turns, the tool each needs).
_MCP_CONVERSATIONS: tuple[tuple[tuple[str, str], ...], ...] = (
    (
        ("What's the weather in Paris right now?", "current_weather"),
        ("And the forecast for Paris for the next 3 days?", "forecast"),
        ("Save a note titled 'Paris trip' saying: pack an umbrella.", "create_note"),
        ("Now list my notes.", "list_notes"),
    ),
    (
        ("Search my notes for groceries.", "search_notes"),
        ("How far is London from Paris?", "distance"),
        ("What's the weather in London?", "current_weather"),
        ("Create a note titled 'London' saying: call Sam.", "create_note"),
    ),
)


@dataclass(frozen=True)
class Conversation:
    """One session: its user turns, the tool each turn needs (for `ChatLlamaCpp`, which
    must be told which tool to call), and where its tools come from."""

    id: str
    source: str  # "bfcl" or "mcp"
    turns: tuple[str, ...]
    expected: tuple[str | None, ...]
    tools: tuple[str, ...] = ()  # the tools offered (MCP: empty offers all the servers' tools)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Conversation:
        return cls(
            id=str(doc["id"]),
            source=str(doc["source"]),
            turns=tuple(str(t) for t in doc["turns"]),
            expected=tuple(doc["expected"]),
            tools=tuple(str(t) for t in doc.get("tools", ())),
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _bfcl_conversation(case: MultiTurnCase, turns: int, max_tools: int) -> Conversation | None:
    texts: list[str] = []
    for messages in case.turns[:turns]:
        users = [str(m.get("content", "")) for m in messages if m.get("role") == "user"]
        if not users:
            return None
        texts.append("\n".join(users))
    if len(texts) < turns:
        return None
    used = [c.name for step in case.ground_truth[:turns] for c in step]
    expected = tuple(step[0].name if step else None for step in case.ground_truth[:turns])
    names = list(dict.fromkeys(used))
    for tool in case.tools:  # then the rest of the catalogue, in its order, up to the bound
        if len(names) >= max(max_tools, len(set(used))):
            break
        if tool.name not in names:
            names.append(tool.name)
    order = {t.name: i for i, t in enumerate(case.tools)}
    return Conversation(
        case.id, "bfcl", tuple(texts), expected, tuple(sorted(names, key=lambda n: order[n]))
    )


def conversations(bfcl: int, mcp: int, turns: int, max_tools: int) -> list[Conversation]:
    """`bfcl` BFCL multi-turn conversations with at least `turns` turns (their ground
    truth's tools plus others of their classes, `max_tools` at least) and `mcp`
    conversations over the demo servers; each cut to `turns` turns."""
    out: list[Conversation] = []
    for case in load_multi_turn("multi_turn_base"):
        if len(out) >= bfcl:
            break
        if case.missed_functions or len(case.turns) < turns:
            continue
        conv = _bfcl_conversation(case, turns, max_tools)
        if conv is not None:
            out.append(conv)
    if len(out) < bfcl:
        raise ToolweaveError(f"only {len(out)} BFCL conversations have {turns} turns")
    if mcp > len(_MCP_CONVERSATIONS) or turns > len(_MCP_CONVERSATIONS[0]):
        raise ToolweaveError(
            f"at most {len(_MCP_CONVERSATIONS)} MCP conversations of "
            f"{len(_MCP_CONVERSATIONS[0])} turns"
        )
    for i, spec in enumerate(_MCP_CONVERSATIONS[:mcp]):
        cut = spec[:turns]
        out.append(
            Conversation(f"mcp_{i}", "mcp", tuple(q for q, _ in cut), tuple(t for _, t in cut))
        )
    return out


def _tools(conv: Conversation, config: str, stack: ExitStack, state_dir: Path) -> list[BaseTool]:
    """Fresh tools of `conv` for one configuration (its own BFCL instances or servers)."""
    if conv.source == "bfcl":
        cases = {c.id: c for c in load_multi_turn("multi_turn_base")}
        case = cases.get(conv.id)
        if case is None:
            raise ToolweaveError(f"no BFCL conversation {conv.id!r}")
        wanted = set(conv.tools)
        return [to_langchain(t) for t in bfcl_environment(case) if t.spec.name in wanted]
    servers = demo_server_configs(
        state_dir / "servers" / config / conv.id, names=["weather", "notes"]
    )
    hub = stack.enter_context(MCPHub(servers))
    offered = [t for t in hub.tools if not conv.tools or t.spec.name in conv.tools]
    missing = set(conv.tools) - {t.spec.name for t in offered}
    if missing:
        raise ToolweaveError(f"the demo servers have no tool {sorted(missing)[0]!r}")
    return [to_langchain(t) for t in offered]


class _TurnClock(BaseCallbackHandler):
    """When a turn's model calls and tools ran (perf_counter seconds), and the running
    prefill total (`SessionConfig.prefill_ms`) at the end of each model call."""

    def __init__(self, prefill_ms: Callable[[], float]) -> None:
        self.prefill_ms = prefill_ms
        self.first: float | None = None  # the first tool's start
        self.models: list[tuple[float, float, float]] = []  # start, end, prefill total at end
        self.tools: list[tuple[float, float]] = []
        self._model_start: float | None = None
        self._tool_starts: dict[Any, float] = {}

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self._model_start = time.perf_counter()

    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        if self._model_start is not None:
            self.models.append((self._model_start, time.perf_counter(), self.prefill_ms()))
            self._model_start = None

    def on_tool_start(self, serialized: Any, input_str: str, **kwargs: Any) -> None:
        now = time.perf_counter()
        if self.first is None:
            self.first = now
        self._tool_starts[kwargs.get("run_id")] = now

    def on_tool_end(self, output: Any, **kwargs: Any) -> None:
        self._tool_ended(kwargs.get("run_id"))

    def on_tool_error(self, error: BaseException, **kwargs: Any) -> None:
        self._tool_ended(kwargs.get("run_id"))

    def _tool_ended(self, run_id: Any) -> None:
        start = self._tool_starts.pop(run_id, None)
        if start is not None:
            self.tools.append((start, time.perf_counter()))

    def breakdown(self, t0: float, t1: float, prefill0: float) -> dict[str, float | None]:
        """Where the turn's time went, from `t0` to the first tool start and to `t1`:
        prefill, decoding (the rest of the model calls), tools, and the rest (the agent,
        LangChain, message conversion). Before the first tool no tool has run."""
        out: dict[str, float | None] = {}
        spans = [("first_tool", self.first), ("turn", t1)]
        for key, end in spans:
            if end is None:
                out.update({f"{key}_{part}_ms": None for part in ("prefill", "decode", "other")})
                continue
            # A tool started early starts inside its model call: count that call up to it
            # (its prompt was prefilled before decoding began).
            done = [m for m in self.models if m[0] < end]
            model_ms = sum(min(m[1], end) - m[0] for m in done) * 1000
            prefill = (done[-1][2] - prefill0) if done else 0.0
            tools = sum(min(b, end) - a for a, b in self.tools if a < end) * 1000
            out[f"{key}_prefill_ms"] = prefill
            out[f"{key}_decode_ms"] = max(0.0, model_ms - prefill)
            if key == "turn":
                out["turn_tools_ms"] = tools
            out[f"{key}_other_ms"] = max(0.0, (end - t0) * 1000 - model_ms - tools)
        return out


def _turn(
    agent: Any, history: list[BaseMessage], query: str, cfg: SessionConfig
) -> tuple[dict[str, Any], list[BaseMessage]]:
    clock = _TurnClock(cfg.prefill_ms)
    prefilled0, passes0 = cfg.totals()
    prefill_ms0 = cfg.prefill_ms()
    drafted0, accepted0 = cfg.drafts()
    early0 = len(cfg.early_starts)
    start = len(history) + 1
    error = None
    t0 = time.perf_counter()
    try:
        out = agent.invoke(
            {"messages": [*history, HumanMessage(query)]},
            {"callbacks": [clock], "recursion_limit": 8},
        )
        messages: list[BaseMessage] = list(out["messages"])
    except (ToolweaveError, ValueError, RuntimeError) as exc:  # one turn fails, not the bench
        error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        messages = [*history, HumanMessage(query)]
    t1 = time.perf_counter()
    turn_ms = (t1 - t0) * 1000
    early = cfg.early_starts[early0:]
    if early:  # a tool started early, on the model's call: the first start may be one
        clock.first = min([*early, *([] if clock.first is None else [clock.first])])
    prefilled1, passes1 = cfg.totals()
    drafted1, accepted1 = cfg.drafts()
    new = [m for m in messages[start:] if isinstance(m, AIMessage)]
    calls = [{"name": c["name"], "arguments": c["args"]} for m in new for c in m.tool_calls]
    answer = next((m.content for m in reversed(new) if isinstance(m.content, str)), "")
    record = {
        "turn_ms": turn_ms,
        "first_tool_ms": None if clock.first is None else (clock.first - t0) * 1000,
        **clock.breakdown(t0, t1, prefill_ms0),
        "prefilled_tokens": prefilled1 - prefilled0,
        "decode_passes": passes1 - passes0,
        "session_drafted": drafted1 - drafted0,
        "session_accepted": accepted1 - accepted0,
        "early_tool_starts": len(early),
        "model_calls": len(new),
        "calls": calls,
        "answer": str(answer)[:_ANSWER_CHARS],
        "error": error,
    }
    return record, messages


def warm_up(configs: Sequence[SessionConfig]) -> None:
    """One short text request per configuration, so a warm process is measured warm.

    A ChatToolweave engine first measures its logit bound, as its first tool request
    would (once per model file and thread counts, then read from disk: seconds on a new
    machine, which a warm process has paid; measured while its KV cache is empty)."""
    for cfg in configs:
        if isinstance(cfg.chat, ChatToolweave) and not cfg.chat.engine.batch_invariant:
            engine_bound(cfg.chat.engine)
        cfg.chat.invoke("Hi")


def run_session(
    configs: Sequence[SessionConfig],
    convs: Sequence[Conversation],
    *,
    phase: str,
    state_dir: Path,
    progress: Callable[[str], None] = lambda _line: None,
) -> list[dict[str, Any]]:
    """Every turn of every conversation in every configuration; one record per turn."""
    records: list[dict[str, Any]] = []
    for conv in convs:
        with ExitStack() as stack:
            agents: dict[str, tuple[Any, list[BaseMessage], list[str | None]]] = {}
            for cfg in configs:
                expected: list[str | None] = [None]
                policy = TurnPolicy(
                    cfg.names_tool, lambda box=expected: box[0], cfg.tools_in_template
                )
                tools = _tools(conv, cfg.name, stack, state_dir)
                agent = create_agent(
                    cfg.chat, tools, system_prompt=SYSTEM, middleware=[policy, *cfg.middleware]
                )
                agents[cfg.name] = (agent, [], expected)
            for t, query in enumerate(conv.turns):
                order = [*configs[t % len(configs) :], *configs[: t % len(configs)]]
                for cfg in order:
                    agent, history, expected = agents[cfg.name]
                    expected[0] = conv.expected[t]
                    record, messages = _turn(agent, history, query, cfg)
                    t_settle = time.perf_counter()
                    cfg.settle()
                    record["settle_ms"] = (time.perf_counter() - t_settle) * 1000
                    agents[cfg.name] = (agent, messages, expected)
                    record.update(
                        conversation=conv.id, source=conv.source, turn=t, config=cfg.name,
                        phase=phase,
                    )  # fmt: skip
                    records.append(record)
                    progress(
                        f"{phase} {conv.id} turn {t} {cfg.name}: {record['turn_ms']:.0f} ms, "
                        f"{len(record['calls'])} call(s)"
                        + (f" [{record['error']}]" if record["error"] else "")
                    )
    return records
