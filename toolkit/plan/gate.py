"""The gate every side-effect call of a plan passes once the plan is checked.

Each such call goes through the `ConsentPolicy` (default: allow, since the caller chose
the plan; the plan-out agent passes its own) and the request's `CallLedger`: a call
that ran in an earlier round is not run again, its observation is reused (event
``"reused"``); a denied call becomes an error observation (event ``"denied"``).
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import Any

import anyio

from toolweave.consent import ConsentPolicy, ConsentRequest
from toolweave.plan.format import PlanTask
from toolweave.plan.ledger import CallLedger
from toolweave.plan.records import TaskEvent, TaskRecord
from toolweave.tools import Tool, ToolResult

__all__ = ["SideEffectGate"]


class SideEffectGate:
    """Consent and at-most-once for the side-effect calls of one plan run."""

    def __init__(
        self, consent: ConsentPolicy, ledger: CallLedger, emit: Callable[[TaskEvent], None]
    ) -> None:
        self.consent = consent
        self.ledger = ledger
        self.emit = emit
        self.asking = anyio.Lock()  # one consent question at a time

    async def admit(
        self, task: PlanTask, tool: Tool, arguments: dict[str, Any]
    ) -> TaskRecord | None:
        """None when the side effect may run now; else the record that stands for it."""
        earlier = self.ledger.earlier(tool.name, arguments)
        now = perf_counter()
        if earlier is not None:
            record = TaskRecord(
                task, arguments, earlier.observation, now, now, ran=False,
                reused_round=earlier.round,
            )  # fmt: skip
            self.emit(TaskEvent("reused", task, record))
            return record
        by = "user"
        if self.ledger.denied_before(tool.name, arguments):
            reason = "not run: the user denied this call earlier in this request"
        else:
            request = ConsentRequest(tool.name, arguments, task.index, tool.spec.description)
            async with self.asking:
                decision = await self.consent.decide(request)
            if decision.allowed:
                return None
            if decision.by == "user":
                self.ledger.deny(tool.name, arguments)
            by, reason = decision.by, decision.reason
        now = perf_counter()
        record = TaskRecord(
            task, arguments, ToolResult.error(reason), now, now, ran=False, denied=True
        )
        self.emit(TaskEvent("denied", task, record, by))
        return record

    def ran(
        self, task: PlanTask, tool: Tool, arguments: dict[str, Any], result: ToolResult
    ) -> None:
        """Note in the ledger that the side effect ran, so later rounds reuse ``result``."""
        self.ledger.record(tool.name, arguments, task.index, result)
