"""uvicorn subclasses for the process lifecycle: request deadlines, a header cap and drain.

``HardenedHttpProtocol`` closes connections whose request (headers and body) does not arrive
within ``server.request_timeout_seconds`` and answers 431 to a request head larger than
``server.max_header_bytes``; ``GracefulServer`` listens on a socket bound beforehand (so a bind
failure is a clear start-up error), bounds TLS handshakes by the same request timeout, turns
readiness off on SIGTERM, keeps serving for ``server.drain_seconds``, then lets uvicorn close
the listener and finish in-flight requests within ``server.graceful_timeout_seconds``. Both are
wired by ``server``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import threading
import time
from collections.abc import Iterator
from types import FrameType

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from webhook.app import AdmissionApp
from webhook.config import Settings
from webhook.logs import flush_logs

log = logging.getLogger("snapready.server")


class HardenedHttpProtocol(HttpToolsProtocol):
    """httptools protocol with one deadline per request for its headers and body.

    uvicorn times out idle keep-alive connections but not a client that opens a connection (or
    starts a request) and then sends its headers or body slowly: enough of those would hold every
    ``limit_concurrency`` slot. The deadline (``server.request_timeout_seconds``) runs from the
    connection (after TLS) or from a request's first byte until the request is complete; when it
    fires the connection is closed, after a 408 answer if the headers were complete. Kept here
    rather than around the app's body read: a timer per request costs ~1 us, an
    ``asyncio.timeout`` block several (measured with py-spy under ``make bench``).
    """

    request_timeout: float = 10.0
    max_header_bytes: int = 64 * 1024
    _deadline: asyncio.TimerHandle | None = None
    _awaiting_head = True
    """True from a connection's start, and after each request, until the next head is complete."""
    _head_bytes = 0
    _ends = 0
    """Request heads and requests completed on this connection: tells whether a chunk ended one
    (its bytes then belong to a finished head or body, not to a head still coming)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Accept the connection and start the deadline for its first request."""
        super().connection_made(transport)
        self._arm_deadline()

    def data_received(self, data: bytes) -> None:
        """Feed the parser; count bytes while a request head is incomplete (431 over the cap).

        httptools/llhttp buffer a header of any size (no limit of their own), so without this
        a client could grow memory by sending one endless header. Counted per received chunk,
        and only for chunks that end no head or request (a chunk that ends one request and
        starts a pipelined next is not counted): the cap can be overshot by about a chunk.
        """
        ends = self._ends
        super().data_received(data)
        if not self._awaiting_head or self._ends != ends:
            return
        self._head_bytes += len(data)
        if self._head_bytes > self.max_header_bytes and not self.transport.is_closing():
            self._reject_head()

    def on_headers_complete(self) -> None:
        """The head is in: stop counting header bytes (the body has its own cap in the app)."""
        self._awaiting_head = False
        self._head_bytes = 0
        self._ends += 1
        super().on_headers_complete()

    def on_message_begin(self) -> None:
        """First byte of a request: (re)start the deadline."""
        super().on_message_begin()
        self._arm_deadline()

    def on_message_complete(self) -> None:
        """The whole request is in: no deadline while the app works on it."""
        self._cancel_deadline()
        self._awaiting_head = True  # keep-alive: the next bytes are the next request's head
        self._ends += 1
        super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        """Drop the timer with the connection."""
        self._cancel_deadline()
        super().connection_lost(exc)

    def _reject_head(self) -> None:
        """431 (RFC 6585) and close; only the close when a response is already under way."""
        self._cancel_deadline()
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            self.transport.write(HEADERS_TOO_LARGE_RESPONSE)
        self.transport.close()

    def _arm_deadline(self) -> None:
        self._cancel_deadline()
        self._deadline = self.loop.call_later(self.request_timeout, self._too_slow)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_started:
            # Headers of the current request are in (its cycle exists), the body is not.
            self.transport.write(REQUEST_TIMEOUT_RESPONSE)
        self.transport.close()


def _json_error(status: bytes, body: bytes) -> bytes:
    """A complete ``connection: close`` HTTP/1.1 response with a JSON error body."""
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\n"
        b"connection: close\r\n\r\n" + body
    )


