"""The live display and the trace of `toolweave run`.

`RunTrace` receives the events of the chat model (decoding phases) and of the agent
middleware (tool starts and finishes), stamps each with the seconds since the run
began, keeps them for `--json`, and prints one line per event as it happens.
Callbacks arrive from decoder and tool threads, so printing is serialised. An MCP
tool's progress notifications (`progress`, the hub's ``progress`` callback) print one
short line each, at most one a `PROGRESS_INTERVAL` per tool besides the last.
"""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from toolweave.events import (
    ArbiterDone,
    ArbiterStart,
    CallDenied,
    CallName,
    CallReused,
    FinalCall,
    ModelDone,
    ModelStart,
    Note,
    PlanDone,
    PlanLine,
    PlannerStart,
    PromptCacheEvent,
    ProvisionalCallEvent,
    RunEvent,
    TaskDone,
    TaskHeld,
    TaskStart,
    ToolDone,
    ToolReused,
    ToolStart,
)
from toolweave.toolspec import ToolCall

if TYPE_CHECKING:
    from toolweave.adapters.mcp.progress import ProgressUpdate

__all__ = ["PROGRESS_INTERVAL", "RunTrace"]

#: Fewest seconds between two printed progress lines of one tool (the last always prints).
PROGRESS_INTERVAL = 0.5


def _call_text(call: ToolCall) -> str:
    args = ", ".join(
        f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in dict(call.arguments).items()
    )
    return f"{call.name}({args})"


