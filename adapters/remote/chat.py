"""A LangChain chat model on a remote OpenAI-compatible server.

    chat = remote_chat_model("openai:http://127.0.0.1:8000/v1")  # first listed model
    agent = PlanOutAgent(chat, hub.tools)

`remote_chat_model` parses the spec, asks the server for its models (``GET /models``,
which also checks that it is reachable and takes the key) and returns LangChain's
``ChatOpenAI`` on it: temperature 0, bounded connect and read timeouts, few retries.
Everything the server sends is untrusted: the listing is read up to
`MAX_LISTING_BYTES` within the timeout and checked, and `remote_errors` turns the
client's errors into one-line `RemoteModelError`s that never show the key.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import httpx

from toolweave.adapters.remote.spec import (
    API_KEY_ENVS,
    NO_KEY,
    RemoteModelError,
    RemoteSpec,
    parse_remote_spec,
    resolve_api_key,
)

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

__all__ = [
    "CONNECT_TIMEOUT_S",
    "MAX_LISTING_BYTES",
    "READ_TIMEOUT_S",
    "list_models",
    "remote_chat_model",
    "remote_errors",
]

#: Seconds to open a connection to the server.
CONNECT_TIMEOUT_S = 5.0
#: Seconds to wait for the next bytes of an answer (a streamed reply: its next chunk).
READ_TIMEOUT_S = 120.0
#: Seconds the model listing may take in all.
LISTING_TIMEOUT_S = 15.0
#: Largest model listing read.
MAX_LISTING_BYTES = 1 << 20
#: Longest piece of a server's error message quoted.
MAX_QUOTED = 300


def remote_chat_model(
    spec: str,
    *,
    model: str | None = None,
    api_key: str | None = None,
    timeout: float = READ_TIMEOUT_S,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    max_retries: int = 1,
    max_tokens: int | None = None,
    check: bool = True,
    temperature: float = 0.0,
    top_p: float | None = None,
    top_k: int | None = None,
    seed: int | None = None,
) -> BaseChatModel:
    """``ChatOpenAI`` on the server of `spec` (``openai:URL``).

    Greedy by default (temperature 0); `temperature`, `top_p` and `seed` are sent as
    OpenAI's parameters, `top_k` in the request body as an extension (``toolweave
    serve`` and llama.cpp's server read it).

    `model` None takes the first id the server lists; `api_key` None reads
    `API_KEY_ENVS`. `check` False skips the listing when `model` is given (nothing is
    sent before the first call). Raises `RemoteSpecError` for a bad spec and
    `RemoteModelError` when the server cannot be reached, refuses the key or lists
    no model.
    """
    if timeout <= 0 or connect_timeout <= 0:
        raise ValueError("the remote model's timeouts must be positive")
    if not 0 <= max_retries <= 5:
        raise ValueError("max_retries must be between 0 and 5")
    parsed = parse_remote_spec(spec)
    key = resolve_api_key(api_key)
    if model is not None and not model.strip():
        raise ValueError("the remote model name is empty")
    if model is None or check:
        ids = list_models(parsed, api_key=key, connect_timeout=connect_timeout, need=model is None)
        if model is None:
            model = ids[0]
    try:
        from langchain_openai import ChatOpenAI
        from openai import Timeout  # the HTTP client's own (httpx, or httpx2 in openai 3.x)
    except ImportError:
        raise RemoteModelError(
            "a remote model needs langchain-openai: pip install langchain-openai"
        ) from None
    options: dict[str, Any] = {} if max_tokens is None else {"max_tokens": max_tokens}
    if top_p is not None:
        options["top_p"] = top_p
    if seed is not None:
        options["seed"] = seed
    if top_k:
        options["extra_body"] = {"top_k": top_k}
    return ChatOpenAI(
        model=model,
        base_url=parsed.base_url,
        api_key=key or NO_KEY,
        temperature=temperature,
        timeout=Timeout(timeout, connect=connect_timeout),
        max_retries=max_retries,
        use_responses_api=False,
        **options,
    )


def list_models(
    spec: RemoteSpec | str,
    *,
    api_key: str | None = None,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    timeout: float = LISTING_TIMEOUT_S,
    need: bool = True,
) -> list[str]:
    """The model ids the server lists (``GET {base}/models``).

    With `need` False any answer but a refused key counts (a server without the
    listing is still reachable) and the result may be empty."""
    parsed = parse_remote_spec(spec) if isinstance(spec, str) else spec
    where = f"the model server at {parsed.base_url}"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    deadline = time.monotonic() + connect_timeout + timeout
    try:
        limits = httpx.Timeout(timeout, connect=connect_timeout)
        with (
            httpx.Client(timeout=limits, follow_redirects=False) as client,
            client.stream("GET", parsed.models_url, headers=headers) as response,
        ):
            status = response.status_code
            body = _read_bounded(response, deadline, where)
    except httpx.TimeoutException:
        raise RemoteModelError(f"{where} did not answer within {timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise RemoteModelError(f"cannot reach {where}: {_reason(exc)}") from None
    if status in (401, 403):
        raise RemoteModelError(
            f"{where} refused the API key (HTTP {status}): give one with --api-key "
            f"or {' / '.join(API_KEY_ENVS)}"
        )
    if status != 200:
        if not need:
            return []
        raise RemoteModelError(
            f"{where} answered HTTP {status} to GET /models: name the model with --remote-model"
        )
    ids = _model_ids(body)
    if ids is None and need:
        raise RemoteModelError(f"{where} sent a model listing that is not OpenAI's")
    if not ids and need:
        raise RemoteModelError(f"{where} lists no model: name one with --remote-model")
    return ids or []


@contextmanager
def remote_errors(base_url: str) -> Iterator[None]:
    """Turn the OpenAI client's errors raised inside into one-line `RemoteModelError`s."""
    try:
        yield
    except Exception as exc:
        found = _client_error(exc)
        if found is None:
            raise
        raise RemoteModelError(describe_error(found, base_url)) from None


