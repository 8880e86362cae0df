"""The live display and the trace of `toolweave run`.

`RunTrace` receives the events of the chat model (decoding phases) and of the agent
middleware (tool starts and finishes), stamps each with the seconds since the run
began, keeps them for `--json`, and prints one line per event as it happens.
Callbacks arrive from decoder and tool threads, so printing is serialised.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape

__all__ = ["RunTrace"]


def _call_text(data: Mapping[str, Any]) -> str:
    args = ", ".join(
        f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in dict(data["arguments"]).items()
    )
    return f"{data['name']}({args})"


class RunTrace:
    """Collects run events; prints them live unless `quiet`."""

    def __init__(self, console: Console | None = None, *, quiet: bool = False) -> None:
        self.console = console or Console(highlight=False)
        self.quiet = quiet
        self.t0 = time.perf_counter()
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._messages = 0
        self._cache: Mapping[str, Any] | None = None  # the state store's prefill, if any

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def __call__(self, kind: str, data: Mapping[str, Any]) -> None:
        with self._lock:
            t = self.elapsed()
            self.events.append({"t": round(t, 4), "kind": kind, **dict(data)})
            line = self._line(kind, data)
            if line and not self.quiet:
                self.console.print(f"[dim]{t:7.2f}s[/dim] {line}")

    def note(self, text: str) -> None:
        """A free-form phase line (servers started, tools selected, ...)."""
        self("note", {"text": text})

    def _line(self, kind: str, data: Mapping[str, Any]) -> str | None:
        if kind == "note":
            return escape(str(data["text"]))
        if kind == "prompt_cache":
            self._cache = data
            return (
                f"  prompt cache ({data['source']}): {data['reused']} of "
                f"{data['prompt_tokens']} tokens restored, {data['prefilled']} prefilled "
                f"in {data['ms']:.0f} ms"
                + (f"; state saved at token {data['saved_at']}" if data.get("saved_at") else "")
            )
        if kind == "model_start":
            self._messages += 1
            self._cache = None
            return f"[bold]model[/bold] message {self._messages}: decoding ({data['mode']})"
        if kind == "call_name":
            return f"  tool chosen: [cyan]{escape(str(data['name']))}[/cyan]"
        if kind == "provisional_call":
            return f"  provisional call: {escape(_call_text(data))}"
        if kind == "final_call":
            return f"  final call: [cyan]{escape(_call_text(data))}[/cyan]"
        if kind == "model_done":
            s = data["stats"]
            cached = s.get("cached_tokens", 0)
            prompt_ms = s["prompt_ms"]
            if self._cache is not None:  # the store prefilled the prompt before decoding
                cached = self._cache["reused"]
                prompt_ms += self._cache["ms"]
            line = (
                f"  message done: {s['prompt_tokens']} prompt tokens ({cached} from cache, "
                f"{s['prompt_tokens'] - cached} prefilled in {prompt_ms:.0f} ms), "
                f"{s['output_tokens']} output tokens in {s['decode_passes']} decode passes, "
                f"{s['total_ms']:.0f} ms"
            )
            if data.get("text"):
                line += f"\n  says: {escape(str(data['text']).strip()[:300])}"
            return line
        if kind == "tool_start":
            how = "early, on the model's call" if data["early"] else "by the agent"
            return f"  [green]tool {escape(str(data['name']))} started[/green] ({how})"
        if kind == "tool_done":
            status = "[red]failed[/red]" if data.get("error") else "finished"
            return f"  tool {escape(str(data['name']))} {status} in {data['ms']:.0f} ms"
        if kind == "planner_start":
            return f"[bold]planner[/bold] round {data['round']}: writing the plan"
        if kind == "plan_line":
            return f"  plan line {data['index']}: {escape(str(data['tool']))}(...) ready"
        if kind == "task_start":
            return f"  [green]task {data['index']} {escape(str(data['tool']))} started[/green]"
        if kind == "task_done":
            status = "[red]failed[/red]" if data.get("error") else "finished"
            obs = escape(str(data.get("observation", ""))[:120])
            return f"  task {data['index']} {status} in {data['ms']:.0f} ms: {obs}"
        if kind == "plan_done":
            plan = escape(str(data["plan"]).strip()).replace("\n", "\n    ")
            return f"  plan ({data['planner_s']:.1f} s):\n    {plan}"
        if kind == "arbiter_start":
            return "[bold]arbiter[/bold]: reading the results"
        if kind == "arbiter_done":
            verdict = "finish" if data["finish"] else "replan"
            return f"  decision: {verdict}; thought: {escape(str(data['thought'])[:160])}"
        if kind == "tool_reused":
            return (
                f"  agent reuses the early result of {escape(str(data['name']))} "
                "(the tool is not run again)"
            )
        return None
