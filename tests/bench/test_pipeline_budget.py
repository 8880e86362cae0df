"""`toolweave bench pipeline --budget` builds no more prefix states than the cache limit holds."""

from __future__ import annotations

from toolweave.adapters.bench.pipeline_states import fit_budget

TOKENS = [1000, 1200, 900, 1100]  # four chosen combinations


def test_the_budget_is_cut_to_what_fits_the_limit() -> None:
    per = 20.0  # bytes per token
    assert fit_budget(TOKENS, 4, per, 0, None) == 4  # no limit
    assert fit_budget(TOKENS, 9, per, 0, None) == 4  # no more than were chosen
    assert fit_budget(TOKENS, 4, per, 0, 10**9) == 4
    assert fit_budget(TOKENS, 2, per, 0, 10**9) == 2  # never more than asked
    # 5,000 bytes of statics; then 20,000, 24,000, 18,000 bytes: 49,000 fits 50,000.
    assert fit_budget(TOKENS, 4, per, 5_000, 50_000) == 2
    assert fit_budget(TOKENS, 4, per, 5_000, 67_000) == 3
    assert fit_budget(TOKENS, 4, per, 60_000, 50_000) == 0  # the statics alone are over
