"""Tool-calling prompts: the tool list and call instructions, rendered with the model's
own chat template (Jinja, sandboxed). Every decoding mode gets the same prompt text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from jinja2.sandbox import ImmutableSandboxedEnvironment

from toolweave.errors import ToolweaveError
from toolweave.formats import CallFormat
from toolweave.toolspec import ToolCall, ToolSpec

__all__ = ["CHATML_TEMPLATE", "Message", "render_chat", "tool_messages", "tools_system_prompt"]

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
    tpl = _env.from_string(template or CHATML_TEMPLATE)
    return tpl.render(
        messages=list(messages),
        bos_token=bos_token,
        eos_token=eos_token,
        add_generation_prompt=add_generation_prompt,
    )
