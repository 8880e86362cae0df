"""The serial-step sweep of `toolweave bench engine`: every thread count, both engines."""

from __future__ import annotations

import pytest

from toolweave.adapters.bench.engine_steps import PASS_SIZES, sweep_points, sweep_steps
from toolweave.models import default_model_path
from toolweave.native.threads import default_threads


@pytest.mark.slow
def test_sweep_times_every_thread_count_and_both_engines() -> None:
    points: list[str] = []
    sweep = sweep_steps(
        default_model_path(),
        contexts=(48, 96),
        rounds=1,
        steps=3,
        flash_attn=None,  # the engine's default, as users run it
        on_point=points.append,
    )
    cores = default_threads()
    assert len(points) == sweep_points((48, 96), 1, cores)
    assert [c.context_tokens for c in sweep.contexts] == [48, 96]
    for c in sweep.contexts:
        assert sorted(c.llama_cpp_ms) == list(range(1, cores + 1))
        assert all(ms > 0 for ms in c.llama_cpp_ms.values())
        assert c.toolweave_ms > 0 and c.exact_ms > 0
        assert sorted(c.pass_ms) == sorted(PASS_SIZES)
        assert c.best_llama_cpp_ms == min(c.llama_cpp_ms.values())
    report = sweep.to_dict()
    assert report["cores"] == cores
    assert report["flash_attn"] == "off"  # the default engine's default
    assert float(str(report["logit_bound"]["bound"])) >= 0.0
