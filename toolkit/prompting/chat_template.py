"""Tool-calling prompts: the tool list and call instructions, rendered with the model's
own chat template (Jinja, sandboxed). Every decoding mode gets the same prompt text.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jinja2 import Template
from jinja2.sandbox import ImmutableSandboxedEnvironment

from toolweave.errors import ToolweaveError
from toolweave.formats import CallFormat
from toolweave.prompting.control_text import ControlStrings, Escaper, PromptPart, strings_in
from toolweave.toolspec import ToolCall, ToolSpec

__all__ = [
    "CHATML_TEMPLATE",
    "Message",
    "RenderedChat",
    "render_chat",
    "render_chat_parts",
    "tool_messages",
    "tools_system_prompt",
]

Message = Mapping[str, Any]

#: Used when a GGUF carries no chat template.
CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)


def _raise(message: str) -> None:
    raise ToolweaveError(f"chat template: {message}")


_env.globals["raise_exception"] = _raise


@functools.lru_cache(maxsize=16)
def _compiled(template: str) -> Template:
    """A template compiled once (a model has one; compiling costs more than rendering)."""
    return _env.from_string(template)


def tools_system_prompt(tools: Sequence[ToolSpec], fmt: CallFormat) -> str:
    """The system prompt listing the tools and showing the call format."""
    listing = "\n".join(
        json.dumps(t.to_dict(), ensure_ascii=False, separators=(",", ":")) for t in tools
    )
    example = fmt.serialize_call(ToolCall("function_name", {"argument": "value"}))
    return (
        "You are a function calling AI model. You are given these tools:\n"
        f"<tools>\n{listing}\n</tools>\n"
        "Answer the user's request by calling the right tool with arguments taken from the "
        "request. Write each call exactly like this:\n"
        f"{example}"
    )


def tool_messages(
    tools: Sequence[ToolSpec],
    fmt: CallFormat,
    request: str | Sequence[Message],
    *,
    system: str | None = None,
) -> list[dict[str, Any]]:
    """System prompt plus the user's request (or a whole conversation)."""
    sys_text = tools_system_prompt(tools, fmt)
    if system:
        sys_text = f"{system}\n\n{sys_text}"
    msgs: list[dict[str, Any]] = [{"role": "system", "content": sys_text}]
    if isinstance(request, str):
        msgs.append({"role": "user", "content": request})
    else:
        msgs.extend(dict(m) for m in request)
    return msgs


def render_chat(
    template: str | None,
    messages: Sequence[Message],
    *,
    bos_token: str = "",
    eos_token: str = "",
    add_generation_prompt: bool = True,
) -> str:
    """Render `messages` with a chat template (ChatML when the model has none)."""
    tpl = _compiled(template or CHATML_TEMPLATE)
    return tpl.render(
        messages=list(messages),
        bos_token=bos_token,
        eos_token=eos_token,
        add_generation_prompt=add_generation_prompt,
    )


@dataclass(frozen=True)
class RenderedChat:
    """A rendered prompt cut into the control tokens its template wrote and plain text.

    ``escaped`` counts the control strings (whole or partial, at an edge) found in the
    messages: with none, ``text`` is `render_chat`'s text and a tokenizer parsing special
    tokens gives the same tokens as the parts; otherwise only the ``control`` parts may
    become control tokens and the rest must be tokenized as plain text.
    """

    text: str
    parts: tuple[PromptPart, ...]
    escaped: int = 0


def render_chat_parts(
    template: str | None,
    messages: Sequence[Message],
    controls: ControlStrings,
    *,
    bos_token: str = "",
    eos_token: str = "",
    add_generation_prompt: bool = True,
) -> RenderedChat:
    """Render `messages` keeping their text apart from the template's control tokens.

    Every string in the messages (contents, names, arguments) is untrusted: its control
    strings are replaced by placeholders for the render and put back in the text parts
    only (`toolweave.prompting.control_text`). When the template changed the text so
    that the placeholders did not come back as the plain render's text (it escaped,
    cased or cut it), the plain render is used if it holds the same control strings as
    the escaped one (the change removed the messages' control strings), else the
    escaped render with its text put back where it can be: a control string of a
    message may then be lost, but it never becomes a control token.
    """
    extra = [template or CHATML_TEMPLATE, bos_token, eos_token]
    escaper = Escaper(controls, [*strings_in(list(messages)), *extra])
    safe = [escaper.escape(m) for m in messages]

    def render(msgs: Sequence[Message]) -> str:
        return render_chat(
            template,
            msgs,
            bos_token=bos_token,
            eos_token=eos_token,
            add_generation_prompt=add_generation_prompt,
        )

    rendered = render(safe)
    parts = tuple(
        part if part.control else PromptPart(escaper.restore(part.text))
        for part in controls.split(rendered)
    )
    text = escaper.restore(rendered)
    if escaper.escaped:
        plain = render(messages)
        if plain != text:
            plain_parts = tuple(controls.split(plain))
            if _controls_of(plain_parts) == _controls_of(parts):
                text, parts = plain, plain_parts
    return RenderedChat(text, parts, escaper.escaped)


def _controls_of(parts: Sequence[PromptPart]) -> list[str]:
    return [part.text for part in parts if part.control]
