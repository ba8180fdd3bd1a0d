"""uvicorn subclasses for the process lifecycle: a per-request deadline and drain-on-SIGTERM.

``HardenedHttpProtocol`` closes connections whose request (headers and body) does not arrive
within ``server.request_timeout_seconds``; ``GracefulServer`` turns readiness off on SIGTERM,
keeps serving for ``server.drain_seconds``, then lets uvicorn close the listener and finish
in-flight requests within ``server.graceful_timeout_seconds``. Both are wired by ``server``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
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
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Accept the connection and start the deadline for its first request."""
        super().connection_made(transport)
        self._arm_deadline()

    def on_message_begin(self) -> None:
        """First byte of a request: (re)start the deadline."""
        super().on_message_begin()
        self._arm_deadline()

    def on_message_complete(self) -> None:
        """The whole request is in: no deadline while the app works on it."""
        self._cancel_deadline()
        super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        """Drop the timer with the connection."""
        self._cancel_deadline()
        super().connection_lost(exc)

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


REQUEST_TIMEOUT_BODY = b'{"error":"request not received in time","code":408}'
REQUEST_TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
    b"content-length: " + str(len(REQUEST_TIMEOUT_BODY)).encode() + b"\r\n"
    b"connection: close\r\n\r\n" + REQUEST_TIMEOUT_BODY
)


def protocol_class(settings: Settings) -> type[HardenedHttpProtocol]:
    """``HardenedHttpProtocol`` with the configured request deadline."""
    timeout = settings.server.request_timeout_seconds
    return type("SnapreadyHttpProtocol", (HardenedHttpProtocol,), {"request_timeout": timeout})


class GracefulServer(uvicorn.Server):
    """uvicorn server whose SIGTERM starts a drain instead of closing the listener at once.

    Kubernetes sends SIGTERM and removes the pod from the Service endpoints concurrently; the API
    server keeps calling us until it sees the change. So on the first SIGTERM/SIGINT: ``/readyz``
    answers 503 at once, requests are still served for ``drain_seconds``, then the listener closes
    and in-flight requests get ``timeout_graceful_shutdown`` seconds to finish. A second signal
    skips the rest of the drain; a second SIGINT also skips waiting for in-flight requests.
    The process then exits 0 (the signal is not re-raised as plain uvicorn does).
    """

    def __init__(self, config: uvicorn.Config, app: AdmissionApp, drain_seconds: float) -> None:
        super().__init__(config)
        self.app = app
        self.drain_seconds = drain_seconds
        self.drain_deadline: float | None = None

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
