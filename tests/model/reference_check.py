"""How tests compare a verifying decoder's tokens with the reference decoder's.

They must be equal, except after a position the decoder logged as a near tie of kind
"drift" (decided within the kernels' rounding on KV cells a verification pass wrote,
where rewriting them would have cost too much): there the two may part, and only there.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolweave.results import CallResult


def assert_same_tokens(reference: Sequence[int], result: CallResult, context: object = "") -> None:
    drift = [t.position for t in result.stats.near_ties if t.kind == "drift"]
    got = list(result.tokens)
    if not drift or got == list(reference):
        assert got == list(reference), context
        return
    first = drift[0]
    assert got[:first] == list(reference)[:first], context
