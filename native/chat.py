"""Chat prompts on an engine: the model's own chat template with its BOS and EOS text."""

from __future__ import annotations

from collections.abc import Sequence

from toolweave.native.engine import Engine
from toolweave.prompting.chat_template import Message, render_chat

__all__ = ["chat_text", "chat_tokens"]


def chat_text(
    engine: Engine, messages: Sequence[Message], *, add_generation_prompt: bool = True
) -> str:
    """`messages` rendered with the engine's chat template (ChatML when it has none)."""
    return render_chat(
        engine.chat_template,
        messages,
        bos_token=engine.detokenize([engine.bos_token]) if engine.bos_token >= 0 else "",
        eos_token=engine.detokenize([engine.eos_token]),
        add_generation_prompt=add_generation_prompt,
    )


def chat_tokens(
    engine: Engine, messages: Sequence[Message], *, add_generation_prompt: bool = True
) -> list[int]:
    """The tokens of `chat_text`."""
    return engine.tokenize(chat_text(engine, messages, add_generation_prompt=add_generation_prompt))
