"""The probe conversation call-syntax detection (`toolweave.formats.detect`) renders
through a chat template: the probe calls and tools, the rendering itself (a template
that fails is refused with a `CallFormatError`), and trimming a rendered answer to its
calls (the generation prompt's head, the end of the turn)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolweave.errors import CallFormatError
from toolweave.formats.detect_text import TAG_END, TAGS
from toolweave.formats.syntax import CALL_ID, default_call_id
from toolweave.toolspec import ToolCall, ToolSpec

__all__ = ["PROBE_CALLS", "PROBE_TOOLS", "after_prompt", "drop_end", "render_probe", "turn_end"]

#: The calls rendered through a template to read its syntax.
PROBE_CALLS: tuple[ToolCall, ToolCall] = (
    ToolCall("get_weather", {"city": "Paris", "days": 3}),
    ToolCall("get_time", {"zone": "UTC"}),
)

PROBE_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec.from_dict(
        {
            "name": "get_weather",
            "description": "Weather forecast for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name."},
                    "days": {"type": "integer", "description": "Days ahead."},
                },
                "required": ["city"],
            },
        }
    ),
    ToolSpec.from_dict(
        {
            "name": "get_time",
            "description": "Current time in a time zone.",
            "parameters": {
                "type": "object",
                "properties": {"zone": {"type": "string", "description": "Time zone."}},
                "required": ["zone"],
            },
        }
    ),
)

_QUESTION = "What is the weather in Paris?"
#: Longest error text quoted from a template.
_MAX_REASON = 160


def render_probe(
    template: str, calls: Sequence[ToolCall] | None, as_string: bool, content: str | None
) -> str:
    """The probe conversation: the question, then an answer with ``calls`` (with None,
    no answer but the generation prompt)."""
    from toolweave.prompting.chat_template import assistant_calls_message

    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message = assistant_calls_message(calls, arguments_as_string=as_string)
        message["content"] = content
    messages = [{"role": "user", "content": _QUESTION}]
    if calls is not None:
        messages.append(message)
    try:
        text = _probe_render(template, messages, add_generation_prompt=calls is None)
    except Exception as exc:  # a template is arbitrary code: any failure is a refusal
        message_text = " ".join(str(exc).split())[:_MAX_REASON]
        raise CallFormatError(
            f"the template failed to render calls: {type(exc).__name__}: {message_text}"
        ) from None
    for i in range(len(PROBE_CALLS)):
        text = text.replace(default_call_id(i), CALL_ID)
    return text


def _probe_render(
    template: str, messages: list[dict[str, Any]], *, add_generation_prompt: bool
) -> str:
    """`messages` rendered as every probe renders them: with the probe tools and
    placeholder BOS/EOS text. Raises whatever the template raises."""
    from toolweave.prompting.chat_template import render_chat

    return render_chat(
        template,
        messages,
        tools=PROBE_TOOLS,
        bos_token="<s>",
        eos_token="</s>",
        add_generation_prompt=add_generation_prompt,
    )


def after_prompt(added: str, prompt: str) -> str:
    """`added` without a head the generation prompt already wrote (the assistant
    header of a template that writes it only for messages with calls)."""
    at = prompt.rfind(_QUESTION)
    tail = prompt[at + len(_QUESTION) :] if at >= 0 else prompt[-len(added) :]
    for k in range(len(added), 0, -1):
        head = added[:k]
        if not (head[-1] in TAG_END + "\n" and head.strip()):
            continue
        at = tail.rfind(head.rstrip())
        if at >= 0 and not TAGS.sub("", tail[at + len(head.rstrip()) :]).strip():
            return added[k:].strip()
    return added


def turn_end(template: str, content: str | None) -> str:
    """The tag that ends a plain assistant answer (``<|im_end|>``, ``<seed:eos>``)."""
    answer = "Sunny all week."
    messages = [
        {"role": "user", "content": _QUESTION},
        {"role": "assistant", "content": answer},
    ]
    try:
        text = _probe_render(template, messages, add_generation_prompt=False)
    except Exception:  # the calls rendered; a plain answer failing only loses the trim
        return ""
    found = TAGS.match(text[text.rfind(answer) + len(answer) :].lstrip())
    return found.group() if found else ""


def drop_end(text: str, end_tag: str) -> str:
    """`text` without the end of the turn the template writes after any answer."""
    if end_tag and text.endswith(end_tag):
        return text[: -len(end_tag)].rstrip()
    return text
