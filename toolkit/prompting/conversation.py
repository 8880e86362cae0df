"""What a conversation's messages hold for the decoders: the user's words, and the texts
of the session's past that session drafts copy from (pure: no engine)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from toolweave.prompting.chat_template import Message

__all__ = ["SESSION_DRAFT_CHARS", "request_text", "session_texts"]


def request_text(request: str | Sequence[Message]) -> str:
    """The user's words: the request itself or the text of its last user message."""
    if isinstance(request, str):
        return request
    messages: Sequence[Message] = request
    for message in reversed(messages):
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str):
            return content
    return ""


#: At most this much of a session's past is searched for drafts (the latest of it).
SESSION_DRAFT_CHARS = 32_000


def session_texts(request: str | Sequence[Message]) -> tuple[str, ...]:
    """The texts of a conversation before its last user message (earlier turns, the
    assistant's calls, tool results), oldest first, the latest `SESSION_DRAFT_CHARS`
    characters of them: what session drafts copy from. A bare request has none."""
    if isinstance(request, str):
        return ()
    messages = list(request)
    last_user = max(
        (i for i, m in enumerate(messages) if m.get("role") == "user"), default=len(messages)
    )
    texts: list[str] = []
    left = SESSION_DRAFT_CHARS
    for message in reversed(messages[:last_user]):
        content = message.get("content")
        content = content if isinstance(content, str) else ""
        # Calls given to the template as ``tool_calls``: their arguments as compact JSON.
        content = "\n".join([content, *_call_argument_texts(message)]).strip()
        if message.get("role") == "system" or not content:
            continue
        texts.append(content[-left:])
        left -= len(texts[-1])
        if left <= 0:
            break
    return tuple(reversed(texts))


def _call_argument_texts(message: Message) -> list[str]:
    """The arguments of an assistant message's ``tool_calls`` (OpenAI shape), each as
    compact JSON (as toolweave writes them) or the string the message holds."""
    out: list[str] = []
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        function = call.get("function") if isinstance(call, dict) else None
        args = function.get("arguments") if isinstance(function, dict) else None
        if isinstance(args, str):
            out.append(args)
        elif isinstance(args, dict):
            out.append(json.dumps(args, ensure_ascii=False, separators=(",", ":")))
    return out
