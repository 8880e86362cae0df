"""What a `ToolCaller`'s drafting works with: the `Speculation` a decoding plan is given
on the caller's engine (its cost table, BM25 ranking of the tools for forecasts, the
sequences value branches run on, when parallel value drafts pay), and the running
estimate of an argument value's length that planning uses."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from toolweave.drafting.forecast import CallForecast, ToolRanking
from toolweave.errors import ConstraintError
from toolweave.formats import CallFormat
from toolweave.grammar.call import value_grammar
from toolweave.native.calibration import CostTable, engine_costs
from toolweave.native.caller_format import json_arguments
from toolweave.native.decode.plan import DecodePlan
from toolweave.native.decode.records import Speculation
from toolweave.native.decode.values import parallel_pays
from toolweave.native.engine import Engine
from toolweave.native.learning import engine_learning
from toolweave.native.numerics import engine_bound
from toolweave.toolspec import ToolSpec

__all__ = ["CallerDrafting"]


class CallerDrafting:
    """The drafting side of `ToolCaller`: a mixin over the caller state declared below,
    which the caller sets in its constructor."""

    engine: Engine
    tools: tuple[ToolSpec, ...]
    fmt: CallFormat
    seq: int
    parallel_values: bool | None
    forecast: bool
    _costs: CostTable | None
    _ranking: ToolRanking | None
    _value_tokens: float

    def ranking(self) -> ToolRanking:
        """BM25 over this caller's tools (built on first use)."""
        if self._ranking is None:
            self._ranking = ToolRanking(self.tools)
        return self._ranking

    def costs(self) -> CostTable:
        """The engine cost table (measured once per engine, quickly, on first use)."""
        if self._costs is None:
            self._costs = engine_costs(self.engine)
        return self._costs

    def _speculation(self, plan: DecodePlan, request_text: str) -> Speculation:
        """What `plan`'s drafting works with on this engine (nothing without drafts)."""
        if not (plan.draft_values or plan.forecasts):
            return Speculation()
        costs = self.costs()
        forecast: CallForecast | None = None
        if plan.forecasts and self.forecast:
            forecast = CallForecast.for_request(self.ranking(), request_text)

        def batch_pays(k: int) -> bool:
            return costs.pass_ms(k, k, sequences=True) < k * costs.serial_step_ms

        def values_pay(spec: ToolSpec, n: int) -> bool:
            if self.parallel_values is not None:
                return self.parallel_values and n > 0
            return parallel_pays(costs, n, self._value_tokens)

        branch_seqs: tuple[int, ...] = ()
        if plan.draft_values:
            branch_seqs = tuple(range(1, min(self.engine.n_seq_max, 8)))
            if self.seq in branch_seqs:
                raise ConstraintError("the caller's sequence collides with value branches")
        return Speculation(
            costs=costs,
            # Value drafts are JSON values written back as JSON members: for a syntax
            # writing each argument apart (xml, python) `fast` and `lossless` decode the
            # values as `jump` does (forecasts, verified, still run).
            value_grammar=self._value_grammar if json_arguments(self.fmt) else None,
            branch_seqs=branch_seqs,
            batch_pays=batch_pays,
            parallel_pays=values_pay,
            forecast=forecast,
            learning=engine_learning(self.engine),
            # A batch-invariant engine's rows equal its serial steps: nothing to bound.
            bound=None if self.engine.batch_invariant else engine_bound(self.engine),
        )

    def _value_grammar(self, spec: ToolSpec, key: str, suffix: Sequence[str]) -> str:
        return value_grammar(spec, key, suffix=suffix)

    def _learn_value_lengths(self, lengths: Iterable[int]) -> None:
        """Move the running estimate of value length (for planning) towards `lengths`."""
        for n in lengths:
            self._value_tokens = 0.8 * self._value_tokens + 0.2 * n
