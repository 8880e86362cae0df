"""Chat prompts on an engine: the model's own chat template with its BOS and EOS text.

Only the template's own control tokens are parsed as such: the text of every message
(requests, tool descriptions, arguments, tool results, examples) is tokenized as plain
text, so a message holding ``<|im_end|>`` cannot end its turn
(`toolweave.prompting.chat_template.render_chat_parts`). A prompt whose messages hold no
control string gives exactly the tokens of its whole text with special tokens parsed.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import llama_cpp

from toolweave.native.engine import Engine
from toolweave.prompting.chat_template import Message, RenderedChat, render_chat_parts
from toolweave.prompting.control_text import ControlStrings
from toolweave.toolspec import ToolSpec

__all__ = [
    "chat_parts",
    "chat_text",
    "chat_tokens",
    "control_strings",
    "control_token_ids",
    "parts_tokens",
    "text_tokens",
]

#: Token attributes llama.cpp parses only when asked to parse special tokens.
_CONTROL = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN

_controls: weakref.WeakKeyDictionary[Engine, tuple[frozenset[int], ControlStrings]] = (
    weakref.WeakKeyDictionary()
)


def _vocab_controls(engine: Engine) -> tuple[frozenset[int], ControlStrings]:
    got = _controls.get(engine)
    if got is None:
        ids: list[int] = []
        lstrip: list[str] = []
        rstrip: list[str] = []
        texts: list[str] = []
        for token in range(engine.n_vocab):
            attr = int(llama_cpp.llama_vocab_get_attr(engine.vocab, token))
            if not attr & _CONTROL:
                continue
            ids.append(token)
            text = engine.token_bytes(token).decode("utf-8", errors="replace")
            texts.append(text)
            if attr & llama_cpp.LLAMA_TOKEN_ATTR_LSTRIP:
                lstrip.append(text)
            if attr & llama_cpp.LLAMA_TOKEN_ATTR_RSTRIP:
                rstrip.append(text)
        got = frozenset(ids), ControlStrings(texts, lstrip=lstrip, rstrip=rstrip)
        _controls[engine] = got
    return got


def control_token_ids(engine: Engine) -> frozenset[int]:
    """The engine's control tokens (and its unknown token): the ids plain text never gives."""
    return _vocab_controls(engine)[0]


def control_strings(engine: Engine) -> ControlStrings:
    """The texts of the engine's control tokens (read from the vocabulary once per engine)."""
    return _vocab_controls(engine)[1]


def chat_parts(
    engine: Engine,
    messages: Sequence[Message],
    *,
    add_generation_prompt: bool = True,
    template: str | None = None,
    tools: Sequence[ToolSpec] | None = None,
) -> RenderedChat:
    """`messages` rendered with `template` (None: the engine's chat template, ChatML when
    it has none), cut into the template's control tokens and the messages' plain text;
    `tools` become the template's ``tools`` variable."""
    return render_chat_parts(
        template if template is not None else engine.chat_template,
        messages,
        control_strings(engine),
        tools=tools,
        bos_token=engine.detokenize([engine.bos_token]) if engine.bos_token >= 0 else "",
        eos_token=engine.detokenize([engine.eos_token]),
        add_generation_prompt=add_generation_prompt,
    )


def chat_text(
    engine: Engine,
    messages: Sequence[Message],
    *,
    add_generation_prompt: bool = True,
    template: str | None = None,
    tools: Sequence[ToolSpec] | None = None,
) -> str:
    """The prompt text of `messages` (what `chat_tokens` tokenizes)."""
    return chat_parts(
        engine,
        messages,
        add_generation_prompt=add_generation_prompt,
        template=template,
        tools=tools,
    ).text


def text_tokens(engine: Engine, text: str) -> list[int]:
    """`text` as plain text: control-token strings in it stay text."""
    return engine.tokenize(text, parse_special=False)


def parts_tokens(engine: Engine, rendered: RenderedChat) -> list[int]:
    """The tokens of a rendered prompt: control parts as control tokens, the rest as text.

    With nothing escaped the whole text is tokenized at once, which gives the same ids
    (llama.cpp cuts a text at its control strings the same way), exactly as before."""
    if not rendered.escaped:
        return engine.tokenize(rendered.text)
    tokens: list[int] = []
    for part in rendered.parts:
        tokens += engine.tokenize(part.text, parse_special=part.control)
    return tokens


def chat_tokens(
    engine: Engine,
    messages: Sequence[Message],
    *,
    add_generation_prompt: bool = True,
    template: str | None = None,
    tools: Sequence[ToolSpec] | None = None,
) -> list[int]:
    """The tokens of `messages` rendered with `template` (None: the engine's); only the
    template's own control tokens are parsed, every message's text stays text."""
    rendered = chat_parts(
        engine,
        messages,
        add_generation_prompt=add_generation_prompt,
        template=template,
        tools=tools,
    )
    return parts_tokens(engine, rendered)
