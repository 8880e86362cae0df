"""ChatToolweave inside a real `langchain.agents.create_agent` agent, on the embedded
model: read-only tools start while the model is still writing its message, and run once."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from toolweave.adapters.langchain.chat_model import ChatToolweave
from toolweave.adapters.langchain.provisional import ProvisionalRunner, ProvisionalToolMiddleware
from toolweave.toolspec import ToolCall


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # LangGraph runs on asyncio


class Recorder:
    def __init__(self) -> None:
        self.runs: list[tuple[float, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def record(self, **kwargs: Any) -> None:
        with self.lock:
            self.runs.append((time.perf_counter(), kwargs))


def weather_tool(rec: Recorder) -> Any:
    @tool
    def get_weather(city: str, unit: str = "celsius") -> str:
        """Get the current weather in a city."""
        rec.record(city=city, unit=unit)
        time.sleep(0.05)
        return f"12 degrees {unit}, cloudy, in {city}"

    return get_weather


def email_tool(rec: Recorder) -> Any:
    @tool
    def send_email(to: str, subject: str, body: str = "") -> str:
        """Send an email to a recipient."""
        rec.record(to=to, subject=subject, body=body)
        return "sent"

    return send_email


def test_read_only_tool_starts_before_the_message_is_complete_and_runs_once() -> None:
    rec = Recorder()
    middleware = ProvisionalToolMiddleware()
    model = ChatToolweave(auto_calls="user_turn", max_tokens=64)
    agent = create_agent(model, [weather_tool(rec)], middleware=[middleware])

    out = agent.invoke({"messages": [HumanMessage("What's the weather in Zurich right now?")]})

    messages = out["messages"]
    calls = [c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    assert [c["name"] for c in calls] == ["get_weather"]
    tool_messages = [m for m in messages if isinstance(m, ToolMessage)]
    assert len(tool_messages) == 1 and tool_messages[0].tool_call_id == calls[0]["id"]
    city = calls[0]["args"]["city"]
    assert city in tool_messages[0].content
    # The tool ran once, and it started before the model's message was complete.
    assert len(rec.runs) == 1
    runner = middleware.runner
    assert runner is not None and len(runner.runs) == 1 and runner.runs[0].claimed
    first_message_done = middleware.message_done[0]
    assert rec.runs[0][0] < first_message_done
    assert runner.runs[0].started < first_message_done
    assert isinstance(messages[-1], AIMessage) and not messages[-1].tool_calls


def test_tool_with_side_effects_is_never_started_early() -> None:
    rec = Recorder()
    middleware = ProvisionalToolMiddleware()
    model = ChatToolweave(auto_calls="user_turn", max_tokens=64)
    agent = create_agent(model, [email_tool(rec)], middleware=[middleware])

    agent.invoke({"messages": [HumanMessage("Email bob@example.com with subject Lunch")]})

    assert middleware.runner is not None and middleware.runner.runs == []
    assert len(rec.runs) == 1  # run by the agent, once


@pytest.mark.anyio
async def test_async_agent_reuses_the_early_result() -> None:
    rec = Recorder()
    middleware = ProvisionalToolMiddleware()
    model = ChatToolweave(auto_calls="user_turn", max_tokens=64)
    agent = create_agent(model, [weather_tool(rec)], middleware=[middleware])

    out = await agent.ainvoke({"messages": [HumanMessage("Weather in Oslo, please?")]})

    assert any(isinstance(m, ToolMessage) for m in out["messages"])
    assert len(rec.runs) == 1
    assert middleware.runner is not None and middleware.runner.runs[0].claimed


def test_a_corrected_call_runs_normally_and_the_early_result_is_dropped() -> None:
    rec = Recorder()
    weather = weather_tool(rec)
    runner = ProvisionalRunner({"get_weather": weather}, frozenset({"get_weather"}))
    assert runner.start(ToolCall("get_weather", {"city": "Zurich"}))
    # Leaving out an argument equals writing its default: the same run is claimed.
    same = runner.claim("get_weather", {"city": "Zurich", "unit": "celsius"})
    assert same is not None
    assert "Zurich" in runner.result(same, "call_1").content
    assert runner.start(ToolCall("get_weather", {"city": "Bern"}))
    assert runner.claim("get_weather", {"city": "Bern", "unit": "fahrenheit"}) is None
    runner.drop_unclaimed()
    assert runner.claim("get_weather", {"city": "Bern"}) is None


def test_runner_refuses_tools_that_are_not_read_only() -> None:
    rec = Recorder()
    runner = ProvisionalRunner({"send_email": email_tool(rec)}, frozenset())
    assert not runner.start(ToolCall("send_email", {"to": "a@b.c", "subject": "x"}))
    assert not runner.start(ToolCall("unknown", {}))
    assert rec.runs == []
