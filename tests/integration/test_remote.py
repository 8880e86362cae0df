"""Remote engines: the agents of `toolweave run --model openai:URL` on `toolweave serve`
(the real embedded model over loopback HTTP, one server for the module) with the demo
MCP servers; bad specs and an unreachable server fail with one line."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolweave.adapters.demo_servers import plan_examples
from toolweave.adapters.langchain.plan_agent import PlanOutAgent
from toolweave.adapters.mcp.client import MCPHub, demo_server_configs
from toolweave.adapters.remote import (
    RemoteModelError,
    RemoteSpecError,
    list_models,
    parse_remote_spec,
    remote_chat_model,
    remote_errors,
)
from toolweave.adapters.serve.app import ServeConfig, create_app
from toolweave.adapters.serve.backend import Backend
from toolweave.adapters.serve.background import ServerThread
from toolweave.native.states.store import StateStore

KEY = "remote-test-key"
WEATHER_REQUEST = "What's the weather in London and in Paris right now?"


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    # The state store lets later requests reuse the Arbiter's fixed prompt prefix.
    store = StateStore(tmp_path_factory.mktemp("states"))
    b = Backend(n_ctx=4096, max_tokens=256, mode="jump", auto_calls="user_turn", state_store=store)
    b.load()
    yield b
    store.close()


@pytest.fixture(scope="module")
def server(backend: Backend) -> Iterator[ServerThread]:
    with ServerThread(create_app(backend, ServeConfig(api_key=KEY))) as running:
        yield running


@pytest.fixture(scope="module")
def spec(server: ServerThread) -> str:
    return f"openai:{server.base_url}"


def toolweave(
    *args: str | Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolweave.adapters.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("toolweave: error: "), proc.stderr
    return lines[0]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed again: nothing listens there


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("openai:", "needs the server's base URL"),
        ("openai:localhost:8000/v1", "no scheme"),
        ("openai:ftp://host/v1", "http or https"),
        ("openai:http://user:secret@host/v1", "credentials"),
        ("openai:http:///v1", "no host"),
        ("openai:http://host:99999/v1", "invalid port"),
        ("openai:http://host/v1?debug=1", "no query"),
        ("gemma3", "starts with 'openai:'"),
    ],
)
def test_bad_specs_are_refused_with_the_reason(text: str, problem: str) -> None:
    with pytest.raises(RemoteSpecError, match=problem) as caught:
        parse_remote_spec(text)
    assert "secret" not in str(caught.value)


def test_spec_keeps_the_base_url_and_defaults_the_path() -> None:
    assert parse_remote_spec("openai:http://127.0.0.1:8000/v1/").base_url == (
        "http://127.0.0.1:8000/v1"
    )
    assert parse_remote_spec("openai:HTTPS://Example.org").base_url == "https://example.org/v1"


def test_listing_names_the_served_model_and_needs_the_key(spec: str, backend: Backend) -> None:
    assert list_models(spec, api_key=KEY) == [backend.model_id]
    with pytest.raises(RemoteModelError, match="refused the API key"):
        remote_chat_model(spec, api_key="wrong")


def test_unreachable_server_is_one_error(spec: str) -> None:
    with pytest.raises(RemoteModelError, match="connection refused"):
        remote_chat_model(f"openai:http://127.0.0.1:{free_port()}/v1", model="m")
    # A model name the server does not serve: the client's error becomes one line.
    chat = remote_chat_model(spec, model="no-such-model", api_key=KEY, max_retries=0)
    where = spec.removeprefix("openai:")
    with pytest.raises(RemoteModelError, match=r"HTTP 404.*no-such-model"), remote_errors(where):
        chat.invoke("hi")


def test_plan_out_agent_runs_on_the_remote_model(
    spec: str, backend: Backend, tmp_path: Path
) -> None:
    chat = remote_chat_model(spec, api_key=KEY, max_tokens=96)
    assert getattr(chat, "model_name", None) == backend.model_id  # the first listed
    kinds: list[str] = []
    with MCPHub(demo_server_configs(tmp_path, names=["weather"])) as hub:
        agent = PlanOutAgent(
            chat,
            hub.tools,
            examples=plan_examples()[:2],
            max_rounds=1,
            observer=lambda event: kinds.append(event.kind),
        )
        assert agent.planner_kwargs == {}  # no grammar: the free-text plan is parsed
        result = agent.run(WEATHER_REQUEST)
    first = result.rounds[0]
    assert first.plan_text.startswith("1. current_weather(")
    ran = [r for r in first.run.records if r.ran]
    assert ran and all(not r.failed for r in ran)
    assert {r.arguments.get("city") for r in ran} <= {"London", "Paris"}
    assert "London" in first.run.observations_text()  # the MCP server's answer
    # Each task started while the Planner was still streaming its plan.
    assert kinds.index("task_start") < kinds.index("plan_done")
    assert first.arbiter_text and "arbiter_done" in kinds


def test_run_command_plans_on_the_remote_model(spec: str, tmp_path: Path) -> None:
    proc = toolweave(
        "run",
        WEATHER_REQUEST,
        "--model",
        spec,
        "--demo",
        "weather",
        "--state-dir",
        tmp_path,
        "--yes",
        "--no-prompt-cache",
        "--json",
        env={"TOOLWEAVE_API_KEY": KEY},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    kinds = [e["kind"] for e in doc["events"]]
    for kind in ("planner_start", "plan_line", "task_start", "task_done", "arbiter_done"):
        assert kind in kinds, kinds
    assert doc["summary"]["tool_calls"] >= 1 and doc["answer"]
    notes = [e["text"] for e in doc["events"] if e["kind"] == "note"]
    assert any(n.startswith("remote model ") for n in notes)
    assert any("ignored with a remote model: --no-prompt-cache" in n for n in notes)


def test_run_command_react_agent_on_the_remote_model(spec: str, tmp_path: Path) -> None:
    proc = toolweave(
        "run",
        "What's the weather in London right now?",
        "--model",
        spec,
        "--api-key",
        KEY,
        "--agent",
        "react",
        "--max-tokens",
        "32",
        "--demo",
        "weather",
        "--state-dir",
        tmp_path,
        "--json",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    kinds = [e["kind"] for e in doc["events"]]
    assert "model_start" in kinds and "tool_start" in kinds and "tool_done" in kinds
    assert doc["summary"]["tool_calls"] >= 1 and doc["summary"]["prompt_tokens"] > 0
    assert doc["answer"] and doc["answer"] != "(no answer)"


def test_sampling_options_reach_the_remote_model(spec: str) -> None:
    """A remote model samples as asked: the same seed gives the same answer, other
    seeds (at temperature 0.9) not all the same one."""
    chat = remote_chat_model(spec, api_key=KEY, max_tokens=12, temperature=0.9, top_k=40, seed=7)
    assert getattr(chat, "extra_body", None) == {"top_k": 40}
    question = "Name a colour and say why you like it."
    assert chat.invoke(question).content == chat.invoke(question).content
    answers = {
        remote_chat_model(spec, api_key=KEY, max_tokens=12, temperature=0.9, seed=s)
        .invoke(question)
        .content
        for s in (1, 2, 3, 4)
    }
    assert len(answers) > 1, answers


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--model", "openai:127.0.0.1:8000/v1"], "no scheme"),
        (["--model", "openai:http://127.0.0.1:PORT/v1"], "connection refused"),
        (["--model", "openai:http://127.0.0.1:PORT/v1", "--compare"], "--compare cannot"),
        (["--remote-model", "m"], "needs a remote model"),
    ],
)
def test_run_command_bad_remote_input_is_one_line(args: list[str], problem: str) -> None:
    port = str(free_port())
    proc = toolweave("run", "hi", *(a.replace("PORT", port) for a in args))
    assert problem in one_line_error(proc)
