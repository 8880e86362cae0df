"""A chat template given by the user: read it, and check that it renders a chat.

A template overriding the one in a GGUF file (`Engine(chat_template=...)`,
``toolweave run --chat-template FILE``) is checked before any model is loaded: it must
be a Jinja template that renders a two-message chat (system and user, or user and
assistant for templates that refuse a system role) into text holding the user's words.
"""

from __future__ import annotations

from pathlib import Path

import jinja2

from toolweave.errors import ToolweaveError
from toolweave.prompting.chat_template import render_chat

__all__ = ["MAX_TEMPLATE_BYTES", "ChatTemplateError", "check_chat_template", "load_chat_template"]

#: Largest template file read (the largest template llama.cpp ships is about 17 kB).
MAX_TEMPLATE_BYTES = 1 << 20

_PROBE = "toolweave template check"
_CHATS: tuple[tuple[dict[str, str], ...], ...] = (
    ({"role": "system", "content": "Be brief."}, {"role": "user", "content": _PROBE}),
    ({"role": "user", "content": _PROBE}, {"role": "assistant", "content": "Done."}),
)


class ChatTemplateError(ToolweaveError, ValueError):
    """A chat template cannot be read, compiled, or does not render a chat."""


def check_chat_template(text: str, *, source: str = "the chat template") -> str:
    """Return `text` if it renders a two-message chat; else raise `ChatTemplateError`."""
    if not text.strip():
        raise ChatTemplateError(f"{source} is empty")
    problems: list[str] = []
    for chat in _CHATS:
        try:
            rendered = render_chat(text, chat, bos_token="", eos_token="")
        except jinja2.TemplateSyntaxError as exc:
            raise ChatTemplateError(
                f"{source} is not a Jinja template: {exc.message} (line {exc.lineno})"
            ) from None
        except (jinja2.TemplateError, ToolweaveError, TypeError, ValueError) as exc:
            problems.append(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            continue
        if _PROBE in rendered:
            return text
        problems.append("the output does not hold the user's message")
    raise ChatTemplateError(f"{source} does not render a two-message chat: {problems[0]}")


def load_chat_template(path: str | Path) -> str:
    """The text of the chat template file `path`, checked by `check_chat_template`."""
    file = Path(path).expanduser()
    try:
        with file.open("rb") as fh:
            data = fh.read(MAX_TEMPLATE_BYTES + 1)
    except OSError as exc:
        raise ChatTemplateError(
            f"cannot read the chat template {file}: {exc.strerror or exc}"
        ) from None
    if len(data) > MAX_TEMPLATE_BYTES:
        raise ChatTemplateError(
            f"the chat template {file} is over {MAX_TEMPLATE_BYTES} bytes: not a template"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ChatTemplateError(f"the chat template {file} is not UTF-8 text") from None
    return check_chat_template(text, source=f"the chat template {file}")
