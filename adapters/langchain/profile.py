"""The `ModelProfile` of a `ChatToolweave`: what LangChain reads to size summaries
(``max_input_tokens``) and to pick ``create_agent``'s structured-output strategy."""

from __future__ import annotations

from langchain_core.language_models import ModelProfile

__all__ = ["model_profile"]


def model_profile(n_ctx: int, max_tokens: int) -> ModelProfile:
    """A text-only local model with a context window of `n_ctx` tokens and answers of
    at most `max_tokens`: tool calls (forced ones too, streamed as chunks) and JSON
    under a schema are decoded under a grammar; sampling is greedy only."""
    return ModelProfile(
        max_input_tokens=n_ctx,
        max_output_tokens=max_tokens,
        open_weights=True,
        text_inputs=True,
        image_inputs=False,
        image_url_inputs=False,
        pdf_inputs=False,
        audio_inputs=False,
        video_inputs=False,
        image_tool_message=False,
        pdf_tool_message=False,
        text_outputs=True,
        image_outputs=False,
        audio_outputs=False,
        video_outputs=False,
        reasoning_output=False,
        tool_calling=True,
        tool_choice=True,
        tool_call_streaming=True,
        structured_output=True,
        temperature=False,
    )