REQUEST_TIMEOUT_BODY = b'{"error":"request not received in time","code":408}'
REQUEST_TIMEOUT_RESPONSE = _json_error(b"408 Request Timeout", REQUEST_TIMEOUT_BODY)
HEADERS_TOO_LARGE_RESPONSE = _json_error(
    b"431 Request Header Fields Too Large",
    b'{"error":"request line and headers too large","code":431}',
)


def protocol_class(settings: Settings) -> type[HardenedHttpProtocol]:
    """``HardenedHttpProtocol`` with the configured request deadline and header cap."""
    limits = {
        "request_timeout": settings.server.request_timeout_seconds,
        "max_header_bytes": settings.server.max_header_bytes,
    }
    return type("SnapreadyHttpProtocol", (HardenedHttpProtocol,), limits)


class GracefulServer(uvicorn.Server):
    """uvicorn server whose SIGTERM starts a drain instead of closing the listener at once.

    Kubernetes sends SIGTERM and removes the pod from the Service endpoints concurrently; the API
    server keeps calling us until it sees the change. So on the first SIGTERM/SIGINT: ``/readyz``
    answers 503 at once, requests are still served for ``drain_seconds``, then the listener closes
    and in-flight requests get ``timeout_graceful_shutdown`` seconds to finish. A second signal
    skips the rest of the drain; a second SIGINT also skips waiting for in-flight requests.
    The process then exits 0 (the signal is not re-raised as plain uvicorn does).

    With ``listener`` (a bound socket, see ``server.bind_listener``) it serves that socket, gives
    each TLS handshake at most ``handshake_timeout`` seconds (asyncio's default is 60 s, during
    which a client that never finishes the handshake holds a file descriptor) and logs
    ``snapready listening on ...`` once the listener accepts connections.
    """

    def __init__(
        self,
        config: uvicorn.Config,
        app: AdmissionApp,
        drain_seconds: float,
        listener: socket.socket | None = None,
        handshake_timeout: float = 60.0,
    ) -> None:
        super().__init__(config)
        self.app = app
        self.drain_seconds = drain_seconds
        self.drain_deadline: float | None = None
        self.listener = listener
        self.handshake_timeout = handshake_timeout

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Start accepting on ``listener`` (uvicorn's own start-up without one)."""
        if self.listener is None or sockets is not None:
            await super().startup(sockets)
            return
        await self.lifespan.startup()  # "off" in our config: a no-op kept for uvicorn's contract
        config = self.config

        def protocol() -> asyncio.Protocol:
            return config.http_protocol_class(  # type: ignore[call-arg]
                config=config, server_state=self.server_state, app_state=self.lifespan.state
            )

        server = await asyncio.get_running_loop().create_server(
            protocol,
            sock=self.listener,
            ssl=config.ssl,
            backlog=config.backlog,
            ssl_handshake_timeout=self.handshake_timeout if config.ssl is not None else None,
        )
        self.servers = [server]
        self.started = True
        port = self.listener.getsockname()[1]
        scheme = "https" if config.ssl is not None else "http"
        log.info("snapready listening on %s://%s:%d", scheme, config.host, port)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Route SIGTERM/SIGINT to ``handle_exit`` (main thread only); restore them after."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        signals = (signal.SIGTERM, signal.SIGINT)
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in signals}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """First signal: start draining. Later ones: stop now (SIGINT: do not wait either)."""
        if self.drain_deadline is None:
            self.app.shutting_down = True
            self.drain_deadline = time.monotonic() + self.drain_seconds
            log.info("signal %d: readiness off, draining for %.1f s", sig, self.drain_seconds)
            return
        self.should_exit = True
        if sig == signal.SIGINT:
            self.force_exit = True

    async def on_tick(self, counter: int) -> bool:
        """uvicorn's 100 ms tick: flush buffered admission log lines; end the drain when its
        deadline has passed."""
        flush_logs()
        if self.drain_deadline is not None and time.monotonic() >= self.drain_deadline:
            self.should_exit = True
        return await super().on_tick(counter)
