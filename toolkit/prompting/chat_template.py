"""Tool-calling prompts: the tool list and call instructions, rendered with the model's
own chat template (Jinja, sandboxed). Every decoding mode gets the same prompt text.

A template that supports tools gets them as its ``tools`` variable (OpenAI function
shape, `openai_tools`), an assistant's calls as ``tool_calls`` (`assistant_calls_message`)
and results as ``tool`` messages (`tool_result_message`). The environment matches the
one chat templates are written for: ``tojson`` keeps key order and unicode and takes
``indent``, ``{% break %}``/``{% continue %}`` and ``{% generation %}`` work, and
``strftime_now`` and ``raise_exception`` are defined.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import re
import string
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jinja2 import Template, nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment

from toolweave.errors import ToolweaveError
from toolweave.formats.base import CallFormat
from toolweave.formats.syntax import default_call_id
from toolweave.prompting.control_text import ControlStrings, Escaper, PromptPart, strings_in
from toolweave.prompting.tool_listing import listed_parameters, listed_tool
from toolweave.toolspec import ToolCall, ToolSpec

__all__ = [
    "CHATML_TEMPLATE",
    "Message",
    "RenderedChat",
    "assistant_calls_message",
    "default_call_id",
    "openai_tool_calls",
    "openai_tools",
    "render_chat",
    "render_chat_parts",
    "template_call_id",
    "template_renders_tools",
    "template_tool_messages",
    "tool_messages",
    "tool_result_message",
    "tools_system_prompt",
]

Message = Mapping[str, Any]

#: Used when a GGUF carries no chat template.
CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class _Generation(Extension):
    """``{% generation %}...{% endgeneration %}`` (marks the assistant's own text in
    training templates): renders its body unchanged."""

    tags = {"generation"}  # noqa: RUF012 - jinja2's interface

    def parse(self, parser: Parser) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


_env = ImmutableSandboxedEnvironment(
    trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, _Generation]
)


def _raise(message: str) -> None:
    raise ToolweaveError(f"chat template: {message}")


def _tojson(
    value: Any,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
    ensure_ascii: bool = False,
) -> str:
    """JSON as chat templates expect it: key order and unicode kept, nothing escaped."""

    def plain(item: Any) -> Any:
        if isinstance(item, Mapping):
            return {k: plain(v) for k, v in item.items()}
        if isinstance(item, (list, tuple, Iterator)):
            return [plain(v) for v in item]
        return item

    return json.dumps(
        plain(value),
        indent=indent,
        separators=separators,
        sort_keys=sort_keys,
        ensure_ascii=ensure_ascii,
    )


def _strftime_now(fmt: str) -> str:
    return datetime.datetime.now().strftime(fmt)


_env.globals["raise_exception"] = _raise
_env.globals["strftime_now"] = _strftime_now
_env.filters["tojson"] = _tojson


@functools.lru_cache(maxsize=16)
def _compiled(template: str) -> Template:
    """A template compiled once (a model has one; compiling costs more than rendering)."""
    return _env.from_string(template)


def tools_system_prompt(tools: Sequence[ToolSpec], fmt: CallFormat) -> str:
    """The system prompt listing the tools and showing the call format."""
    listing = "\n".join(
        json.dumps(listed_tool(t), ensure_ascii=False, separators=(",", ":")) for t in tools
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
    return template_tool_messages(request, system=sys_text)


#: The tool a template is asked to list when checking whether it renders its ``tools``.
_PROBE_TOOL = ToolSpec.from_dict(
    {
        "name": "toolweave_probe_tool",
        "description": "Probe tool.",
        "parameters": {"type": "object", "properties": {"probe_argument": {"type": "string"}}},
    }
)


@functools.lru_cache(maxsize=32)
def template_renders_tools(template: str | None) -> bool:
    """Whether `template` lists the tools it is given in its ``tools`` variable (name and
    arguments in the prompt); a template that fails to render them does not."""
    if template is None:
        return False
    msgs = [{"role": "user", "content": "hello"}]
    try:
        text = render_chat(template, msgs, tools=[_PROBE_TOOL])
    except Exception:  # a template that breaks on tools does not take them
        return False
    return "toolweave_probe_tool" in text and "probe_argument" in text


def template_tool_messages(
    request: str | Sequence[Message], *, system: str | None = None
) -> list[dict[str, Any]]:
    """The request (or conversation) for a template that lists the tools itself: the
    user's own system prompt, if any, and no tool prompt of toolweave's."""
    msgs: list[dict[str, Any]] = []
    if system:
        msgs.append({"role": "system", "content": system})
    if isinstance(request, str):
        msgs.append({"role": "user", "content": request})
    else:
        msgs.extend(dict(m) for m in request)
    return msgs


def openai_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tools in the OpenAI function shape templates read from their ``tools`` variable."""
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": json.loads(json.dumps(listed_parameters(t.parameters))),
            },
        }
        for t in tools
    ]


def openai_tool_calls(
    calls: Sequence[ToolCall],
    *,
    ids: Sequence[str] | None = None,
    arguments_as_string: bool = False,
) -> list[dict[str, Any]]:
    """Calls in the OpenAI shape of an assistant message's ``tool_calls``; arguments as a
    dict, or as a JSON string for templates that want one."""
    out: list[dict[str, Any]] = []
    for i, call in enumerate(calls):
        args = json.loads(json.dumps(dict(call.arguments)))
        out.append(
            {
                "id": template_call_id(ids[i]) if ids is not None else default_call_id(i),
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": json.dumps(args, ensure_ascii=False)
                    if arguments_as_string
                    else args,
                },
            }
        )
    return out


