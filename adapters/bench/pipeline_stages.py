"""One plan-out round on the engine, measured stage by stage (the pipeline benchmark's core).

Planner prefill -> Planner decode -> plan execution -> Arbiter prefill -> Arbiter decode,
each timed on its own, under one `StageConfig`:

- ``weave``: the Planner and Arbiter prompts start with prefixes whose KV states were
  computed offline (`toolweave.native.states.prefixes.PrefixStates`); the longest stored
  prefix is loaded and only the rest prefilled. Off: the whole prompt is prefilled.
- ``exspec``: decoding drafts from the per-query n-gram table (`generate_with_exspec`);
  greedy output is unchanged.
- ``jump``: the tokens the plan and Arbiter grammars force are prefilled, not decoded.

Every configuration decodes under the same grammars (a plan of the shown tools, an
Arbiter decision) with the same greedy rule, starts from an empty sequence (no reuse
between requests except the stored prefixes), and counts its tokens and passes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import anyio

from toolweave.native.calibration import CostTable
from toolweave.native.chat import chat_tokens
from toolweave.native.decode.exspec import exspec_table, generate_with_exspec
from toolweave.native.engine import Engine
from toolweave.native.learning import learned, set_learned
from toolweave.native.states.prefixes import PrefixStates
from toolweave.plan.executor import PlanRun, execute_plan_text
from toolweave.results import CallResult
from toolweave.tools import Tool

__all__ = ["StageConfig", "StageTimes", "execute", "observations", "render_tokens", "run_stage"]

#: Longest observation text per task shown to the Arbiter (BFCL results can be long).
OBSERVATION_CHARS = 400


@dataclass(frozen=True)
class StageConfig:
    name: str
    weave: bool = False
    exspec: bool = False
    jump: bool = False
    invariant: bool = True  # run on the batch-invariant engine (see bench_pipeline)


@dataclass(frozen=True)
class StageTimes:
    """One LLM call: prompt size, what the stored prefix covered, times and output."""

    prompt_tokens: int
    restored_tokens: int
    load_ms: float
    prefill_ms: float  # loading the stored prefix + prefilling the rest (all but the last token)
    decode_ms: float  # from the last prompt token's pass to the end of the output
    result: CallResult
    table_ms: float = 0.0
    table_entries: int = 0

    @property
    def uncached_tokens(self) -> int:
        return self.prompt_tokens - self.restored_tokens

    @property
    def tokens_per_pass(self) -> float:
        passes = max(1, self.result.stats.forward_passes)
        return len(self.result.tokens) / passes


def render_tokens(
    engine: Engine, messages: Sequence[tuple[str, str]], *, generation: bool = True
) -> list[int]:
    """The chat-template tokens of (role, text) messages: the template's control tokens,
    every message's text as plain text (`toolweave.native.chat.chat_tokens`)."""
    msgs = [{"role": r, "content": t} for r, t in messages]
    return chat_tokens(engine, msgs, add_generation_prompt=generation)


def run_stage(
    engine: Engine,
    prompt: Sequence[int],
    *,
    config: StageConfig,
    grammar: str,
    examples: Sequence[str],
    query: str,
    states: PrefixStates | None,
    costs: CostTable,
    max_tokens: int,
    seq: int = 0,
    learn: str | None = None,
    decode_repeats: int = 1,
) -> StageTimes:
    """Prefill `prompt` (from a stored prefix with ``weave``) and decode under `grammar`;
    `learn` names the stage whose ExSpec acceptance is learned across requests.

    With ``decode_repeats`` > 1 the decode runs that many times from the same prefilled
    prompt and the fastest is reported (greedy decoding is deterministic, so the output is
    the same each time; the minimum drops the scheduler's noise from a ~250 ms
    measurement). Each repeat starts from what ExSpec had learned (acceptance, per-context
    acceptance, pass times) when the first one started, and what the first run left is
    kept, as if the request had run once.
    """
    if decode_repeats < 1:
        raise ValueError(f"decode_repeats must be >= 1, got {decode_repeats}")
    with engine.lock:
        engine.seq_remove(seq)  # every request starts from nothing but the stored prefixes
        engine.seq_tokens[seq] = []
        t0 = time.perf_counter()
        restored = 0
        load_ms = 0.0
        if config.weave and states is not None:
            got = states.restore(seq, prompt)
            restored, load_ms = got.tokens, got.ms
        if restored < len(prompt) - 1:
            engine.prefill(seq, prompt[restored:-1], start=restored, logits_last=False)
        engine.seq_tokens[seq] = list(prompt[:-1])
        prefill_ms = (time.perf_counter() - t0) * 1000
        table = None
        table_ms = 0.0
        if config.exspec:
            t1 = time.perf_counter()
            table = exspec_table(engine, examples, query)
            table_ms = (time.perf_counter() - t1) * 1000
        # Repeats start from what the first decode started from; its learning is kept.
        start = learned(engine, learn) if learn and decode_repeats > 1 else None
        after_first = None
        result = None
        decode_ms = float("inf")
        for repeat in range(decode_repeats):
            if learn and start is not None and repeat:
                set_learned(engine, learn, start)
            t2 = time.perf_counter()
            events = generate_with_exspec(
                engine,
                prompt,
                table=table,
                grammar=grammar,
                jump=config.jump,
                max_tokens=max_tokens,
                costs=costs,
                seq=seq,
                learn=learn,
            )
            for event in events:
                if event.kind == "done" and result is None:
                    result = event.result
            decode_ms = min(decode_ms, (time.perf_counter() - t2) * 1000)
            if learn and start is not None and repeat == 0:
                after_first = learned(engine, learn)
        if learn and after_first is not None:
            set_learned(engine, learn, after_first)
    if result is None:  # pragma: no cover - the decoder always ends with 'done'
        raise RuntimeError("the decoder ended without a result")
    return StageTimes(
        prompt_tokens=len(prompt),
        restored_tokens=restored,
        load_ms=load_ms,
        prefill_ms=prefill_ms,
        decode_ms=decode_ms,
        result=result,
        table_ms=table_ms,
        table_entries=len(table.next_token) if table is not None else 0,
    )


def execute(plan_text: str, tools: Mapping[str, Tool], *, timeout: float = 10.0) -> PlanRun:
    """Run a plan text on `tools` (blocking); a malformed plan gives an error run."""
    return anyio.run(lambda: execute_plan_text(plan_text, tools, timeout=timeout))


def observations(run: PlanRun) -> str:
    """The run's observations for the Arbiter, each cut to `OBSERVATION_CHARS`."""
    text = run.observations_text()
    lines = []
    for line in text.split("\n"):
        lines.append(line if len(line) <= OBSERVATION_CHARS else line[:OBSERVATION_CHARS] + "...")
    return "\n".join(lines)