def describe_error(exc: BaseException, base_url: str) -> str:
    """One line for an error of the OpenAI client (or httpx) talking to `base_url`."""
    import openai

    where = f"the model server at {base_url}"
    if isinstance(exc, openai.APITimeoutError | httpx.TimeoutException):
        return f"{where} did not answer in time (a longer wait: --remote-timeout SECONDS)"
    if isinstance(exc, openai.APIConnectionError):
        return f"lost the connection to {where}: {_reason(exc.__cause__ or exc)}"
    if isinstance(exc, openai.APIStatusError):
        message = _quote(_status_message(exc))
        hint = " (check --api-key)" if exc.status_code in (401, 403) else ""
        return f"{where} answered HTTP {exc.status_code}{hint}: {message}"
    return f"{where} failed: {_quote(str(exc) or type(exc).__name__)}"


# ---------------------------------------------------------------------- helpers
def _read_bounded(response: httpx.Response, deadline: float, where: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > MAX_LISTING_BYTES:
            raise RemoteModelError(f"{where} sent a model listing over {MAX_LISTING_BYTES} bytes")
        if time.monotonic() > deadline:
            raise httpx.ReadTimeout("the listing took too long")
        chunks.append(chunk)
    return b"".join(chunks)


def _model_ids(body: bytes) -> list[str] | None:
    """The ids of an OpenAI listing ``{"data": [{"id": ...}, ...]}``; None if not one."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list):
        return None
    ids = [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
    return [i for i in ids if i.strip() and len(i) <= 512]


def _client_error(exc: BaseException) -> BaseException | None:
    """The OpenAI client's (or httpx's) error in `exc`, its groups or its causes."""
    import openai

    kinds: tuple[type[BaseException], ...] = (openai.APIError, httpx.HTTPError)
    try:  # openai 3.x speaks httpx2
        import httpx2

        kinds += (httpx2.HTTPError,)
    except ImportError:  # pragma: no cover - older openai without httpx2
        pass
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, kinds):
            return e
        if isinstance(e, BaseExceptionGroup):
            todo.extend(e.exceptions)
        todo.extend(x for x in (e.__cause__, e.__context__) if x is not None)
    return None


def _status_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(body.get("message"), str):
            return str(body["message"])
    return str(getattr(exc, "message", "") or exc)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    if "refused" in text.lower():
        return "connection refused (is the server running?)"
    return _quote(text or type(exc).__name__)


def _quote(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_QUOTED else line[:MAX_QUOTED] + "..."
