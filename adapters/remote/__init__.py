"""Remote engines: toolweave's agents on an OpenAI-compatible server (vLLM, SGLang,
llama.cpp's server, `toolweave serve`) instead of the in-process engine.

    from toolweave.adapters.remote import remote_chat_model

    chat = remote_chat_model("openai:http://127.0.0.1:8000/v1")

`toolweave run --model openai:URL` runs both of its agents this way (docs/remote.md).
"""

from toolweave.adapters.remote.chat import list_models, remote_chat_model, remote_errors
from toolweave.adapters.remote.spec import (
    RemoteModelError,
    RemoteSpec,
    RemoteSpecError,
    is_remote_spec,
    parse_remote_spec,
    resolve_api_key,
)

__all__ = [
    "RemoteModelError",
    "RemoteSpec",
    "RemoteSpecError",
    "is_remote_spec",
    "list_models",
    "parse_remote_spec",
    "remote_chat_model",
    "remote_errors",
    "resolve_api_key",
]