class RunTrace:
    """Collects run events; prints them live unless `quiet`.

    `events` holds each event as ``{"t": seconds, "kind": ..., **its fields}``."""

    def __init__(self, console: Console | None = None, *, quiet: bool = False) -> None:
        self.console = console or Console(highlight=False)
        self.quiet = quiet
        self.t0 = time.perf_counter()
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._messages = 0
        self._cache: PromptCacheEvent | None = None  # the state store's prefill, if any
        self._explained: set[int] = set()  # tasks of this round whose outcome was shown
        self._progress_shown: dict[str, float] = {}  # tool -> when its progress last printed

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def __call__(self, event: RunEvent) -> None:
        with self._lock:
            t = self.elapsed()
            self.events.append({"t": round(t, 4), "kind": event.kind, **event.to_json()})
            line = self._line(event)
            if line and not self.quiet:
                self.console.print(f"[dim]{t:7.2f}s[/dim] {line}")

    def note(self, text: str) -> None:
        """A free-form phase line (servers started, tools selected, ...)."""
        self(Note(text))

    def progress(self, update: ProgressUpdate) -> None:
        """An MCP tool's progress notification: recorded, and printed as one line."""
        with self._lock:
            t = self.elapsed()
            self.events.append(
                {
                    "t": round(t, 4),
                    "kind": "tool_progress",
                    "server": update.server,
                    "tool": update.tool,
                    "progress": update.progress,
                    "total": update.total,
                    "message": update.message,
                }
            )
            last = self._progress_shown.get(update.tool)
            final = update.total is not None and update.progress >= update.total
            if self.quiet or (last is not None and t - last < PROGRESS_INTERVAL and not final):
                return
            self._progress_shown[update.tool] = t
            self.console.print(f"[dim]{t:7.2f}s[/dim]   progress: {escape(update.line())}")

    def prompt(self, question: str) -> None:
        """Print a question for the user (even when quiet), without a newline."""
        with self._lock:
            self.console.print(f"[bold yellow]{escape(question)}[/bold yellow]", end="")

    def _line(self, event: RunEvent) -> str | None:
        match event:
            case Note(text=text):
                return escape(text)
            case PromptCacheEvent():
                self._cache = event
                return (
                    f"  prompt cache ({event.source}): {event.reused} of "
                    f"{event.prompt_tokens} tokens restored, {event.prefilled} prefilled "
                    f"in {event.ms:.0f} ms"
                    + (f"; state saved at token {event.saved_at}" if event.saved_at else "")
                )
            case ModelStart(mode=mode):
                self._messages += 1
                self._cache = None
                return f"[bold]model[/bold] message {self._messages}: decoding ({mode})"
            case CallName(name=name):
                return f"  tool chosen: [cyan]{escape(name)}[/cyan]"
            case ProvisionalCallEvent(call=call):
                return f"  provisional call: {escape(_call_text(call))}"
            case FinalCall(call=call):
                return f"  final call: [cyan]{escape(_call_text(call))}[/cyan]"
            case ModelDone():
                return self._done_line(event)
            case ToolStart(call=call, early=early):
                how = "early, on the model's call" if early else "by the agent"
                return f"  [green]tool {escape(call.name)} started[/green] ({how})"
            case ToolDone():
                status = "[red]failed[/red]" if event.error else "finished"
                return f"  tool {escape(event.name)} {status} in {event.ms:.0f} ms"
            case PlannerStart(round=n):
                self._explained.clear()
                return f"[bold]planner[/bold] round {n}: writing the plan"
            case TaskHeld(index=index, tool=tool):
                return (
                    f"  task {index} {escape(tool)} has side effects: "
                    "held until the whole plan is read and checked"
                )
            case CallDenied():
                if event.index is not None:
                    self._explained.add(event.index)
                task = "" if event.index is None else f"task {event.index} "
                call = escape(_call_text(ToolCall(event.tool, dict(event.arguments))))
                return f"  [red]{task}denied[/red]: {call}: {escape(event.reason)}"
            case CallReused(index=index, tool=tool, same_as=same) if same is not None:
                self._explained.add(index)
                return (
                    f"  task {index} {escape(tool)}: the same read-only call as task {same}; "
                    "its result is shared, it is not run again"
                )
            case CallReused(index=index, tool=tool, round=n):
                self._explained.add(index)
                return (
                    f"  task {index} {escape(tool)}: the same call already ran in round {n}; "
                    "its result is reused, it is not run again"
                )
            case PlanLine(index=index, tool=tool):
                return f"  plan line {index}: {escape(tool)}(...) ready"
            case TaskStart(index=index, tool=tool):
                return f"  [green]task {index} {escape(tool)} started[/green]"
            case TaskDone() if event.index in self._explained:
                return None
            case TaskDone():
                status = "[red]failed[/red]" if event.error else "finished"
                obs = escape(event.observation[:120])
                return f"  task {event.index} {status} in {event.ms:.0f} ms: {obs}"
            case PlanDone(plan=plan, planner_s=planner_s):
                shown = escape(plan.strip()).replace("\n", "\n    ")
                return f"  plan ({planner_s:.1f} s):\n    {shown}"
            case ArbiterStart():
                return "[bold]arbiter[/bold]: reading the results"
            case ArbiterDone(problem=problem) if problem:
                return f"  [red]stopped[/red]: {escape(problem)}"
            case ArbiterDone(finish=finish, thought=thought, truncated=truncated):
                verdict = "finish" if finish else "replan"
                if truncated:
                    verdict += " (the answer was cut short)"
                return f"  decision: {verdict}; thought: {escape(thought[:160])}"
            case ToolReused(call=call):
                return (
                    f"  agent reuses the early result of {escape(call.name)} "
                    "(the tool is not run again)"
                )
        return None

    def _done_line(self, event: ModelDone) -> str:
        s = event.stats
        cached = s.cached_tokens
        prompt_ms = s.prompt_ms
        if self._cache is not None:  # the store prefilled the prompt before decoding
            cached = self._cache.reused
            prompt_ms += self._cache.ms
        line = (
            f"  message done: {s.prompt_tokens} prompt tokens ({cached} from cache, "
            f"{s.prompt_tokens - cached} prefilled in {prompt_ms:.0f} ms), "
            f"{s.output_tokens} output tokens in {s.decode_passes} decode passes, "
            f"{s.total_ms:.0f} ms"
        )
        if event.text:
            line += f"\n  says: {escape(event.text.strip()[:300])}"
        return line
