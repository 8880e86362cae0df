"""The ``openai:URL`` model spec: a remote OpenAI-compatible server instead of a GGUF.

    parse_remote_spec("openai:http://127.0.0.1:8000/v1").base_url
    # 'http://127.0.0.1:8000/v1'

The URL is the server's OpenAI base URL (vLLM, SGLang, llama.cpp's server, `toolweave
serve`): http or https, a host, an optional port and path, nothing else. An empty path
means ``/v1``; a trailing slash is dropped. Credentials in the URL, a query, a fragment,
whitespace or control characters are refused (a key goes in ``--api-key``), so the URL
can be shown in messages without leaking anything.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from toolweave.errors import ToolweaveError

__all__ = [
    "API_KEY_ENVS",
    "NO_KEY",
    "PREFIX",
    "RemoteModelError",
    "RemoteSpec",
    "RemoteSpecError",
    "is_remote_spec",
    "parse_remote_spec",
    "resolve_api_key",
]

#: What starts a remote model spec.
PREFIX = "openai:"
#: Environment variables read for the API key, the first one set wins.
API_KEY_ENVS = ("TOOLWEAVE_API_KEY", "OPENAI_API_KEY")
#: Sent when no key is given: OpenAI's client needs one, keyless servers ignore it.
NO_KEY = "EMPTY"
#: Longest spec accepted.
MAX_SPEC_CHARS = 2048
_EXAMPLE = "openai:http://127.0.0.1:8000/v1"
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class RemoteSpecError(ToolweaveError, ValueError):
    """An ``openai:`` model spec that is not a usable base URL."""


class RemoteModelError(ToolweaveError):
    """The remote model server cannot be reached, refused the request or broke protocol."""


@dataclass(frozen=True)
class RemoteSpec:
    """A parsed ``openai:`` spec: the server's OpenAI base URL (``.../v1``)."""

    base_url: str

    @property
    def models_url(self) -> str:
        """``GET`` this for the served model ids."""
        return f"{self.base_url}/models"


def is_remote_spec(model: str | None) -> bool:
    """True when `model` names a remote server (starts with ``openai:``)."""
    return model is not None and model.strip().lower().startswith(PREFIX)


def parse_remote_spec(spec: str) -> RemoteSpec:
    """The `RemoteSpec` of ``openai:URL``; `RemoteSpecError` says what is wrong."""
    if not isinstance(spec, str):
        raise RemoteSpecError(f"a remote model spec is a string like {_EXAMPLE}")
    text = spec.strip()
    if len(text) > MAX_SPEC_CHARS:
        raise RemoteSpecError(f"the remote model spec is longer than {MAX_SPEC_CHARS} characters")
    if not text.lower().startswith(PREFIX):
        raise RemoteSpecError(f"a remote model spec starts with '{PREFIX}', e.g. {_EXAMPLE}")
    url = text[len(PREFIX) :]
    if not url:
        raise RemoteSpecError(f"'{PREFIX}' needs the server's base URL, e.g. {_EXAMPLE}")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise RemoteSpecError("the remote model URL holds whitespace or control characters")
    if not _SCHEME.match(url):
        raise RemoteSpecError(
            f"the remote model URL {url!r} has no scheme: write {PREFIX}http://{url}"
        )
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise RemoteSpecError(
            f"the remote model URL must be http or https, not {parts.scheme!r} ({_EXAMPLE})"
        )
    if parts.username is not None or parts.password is not None:
        raise RemoteSpecError(
            "the remote model URL holds credentials: give the key with --api-key "
            f"or {API_KEY_ENVS[0]} instead"
        )
    if not parts.hostname:
        raise RemoteSpecError(f"the remote model URL {url!r} has no host")
    try:
        port = parts.port
    except ValueError:
        raise RemoteSpecError(f"the remote model URL {url!r} has an invalid port") from None
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise RemoteSpecError("the remote model URL is a base URL: no query or fragment")
    host = parts.hostname
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    path = parts.path.rstrip("/") or "/v1"
    netloc = host if port is None else f"{host}:{port}"
    return RemoteSpec(f"{scheme}://{netloc}{path}")


def resolve_api_key(api_key: str | None = None) -> str | None:
    """`api_key`, else the first of `API_KEY_ENVS` that is set and not empty, else None."""
    if api_key:
        return api_key
    for name in API_KEY_ENVS:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None
