"""OpenAI chat-completions responses out: deltas, stream chunks and whole completions.

A response is a sequence of `Delta`s: `TextDelta` (content), `CallStart` (a tool call's
id and name, once decided), `ArgsDelta` (more of its arguments text) and one final
`Finish`. `chunk` turns each into a ``chat.completion.chunk``; `Completion` adds them up
into the ``chat.completion`` of a request that did not stream, so the two agree by
construction. `StopHoldback` keeps back streamed text that may be the start of a stop
string, which the answer must not contain.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ArgsDelta",
    "CallStart",
    "Completion",
    "Delta",
    "Finish",
    "ResponseIds",
    "StopHoldback",
    "TextDelta",
    "chunk",
    "sse",
    "usage_body",
    "usage_chunk",
]


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class CallStart:
    index: int
    id: str
    name: str


@dataclass(frozen=True)
class ArgsDelta:
    index: int
    text: str


@dataclass(frozen=True)
class Finish:
    """The end of a response: why it ended and what it cost in tokens."""

    reason: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int


Delta = TextDelta | CallStart | ArgsDelta | Finish


@dataclass(frozen=True)
class ResponseIds:
    """What every chunk of one response repeats."""

    model: str
    id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex[:24]}")
    created: int = field(default_factory=lambda: int(time.time()))


def usage_body(finish: Finish) -> dict[str, Any]:
    return {
        "prompt_tokens": finish.prompt_tokens,
        "completion_tokens": finish.completion_tokens,
        "total_tokens": finish.prompt_tokens + finish.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": finish.cached_tokens},
    }


def _chunk_body(ids: ResponseIds, choices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": ids.id,
        "object": "chat.completion.chunk",
        "created": ids.created,
        "model": ids.model,
        "choices": choices,
    }


def chunk(ids: ResponseIds, delta: Delta, *, first: bool = False) -> dict[str, Any]:
    """The ``chat.completion.chunk`` of one delta (``first`` adds the assistant role)."""
    body: dict[str, Any] = {"role": "assistant"} if first else {}
    finish: str | None = None
    if isinstance(delta, TextDelta):
        body["content"] = delta.text
    elif isinstance(delta, CallStart):
        if first:
            body["content"] = None
        body["tool_calls"] = [
            {
                "index": delta.index,
                "id": delta.id,
                "type": "function",
                "function": {"name": delta.name, "arguments": ""},
            }
        ]
    elif isinstance(delta, ArgsDelta):
        body["tool_calls"] = [{"index": delta.index, "function": {"arguments": delta.text}}]
    else:
        finish = delta.reason
        if first:
            body["content"] = ""
    choice = {"index": 0, "delta": body, "logprobs": None, "finish_reason": finish}
    return _chunk_body(ids, [choice])


def usage_chunk(ids: ResponseIds, finish: Finish) -> dict[str, Any]:
    """The last chunk when the client asked for ``stream_options.include_usage``."""
    body = _chunk_body(ids, [])
    body["usage"] = usage_body(finish)
    return body


def sse(data: dict[str, Any] | str) -> bytes:
    """One server-sent event carrying `data` (JSON, or a literal such as ``[DONE]``)."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {text}\n\n".encode()


class Completion:
    """Adds deltas up into one ``chat.completion``."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: list[dict[str, Any]] = []
        self.finish: Finish | None = None

    def add(self, delta: Delta) -> None:
        if isinstance(delta, TextDelta):
            self.text.append(delta.text)
        elif isinstance(delta, CallStart):
            self.calls.append(
                {"id": delta.id, "type": "function", "function": {"name": delta.name, "args": []}}
            )
        elif isinstance(delta, ArgsDelta):
            self.calls[delta.index]["function"]["args"].append(delta.text)
        else:
            self.finish = delta

    def body(self, ids: ResponseIds) -> dict[str, Any]:
        if self.finish is None:
            raise ValueError("the response has not finished")
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(self.text) if self.text or not self.calls else None,
            "refusal": None,
        }
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {
                        "name": c["function"]["name"],
                        "arguments": "".join(c["function"]["args"]) or "{}",
                    },
                }
                for c in self.calls
            ]
        return {
            "id": ids.id,
            "object": "chat.completion",
            "created": ids.created,
            "model": ids.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": self.finish.reason,
                }
            ],
            "usage": usage_body(self.finish),
        }


class StopHoldback:
    """Streamed text minus anything that may turn out to start a stop string.

    `push` returns the text that is safe to send; `end` returns the rest of the final
    answer (the decoder's text, which never contains a stop string)."""

    def __init__(self, stop: tuple[str, ...]) -> None:
        self.stop = stop
        self.sent = ""
        self._seen = ""

    def push(self, text: str) -> str:
        self._seen += text
        safe = len(self._seen)
        for s in self.stop:
            at = self._seen.find(s)
            if at >= 0:
                safe = min(safe, at)
                continue
            for k in range(min(len(s) - 1, len(self._seen)), 0, -1):
                if self._seen.endswith(s[:k]):
                    safe = min(safe, len(self._seen) - k)
                    break
        return self._emit(self._seen[:safe])

    def end(self, final: str) -> str:
        return self._emit(final)

    def _emit(self, upto: str) -> str:
        if not upto.startswith(self.sent) or len(upto) <= len(self.sent):
            return ""
        out = upto[len(self.sent) :]
        self.sent = upto
        return out
