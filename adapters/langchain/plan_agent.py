"""The plan-out agent: Planner -> executor -> Arbiter -> (replan), on any chat model.

The Planner writes every tool call of a request in one message (LLMCompiler plan
format); each task starts as soon as its line is complete and its dependencies are
done, while the Planner is still writing. The Arbiter then reads the observations and
finishes with an answer or asks for another plan, up to `max_rounds` rounds.

On `ChatToolweave` both outputs are decoded under grammars (`toolweave.plan.grammar`),
so a tiny model always writes a well-formed plan; any other LangChain chat model gets
the same prompts and its free text is parsed (malformed plans become observations
the next round can correct).

Side effects (tools that are not read-only) need consent: ``consent`` decides each
call, and without one every side effect is denied (the model reads why). They start
only after the whole plan has been read and checked, and run at most once per
request: a later round repeating an identical call reuses its observation. Only a
written ``Replan`` starts another round; an unreadable Arbiter reply ends the request.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk

from toolweave.adapters.langchain.chat_model import ChatToolweave
from toolweave.consent import ConsentPolicy
from toolweave.events import (
    ArbiterDone,
    ArbiterStart,
    CallDenied,
    CallReused,
    Observer,
    PlanDone,
    PlanLine,
    PlannerStart,
    RunEvent,
    TaskDone,
    TaskHeld,
    TaskStart,
)
from toolweave.plan.arbiter import ArbiterVerdict, read_arbiter
from toolweave.plan.executor import PlanRun, TaskEvent, execute_plan
from toolweave.plan.format import PlanTask
from toolweave.plan.grammar import arbiter_grammar, plan_grammar
from toolweave.plan.ledger import CallLedger
from toolweave.plan.parse import PlanStreamParser
from toolweave.plan.prompts import ARBITER_EXAMPLES, arbiter_messages, planner_messages
from toolweave.tools import Tool

__all__ = ["NO_CONSENT", "PlanOutAgent", "PlanOutResult", "PlanRound"]

#: What the model reads for a side effect when the agent was given no consent policy.
NO_CONSENT = "not run: this tool has side effects and the agent was given no consent for them"


@dataclass(frozen=True)
class PlanRound:
    """One Planner -> executor -> Arbiter round, with its timings in seconds."""

    plan_text: str
    run: PlanRun
    arbiter_text: str
    decision: ArbiterVerdict
    planner_s: float
    arbiter_s: float
    #: The (role, text) messages the Planner and the Arbiter were given.
    planner_messages: tuple[tuple[str, str], ...] = ()
    arbiter_messages: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class PlanOutResult:
    """The answer and every round that led to it; ``error`` says why a request stopped
    without an answer (an unreadable Arbiter reply); ``ledger`` holds its side effects."""

    answer: str
    rounds: tuple[PlanRound, ...]
    total_s: float
    finished: bool = True
    error: str | None = None
    ledger: CallLedger | None = None

    def summary(self) -> dict[str, Any]:
        """Rounds, tool calls run, denied, reused and shared, whether the request finished, and
        the error when it stopped without an answer."""
        records = [record for r in self.rounds for record in r.run.records]
        out: dict[str, Any] = {
            "rounds": len(self.rounds),
            "tool_calls": sum(record.ran for record in records),
            "denied": sum(record.denied for record in records),
            "reused": sum(record.reused for record in records),
            "shared": sum(record.shared for record in records),
            "finished": self.finished,
        }
        if self.error is not None:
            out["error"] = self.error
        return out


class PlanOutAgent:
    """Answer requests with plan-out rounds over `tools` on `model`.

    ``consent`` decides every call of a tool that is not read-only (None: all denied,
    with `NO_CONSENT` as their observation). ``exspec=True`` drafts the Planner's and
    the Arbiter's tokens from the worked examples (ExSpec; same output, greedy). It is
    off by default: on the every-core engine a draft is taken from a batched row only
    where it leads by more than twice the logit bound, and on small models the passes
    that decides cost more than they save (docs/architecture.md, "ExSpec").
    """

    def __init__(
        self,
        model: BaseChatModel,
        tools: Sequence[Tool],
        *,
        max_rounds: int = 2,
        max_tasks: int = 6,
        examples: Sequence[tuple[str, str]] = (),
        tool_timeout: float = 30.0,
        observer: Observer | None = None,
        consent: ConsentPolicy | None = None,
        exspec: bool = False,
    ) -> None:
        if not tools:
            raise ValueError("the plan-out agent needs at least one tool")
        self.consent = ConsentPolicy.deny_all(NO_CONSENT) if consent is None else consent
        self.model = model
        self.tools = {t.name: t for t in tools}
        self.specs = {t.name: t.spec for t in tools}
        self.max_rounds = max_rounds
        self.examples = tuple(examples)
        self.tool_timeout = tool_timeout
        self.observer = observer
        self._plan_kwargs: dict[str, Any] = {}
        self._arbiter_kwargs: dict[str, Any] = {}
        if isinstance(model, ChatToolweave):  # grammars keep a tiny model's output well formed
            specs = list(self.specs.values())
            self._plan_kwargs = {"grammar": plan_grammar(specs, max_tasks=max_tasks)}
            self._arbiter_kwargs = {"grammar": arbiter_grammar()}
            if exspec:
                # ExSpec drafts from the worked examples each prompt shows (Agent-X); the
                # output stays the greedy one, so this only changes how fast it is decoded.
                self._plan_kwargs["exspec"] = [f"{q}\n{plan}" for q, plan in self.examples]
                self._arbiter_kwargs["exspec"] = [f"{q}\n{a}" for q, a in ARBITER_EXAMPLES]

    # ------------------------------------------------------------ public
    @property
    def planner_kwargs(self) -> dict[str, Any]:
        """What the Planner's model is bound with (its grammar on `ChatToolweave`)."""
        return dict(self._plan_kwargs)

    @property
    def arbiter_kwargs(self) -> dict[str, Any]:
        """What the Arbiter's model is bound with (its grammar on `ChatToolweave`)."""
        return dict(self._arbiter_kwargs)

    def run(self, query: str) -> PlanOutResult:
        """Answer `query` (blocking)."""
        return anyio.run(self.arun, query)

    async def arun(self, query: str) -> PlanOutResult:
        """Answer `query` without blocking the event loop (model calls run on threads)."""
        t0 = time.perf_counter()
        rounds: list[PlanRound] = []
        previous: list[tuple[str, str]] = []
        ledger = CallLedger()  # the side effects of this request, across its rounds
        for n in range(1, self.max_rounds + 1):
            if n > 1:
                ledger.next_round()
            self._emit(PlannerStart(n))
            round_ = await self._round(query, previous, ledger)
            rounds.append(round_)
            decision = round_.decision
            if decision.finish:
                elapsed = time.perf_counter() - t0
                return PlanOutResult(decision.answer, tuple(rounds), elapsed, ledger=ledger)
            if not decision.replan:  # unreadable: replanning would plan side effects again
                return PlanOutResult(
                    f"(stopped: {decision.problem})",
                    tuple(rounds),
                    time.perf_counter() - t0,
                    finished=False,
                    error=decision.problem,
                    ledger=ledger,
                )
            previous.append((round_.plan_text, round_.run.observations_text()))
        last = rounds[-1].run.observations_text() if rounds else ""
        return PlanOutResult(
            f"(no final answer after {self.max_rounds} rounds)\n{last}",
            tuple(rounds),
            time.perf_counter() - t0,
            finished=False,
            ledger=ledger,
        )

    # ------------------------------------------------------------ one round
    async def _round(
        self, query: str, previous: Sequence[tuple[str, str]], ledger: CallLedger
    ) -> PlanRound:
        msgs = planner_messages(
            list(self.specs.values()), query, examples=self.examples, previous=previous
        )
        parser = PlanStreamParser(self.specs)
        text_parts: list[str] = []
        t0 = time.perf_counter()
        planner_done: list[float] = []

        async def tasks() -> AsyncIterator[PlanTask]:
            async for delta in self._stream_text(msgs, self._plan_kwargs):
                text_parts.append(delta)
                for task in parser.feed(delta):
                    self._emit(PlanLine(task.index, task.tool))
                    yield task
                if parser.joined:  # a free-text model may keep writing after join()
                    break
            planner_done.append(time.perf_counter())
            parser.close()

        run = await execute_plan(
            tasks(),
            self.tools,
            timeout=self.tool_timeout,
            on_event=self._task_event,
            consent=self.consent,
            ledger=ledger,
        )
        plan_text = "".join(text_parts)
        planner_s = (planner_done[0] if planner_done else time.perf_counter()) - t0
        self._emit(PlanDone(plan_text, run.ok, planner_s))
        t1 = time.perf_counter()
        self._emit(ArbiterStart())
        arbiter_msgs = arbiter_messages(query, plan_text, run.observations_text())
        arbiter_text = "".join(
            [d async for d in self._stream_text(arbiter_msgs, self._arbiter_kwargs)]
        )
        decision = read_arbiter(arbiter_text)
        arbiter_s = time.perf_counter() - t1
        self._emit(
            ArbiterDone(
                decision.finish,
                decision.answer,
                decision.thought,
                truncated=decision.truncated,
                problem=decision.problem,
            )
        )
        return PlanRound(
            plan_text, run, arbiter_text, decision, planner_s, arbiter_s,
            tuple(msgs), tuple(arbiter_msgs),
        )  # fmt: skip

    async def _stream_text(
        self, msgs: Sequence[tuple[str, str]], kwargs: Mapping[str, Any]
    ) -> AsyncIterator[str]:
        """Text deltas of the model's reply; the model streams on a worker thread."""
        # Unbounded: the producer never blocks, so stopping early needs no draining.
        send, receive = anyio.create_memory_object_stream[str | BaseException | None](math.inf)
        bound = self.model.bind(**kwargs) if kwargs else self.model
        stop = threading.Event()

        token = anyio.lowlevel.current_token()

        def put(item: str | BaseException | None) -> None:
            if stop.is_set():
                return  # the reader has stopped: nobody takes the item
            try:
                anyio.from_thread.run_sync(send.send_nowait, item, token=token)
            except (anyio.RunFinishedError, anyio.ClosedResourceError, anyio.BrokenResourceError):
                stop.set()  # its event loop or stream is gone: stop decoding for it

        def produce() -> None:
            try:
                for chunk in bound.stream(list(msgs)):
                    if stop.is_set():
                        break
                    text = chunk.content if isinstance(chunk, AIMessageChunk) else ""
                    if isinstance(text, str) and text:
                        put(text)
                put(None)
            except BaseException as exc:  # handed to the reading side
                put(exc)

        # A plain thread: a task group inside this generator would span tasks.
        threading.Thread(target=produce, daemon=True, name="toolweave-planner").start()
        try:
            async for item in receive:
                if item is None:
                    break
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()

    def _task_event(self, event: TaskEvent) -> None:
        task, record = event.task, event.record
        if event.kind == "started":
            self._emit(TaskStart(task.index, task.tool))
        elif event.kind == "held":
            self._emit(TaskHeld(task.index, task.tool))
        elif event.kind == "denied" and record is not None:
            reason = record.observation.text
            by = event.by or "policy"
            self._emit(CallDenied(task.tool, dict(record.arguments), reason, by, task.index))
        elif event.kind == "reused" and record is not None:
            text = record.observation.observation()[:200]
            round_ = record.reused_round or 0
            self._emit(CallReused(task.index, task.tool, round_, text, record.shared_with))
        elif event.kind == "finished" and record is not None:
            r = record
            self._emit(
                TaskDone(
                    index=r.task.index,
                    tool=r.task.tool,
                    error=r.failed,
                    ms=(r.finished - r.started) * 1000,
                    observation=r.observation.observation()[:200],
                )
            )

    def _emit(self, event: RunEvent) -> None:
        if self.observer is not None:
            self.observer(event)
