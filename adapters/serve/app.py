"""The ASGI app: OpenAI's ``GET /v1/models`` and ``POST /v1/chat/completions``.

    app = create_app(Backend(), ServeConfig(api_key="secret"))
    uvicorn.run(app, host="127.0.0.1", port=8000)

Each request is authenticated (``Authorization: Bearer KEY`` when a key is set), its
body read up to `Limits.max_body_bytes`, validated (`protocol`), then queued for the
engine (`queue`). Decoding runs as its own task that holds the engine only while it
decodes and buffers its deltas (at most ``max_tokens`` of them), so a slow reader never
holds up the queue. If the client disconnects - while waiting or while decoding - the
task is cancelled and decoding stops at its next forward pass. A stream starts only
once the first delta is ready, so errors found at prefill (a prompt too long for the
context) still get their status code. Every error is OpenAI's
``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from toolweave.adapters.serve.backend import Backend
from toolweave.adapters.serve.protocol import (
    ApiError,
    ChatRequest,
    Limits,
    parse_chat_request,
    parse_json_body,
)
from toolweave.adapters.serve.queue import EngineQueue, QueueFullError, QueueTimeoutError
from toolweave.adapters.serve.responses import (
    Completion,
    Delta,
    Finish,
    ResponseIds,
    chunk,
    sse,
    usage_chunk,
)
from toolweave.errors import ContextFullError, DecodeCancelledError, ToolweaveError

__all__ = ["ServeConfig", "create_app"]

log = logging.getLogger("toolweave.serve")

#: Seconds a client is told to wait before retrying a full or timed-out queue.
RETRY_AFTER_S = 1


@dataclass(frozen=True)
class ServeConfig:
    """Server settings: the API key (None: no authentication), request limits and the
    engine queue's bounds."""

    api_key: str | None = None
    limits: Limits = field(default_factory=Limits)
    max_waiting: int = 32
    wait_timeout_s: float = 300.0


def create_app(backend: Backend, config: ServeConfig | None = None) -> Starlette:
    """The OpenAI-compatible app serving `backend`."""
    cfg = config or ServeConfig()
    server = _Server(backend, cfg)
    routes = [
        Route("/v1/models", server.models, methods=["GET"]),
        Route("/v1/models/{model:path}", server.model, methods=["GET"]),
        Route("/v1/chat/completions", server.chat_completions, methods=["POST"]),
        Route("/health", server.health, methods=["GET"]),
    ]
    return Starlette(routes=routes, exception_handlers={HTTPException: _http_error})


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    message = exc.detail if isinstance(exc, HTTPException) else "internal error"
    kind = "not_found_error" if status == 404 else "invalid_request_error"
    return _error(
        ApiError(f"{message}: {request.method} {request.url.path}", status=status, type=kind)
    )


def _error(err: ApiError) -> JSONResponse:
    headers = {"Retry-After": str(RETRY_AFTER_S)} if err.status in (429, 503) else None
    return JSONResponse(err.body(), status_code=err.status, headers=headers)


class _Server:
    def __init__(self, backend: Backend, config: ServeConfig) -> None:
        self.backend = backend
        self.config = config
        self.queue = EngineQueue(config.max_waiting, config.wait_timeout_s)
        self.created = int(time.time())

    # ------------------------------------------------------------ routes
    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "waiting": self.queue.waiting})

    async def models(self, request: Request) -> Response:
        try:
            self._authenticate(request)
        except ApiError as err:
            return _error(err)
        return JSONResponse({"object": "list", "data": [self._model_card()]})

    async def model(self, request: Request) -> Response:
        try:
            self._authenticate(request)
            self.backend.check_model(request.path_params["model"])
        except ApiError as err:
            return _error(err)
        return JSONResponse(self._model_card())

    async def chat_completions(self, request: Request) -> Response:
        try:
            self._authenticate(request)
            body = await _read_body(request, self.config.limits.max_body_bytes)
            chat = parse_chat_request(parse_json_body(body), self.config.limits)
            self.backend.check_model(chat.model)
        except ApiError as err:
            return _error(err)
        job = _Job(self.backend, self.queue, chat, request.receive)
        try:
            first = await job.next()
        except ApiError as err:
            await job.cancel()
            return _error(err)
        if first is None:  # the client went away
            await job.cancel()
            return Response(status_code=499)
        ids = ResponseIds(self.backend.model_id)
        if chat.stream:
            return _EventStream(job, ids, first, chat.include_usage)
        try:
            completion = Completion()
            delta: Delta | None = first
            while delta is not None:
                completion.add(delta)
                if isinstance(delta, Finish):
                    return JSONResponse(completion.body(ids))
                delta = await job.next()
            return Response(status_code=499)
        except ApiError as err:
            return _error(err)
        finally:
            await job.cancel()  # a no-op when decoding finished

    # ------------------------------------------------------------ helpers
    def _model_card(self) -> dict[str, Any]:
        return {
            "id": self.backend.model_id,
            "object": "model",
            "created": self.created,
            "owned_by": "toolweave",
        }

    def _authenticate(self, request: Request) -> None:
        key = self.config.api_key
        if not key:
            return
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            raise ApiError(
                "Missing API key: send 'Authorization: Bearer KEY'",
                status=401,
                code="missing_api_key",
            )
        if not hmac.compare_digest(given.strip().encode(), key.encode()):
            raise ApiError("Incorrect API key provided", status=401, code="invalid_api_key")


