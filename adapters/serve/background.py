"""Run the server on a background thread (tests, notebooks, benchmarks).

    with ServerThread(create_app(Backend())) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="unused")

The port is a free loopback one unless given; entering waits (at most `start_timeout_s`)
until uvicorn accepts connections, leaving asks it to stop and waits for it.
"""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType

import uvicorn
from starlette.types import ASGIApp

__all__ = ["ServerThread"]


class ServerThread:
    """uvicorn serving `app` on a daemon thread (see the module doc)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        start_timeout_s: float = 30.0,
        stop_timeout_s: float = 30.0,
    ) -> None:
        self.host = host
        self.port = port or _free_port(host)
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        config = uvicorn.Config(app, host=host, port=self.port, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, daemon=True, name="toolweave-serve"
        )

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://HOST:PORT/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + self.start_timeout_s
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"the server could not start on {self.host}:{self.port}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the server did not start within {self.start_timeout_s:g} s")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(self.stop_timeout_s)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port