def assistant_calls_message(
    calls: Sequence[ToolCall],
    content: str = "",
    *,
    ids: Sequence[str] | None = None,
    arguments_as_string: bool = False,
) -> dict[str, Any]:
    """An assistant message that calls tools, for a template that renders ``tool_calls``."""
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": openai_tool_calls(calls, ids=ids, arguments_as_string=arguments_as_string),
    }


def tool_result_message(name: str, content: str, call_id: str) -> dict[str, Any]:
    """The ``tool`` message holding the result of the call ``call_id`` of tool ``name``
    (its id as `template_call_id` writes it, like the call's)."""
    return {
        "role": "tool",
        "tool_call_id": template_call_id(call_id),
        "name": name,
        "content": content,
    }


_TEMPLATE_ID = re.compile(r"[A-Za-z0-9]{9}")
_ID_LETTERS = string.ascii_letters + string.digits


def template_call_id(call_id: str) -> str:
    """A call id as chat templates get it: nine letters and digits, what Mistral's
    templates demand (they raise on any other id). An id of that shape is kept; any
    other becomes one derived from it, the same id always the same, so a call and its
    result still match and a history renders the same text on every turn."""
    if _TEMPLATE_ID.fullmatch(call_id):
        return call_id
    number = int.from_bytes(hashlib.sha256(call_id.encode("utf-8")).digest()[:8], "big")
    letters = []
    for _ in range(9):
        number, digit = divmod(number, len(_ID_LETTERS))
        letters.append(_ID_LETTERS[digit])
    return "".join(letters)


def render_chat(
    template: str | None,
    messages: Sequence[Message],
    *,
    tools: Sequence[ToolSpec] | Sequence[Mapping[str, Any]] | None = None,
    bos_token: str = "",
    eos_token: str = "",
    add_generation_prompt: bool = True,
) -> str:
    """Render `messages` with a chat template (ChatML when the model has none).

    ``tools`` (`ToolSpec`s or OpenAI-shape dicts) become the template's ``tools``
    variable; without them the template sees none, as before.
    """
    tpl = _compiled(template or CHATML_TEMPLATE)
    extra: dict[str, Any] = {}
    if tools:
        extra["tools"] = _tool_dicts(tools)
    return tpl.render(
        messages=list(messages),
        bos_token=bos_token,
        eos_token=eos_token,
        add_generation_prompt=add_generation_prompt,
        **extra,
    )


def _tool_dicts(tools: Sequence[ToolSpec] | Sequence[Mapping[str, Any]]) -> list[Any]:
    specs = [t for t in tools if isinstance(t, ToolSpec)]
    dicts = [dict(t) for t in tools if not isinstance(t, ToolSpec)]
    if specs and dicts:
        raise ToolweaveError("chat template: tools must be all ToolSpecs or all dicts")
    return openai_tools(specs) if specs else dicts


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
    tools: Sequence[ToolSpec] | Sequence[Mapping[str, Any]] | None = None,
    bos_token: str = "",
    eos_token: str = "",
    add_generation_prompt: bool = True,
) -> RenderedChat:
    """Render `messages` keeping their text apart from the template's control tokens.

    Every string in the messages and the tools (contents, names, arguments,
    descriptions) is untrusted: its control strings are replaced by placeholders for
    the render and put back in the text parts only (`toolweave.prompting.control_text`).
    When the template changed the text so that the placeholders did not come back as
    the plain render's text (it escaped, cased or cut it), the plain render is used if
    it holds the same control strings as the escaped one (the change removed the
    messages' control strings), else the escaped render with its text put back where it
    can be: a control string of a message may then be lost, but it never becomes a
    control token.
    """
    extra = [template or CHATML_TEMPLATE, bos_token, eos_token]
    tool_dicts = _tool_dicts(tools) if tools else []
    escaper = Escaper(controls, [*strings_in(list(messages)), *strings_in(tool_dicts), *extra])
    safe = [escaper.escape(m) for m in messages]
    safe_tools = [escaper.escape(t) for t in tool_dicts]

    def render(msgs: Sequence[Message], tool_list: Sequence[Mapping[str, Any]]) -> str:
        return render_chat(
            template,
            msgs,
            tools=tool_list or None,
            bos_token=bos_token,
            eos_token=eos_token,
            add_generation_prompt=add_generation_prompt,
        )

    rendered = render(safe, safe_tools)
    parts = tuple(
        part if part.control else PromptPart(escaper.restore(part.text))
        for part in controls.split(rendered)
    )
    text = escaper.restore(rendered)
    if escaper.escaped:
        plain = render(messages, tool_dicts)
        if plain != text:
            plain_parts = tuple(controls.split(plain))
            if _controls_of(plain_parts) == _controls_of(parts):
                text, parts = plain, plain_parts
    return RenderedChat(text, parts, escaper.escaped)


def _controls_of(parts: Sequence[PromptPart]) -> list[str]:
    return [part.text for part in parts if part.control]
