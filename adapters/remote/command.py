"""The remote-model options of `toolweave run`, checked before any MCP server starts.

    toolweave run "REQUEST" --model openai:http://127.0.0.1:8000/v1
                  [--remote-model NAME] [--api-key KEY] [--remote-timeout SECONDS]

`prepare_remote` checks the other options against a remote model
(`check_remote_options`), asks the server for its models (a server that cannot be
reached fails here, within the connect timeout) and builds the chat model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolweave.adapters.remote.agents import (
    check_remote_options,
    run_remote_plan,
    run_remote_react,
)
from toolweave.adapters.remote.chat import READ_TIMEOUT_S, remote_chat_model, remote_errors
from toolweave.adapters.remote.spec import is_remote_spec, parse_remote_spec

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.tools import BaseTool

    from toolweave.consent import ConsentPolicy
    from toolweave.events import Observer
    from toolweave.tools import Tool

#: `run`'s sampling options and the remote chat model's parameters they set.
_SAMPLING_FLAGS = {
    "--temperature": "temperature",
    "--top-p": "top_p",
    "--top-k": "top_k",
    "--seed": "seed",
}

__all__ = [
    "REMOTE_ONLY",
    "RemoteRun",
    "check_local_options",
    "prepare_remote",
    "remote_for_run",
    "run_remote",
]

#: Options that only mean something with ``--model openai:URL``.
REMOTE_ONLY = ("--remote-model", "--api-key", "--remote-timeout")
#: Most seconds ``--remote-timeout`` may ask for.
MAX_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class RemoteRun:
    """The chat model of one remote run, its base URL and model name, and a notice per
    option it ignores."""

    chat: BaseChatModel
    base_url: str
    model: str
    notices: tuple[str, ...]


def prepare_remote(
    spec: str,
    *,
    model: str | None,
    api_key: str | None,
    timeout: float | None,
    max_tokens: int,
    given: Mapping[str, Any],
) -> RemoteRun:
    """Check the options and the server; raises `ValueError` for a refused option or a
    bad spec, `RemoteModelError` for a server that cannot be used."""
    parsed = parse_remote_spec(spec)  # a bad spec fails before anything else
    notices = check_remote_options(given)
    wait = READ_TIMEOUT_S if timeout is None else timeout
    if not 0 < wait <= MAX_TIMEOUT_S:
        raise ValueError(f"--remote-timeout must be more than 0 and at most {MAX_TIMEOUT_S:g} s")
    if model is not None and not model.strip():
        raise ValueError("--remote-model is empty")
    sampling = {
        name: given[flag] for flag, name in _SAMPLING_FLAGS.items() if given.get(flag) is not None
    }
    chat = remote_chat_model(
        spec, model=model, api_key=api_key, timeout=wait, max_tokens=max_tokens, **sampling
    )
    name = str(getattr(chat, "model_name", model or ""))
    return RemoteRun(chat, parsed.base_url, name, tuple(notices))


def check_local_options(given: Mapping[str, Any]) -> None:
    """A `ValueError` when a remote-only option is given without a remote model."""
    used = [flag for flag in REMOTE_ONLY if given.get(flag) is not None]
    if used:
        raise ValueError(f"{', '.join(used)} needs a remote model: --model openai:URL")


def remote_for_run(
    model: str | None,
    name: str | None,
    api_key: str | None,
    timeout: float | None,
    max_tokens: int,
    given: Mapping[str, Any],
) -> RemoteRun | None:
    """`toolweave run`'s remote model for ``--model openai:URL``, None for a local model
    (then no remote-only option may be given); `ValueError` for a bad combination."""
    if not is_remote_spec(model):
        check_local_options(
            {"--remote-model": name, "--api-key": api_key, "--remote-timeout": timeout}
        )
        return None
    assert model is not None
    return prepare_remote(
        model, model=name, api_key=api_key, timeout=timeout, max_tokens=max_tokens, given=given
    )


def run_remote(
    remote: RemoteRun,
    agent: str,
    request: str,
    hub_tools: Sequence[Tool],
    tools: Sequence[BaseTool],
    examples: Sequence[tuple[str, str]],
    observer: Observer,
    consent: ConsentPolicy,
    system: str,
    max_steps: int,
) -> tuple[str, dict[str, Any]]:
    """The plan-out agent (`agent` "plan") or the react loop on the remote model: the
    answer and the run's summary; the client's errors become one-line errors."""
    with remote_errors(remote.base_url):
        if agent == "plan":
            return run_remote_plan(
                remote.chat, hub_tools, request, observer, examples=examples, consent=consent
            )
        _, answer, summary = run_remote_react(
            remote.chat, tools, request, observer, system=system, max_steps=max_steps
        )
        return answer, summary