async def _read_body(request: Request, limit: int) -> bytes:
    """The whole body, refusing more than `limit` bytes before reading past it."""
    too_large = ApiError(
        f"the request body is larger than this server's limit of {limit} bytes",
        status=413,
        code="request_too_large",
    )
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    parts: list[bytes] = []
    size = 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise too_large
        parts.append(part)
    return b"".join(parts)


_END = object()
_GONE = object()


class _Job:
    """One request's decoding task: waits for the engine, decodes, buffers deltas.

    A second task watches the connection (the body was read already, so the next
    message is the disconnect) and queues `_GONE` when the client leaves."""

    def __init__(
        self, backend: Backend, queue: EngineQueue, request: ChatRequest, receive: Receive
    ) -> None:
        self._items: asyncio.Queue[Any] = asyncio.Queue()
        self.gone = False
        self._task = asyncio.ensure_future(self._run(backend, queue, request))
        self._watch = asyncio.ensure_future(self._watch_disconnect(receive))

    async def _watch_disconnect(self, receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self.gone = True
        self._items.put_nowait(_GONE)

    async def _run(self, backend: Backend, queue: EngineQueue, request: ChatRequest) -> None:
        try:
            async with queue.slot():
                async for delta in backend.deltas(request):
                    self._items.put_nowait(delta)
            self._items.put_nowait(_END)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._items.put_nowait(_api_error(exc))
        except BaseException as exc:  # still answer the request, then let it propagate
            self._items.put_nowait(_api_error(exc))
            raise

    async def next(self) -> Delta | None:
        """The next delta, None once the client has gone; raises the request's
        `ApiError` if it failed."""
        item = await self._items.get()
        if item is _GONE:
            self._items.put_nowait(_GONE)  # every later call sees it too
            return None
        if isinstance(item, ApiError):
            raise item
        if item is _END:
            raise ApiError("the decoder ended without finishing", status=500, type="server_error")
        delta: Delta = item
        return delta

    async def cancel(self) -> None:
        """Stop decoding (at the next forward pass), wait until it has stopped, and stop
        watching the connection."""
        self._watch.cancel()
        self._task.cancel()
        for task in (self._task, self._watch):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def _api_error(exc: BaseException) -> ApiError:
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, QueueFullError):
        return ApiError(
            f"the server is busy: {exc}; retry later",
            status=429,
            type="rate_limit_error",
            code="queue_full",
        )
    if isinstance(exc, QueueTimeoutError):
        return ApiError(
            f"the server is overloaded: {exc}",
            status=503,
            type="server_error",
            code="queue_timeout",
        )
    if isinstance(exc, ContextFullError):
        return ApiError(str(exc), code="context_length_exceeded", param="messages")
    if isinstance(exc, DecodeCancelledError):
        return ApiError("the request was cancelled", status=499, type="server_error")
    if isinstance(exc, ToolweaveError | ValueError):
        return ApiError(str(exc) or type(exc).__name__)
    log.exception("request failed", exc_info=exc)
    return ApiError(f"internal error: {type(exc).__name__}: {exc}", status=500, type="server_error")


class _EventStream(Response):
    """A ``text/event-stream`` response of a job's chunks, ending with ``[DONE]``."""

    def __init__(
        self,
        job: _Job,
        ids: ResponseIds,
        first: Delta,
        include_usage: bool,
    ) -> None:
        super().__init__(status_code=200, media_type="text/event-stream")
        self.job = job
        self.ids = ids
        self.first = first
        self.include_usage = include_usage

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        try:
            async for data in self._events():
                if self.job.gone:
                    break
                await send({"type": "http.response.body", "body": data, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await self.job.cancel()  # a no-op when decoding finished

    async def _events(self) -> AsyncIterator[bytes]:
        delta: Delta | None = self.first
        first = True
        while delta is not None:
            yield sse(chunk(self.ids, delta, first=first))
            first = False
            if isinstance(delta, Finish):
                if self.include_usage:
                    yield sse(usage_chunk(self.ids, delta))
                yield sse("[DONE]")
                return
            try:
                delta = await self.job.next()
            except ApiError as err:
                yield sse(err.body())
                return
