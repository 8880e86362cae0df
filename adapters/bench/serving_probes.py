"""The prefix-cache references and the probes of `toolweave bench serving`.

`ideal_new` and `previous_new` count the new prompt tokens per request under the ideal
prefix cache and under a single slot that keeps only the previous prompt. `restart_probe`
serves requests never sent before on a new engine and store over the same state
directory; `idle_probe` measures resident memory loaded against released and the extra
latency of the first request after an idle release, paired with the same request warm.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolweave.adapters.bench.serving_configs import ToolweaveConfig
from toolweave.adapters.cli.launch import huge_pages_active
from toolweave.checkpoints import common_prefix
from toolweave.eval.serving_trace import TraceStep
from toolweave.native.baselines.llama_cpp_cache import StepRun
from toolweave.native.states.idle import IdleReleaser

__all__ = ["ideal_new", "idle_probe", "previous_new", "restart_probe"]

_MB = 1 << 20


def ideal_new(tokens: Sequence[list[int]]) -> list[int]:
    """New tokens under the ideal prefix cache: LCP with any earlier request."""
    out = []
    for i, t in enumerate(tokens):
        best = max((common_prefix(t, u) for u in tokens[:i]), default=0)
        out.append(len(t) - min(best, len(t) - 1))
    return out


def previous_new(tokens: Sequence[list[int]]) -> list[int]:
    """New tokens when only the previous request's prefix is kept (one slot, no store)."""
    return [
        len(t) - (min(common_prefix(t, tokens[i - 1]), len(t) - 1) if i else 0)
        for i, t in enumerate(tokens)
    ]


def idle_probe(
    tw: ToolweaveConfig,
    trace: Sequence[TraceStep],
    prompts: Sequence[list[int]],
    probes: Sequence[int],
    repeats: int = 5,
) -> dict[str, Any]:
    """Unseen requests served warm and right after an idle release, on the same store.

    For each probe j (never sent before) and the same agent's previous request i, `repeats`
    times: i, j (warm), i, release, j (after release); the states each j run creates are
    discarded, so j stays unseen. The penalty is the median over all probes and repeats of
    the paired difference (after release - warm), so slow drift on this noisy CPU cancels;
    `acquire_ms` is the part spent recreating the context.
    """
    releaser = IdleReleaser(tw.engine, idle_s=0.0, store=tw.store)

    def fresh(prompt: list[int], session: str) -> StepRun:
        before = {c.key for c in tw.store.checkpoints()}
        run = tw.step(prompt, session)
        for c in tw.store.checkpoints():
            if c.key not in before:
                tw.store.discard(c.key)
        return run

    rows: list[dict[str, Any]] = []
    for j in probes:
        earlier = [i for i in range(j) if trace[i].session == trace[j].session]
        if not earlier:
            continue
        i, session = earlier[-1], trace[j].session
        warm: list[StepRun] = []
        cold: list[StepRun] = []
        acquire_ms: list[float] = []
        records = []
        for _ in range(repeats):
            tw.step(prompts[i], session)
            warm.append(fresh(prompts[j], session))
            tw.step(prompts[i], session)
            records.append(releaser.release_now())
            cold.append(fresh(prompts[j], session))
            acquire_ms.append(tw.engine.last_acquire_ms or 0.0)
        diffs = [c.ms - w.ms for w, c in zip(warm, cold, strict=True)]
        rows.append(
            {
                "step": j,
                "warm_ms": statistics.median(r.ms for r in warm),
                "after_release_ms": statistics.median(r.ms for r in cold),
                "penalties_ms": diffs,
                "penalty_ms": statistics.median(diffs),
                "acquire_ms": statistics.median(acquire_ms),
                "new_tokens_warm": warm[0].new_tokens,
                "new_tokens_after_release": cold[0].new_tokens,
                "same_output": all(c.text == warm[0].text for c in warm + cold),
                "rss_loaded_mb": statistics.median(r.rss_before for r in records) / _MB,
                "rss_released_mb": statistics.median(r.rss_after for r in records) / _MB,
                "save_ms": statistics.median(r.save_ms for r in records),
                "release_ms": statistics.median(r.release_ms for r in records),
            }
        )
    if not rows:
        return {"probes": [], "huge_pages": huge_pages_active()}
    warm_ms = statistics.median(r["warm_ms"] for r in rows)
    penalty_ms = statistics.median(d for r in rows for d in r["penalties_ms"])
    return {
        "probes": rows,
        "huge_pages": huge_pages_active(),
        "repeats": repeats,
        "rss_loaded_mb": statistics.median(r["rss_loaded_mb"] for r in rows),
        "rss_released_mb": statistics.median(r["rss_released_mb"] for r in rows),
        "warm_ms": warm_ms,
        "penalty_ms": penalty_ms,
        "penalty_vs_step": penalty_ms / warm_ms,
        "acquire_ms": statistics.median(r["acquire_ms"] for r in rows),
        "same_output": all(r["same_output"] for r in rows),
    }


def restart_probe(
    path: Path,
    n_ctx: int,
    decode: int,
    directory: Path,
    trace: Sequence[TraceStep],
    prompts: Sequence[list[int]],
    ideal: Sequence[int],
) -> dict[str, Any]:
    """A fresh engine and store over the same directory serve the agents' next requests."""
    tw = ToolweaveConfig(path, n_ctx, decode, directory)
    try:
        found = len(tw.store.checkpoints())
        runs = [tw.step(p, s.session) for p, s in zip(prompts, trace, strict=True)]
        return {
            "steps": len(prompts),
            "checkpoints_found": found,
            "prompt_tokens": [len(p) for p in prompts],
            "new_tokens": [r.new_tokens for r in runs],
            "ideal_new_tokens": list(ideal),
            "ms": [r.ms for r in runs],
            "sources": [r["source"] for r in tw.records],
        }
    finally:
        tw.close()
