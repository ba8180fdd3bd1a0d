"""Start-up and shutdown: a uvicorn server that drains on SIGTERM (the HTTP protocol with the
request deadline and header cap is ``webhook.server.protocol``).

``GracefulServer`` listens on a socket bound beforehand (so a bind failure is a clear start-up
error), bounds TLS handshakes by the request timeout and TLS shutdowns by
``TLS_SHUTDOWN_SECONDS``, turns readiness off on SIGTERM, keeps serving for
``server.drain_seconds``, then lets uvicorn close the listener and finish in-flight requests
within ``server.graceful_timeout_seconds``. Wired by ``webhook.server.runner``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from types import FrameType

import uvicorn

from webhook.server.app import AdmissionApp
from webhook.server.logs import flush_logs

log = logging.getLogger("snapready.server")

TLS_SHUTDOWN_SECONDS = 1.0
"""Seconds a closing TLS connection may take to flush its last bytes and get the client's
close_notify before the socket is closed anyway. asyncio/uvloop wait 30 s by default, and the
connection keeps its ``limit_concurrency`` slot and file descriptor until then: a thousand
clients that never answer (cut off by the request deadline, or idle keep-alive connections)
then locked every new client, the API server's included, out with 503s for ~30 s, and held a
drained shutdown for its whole grace period. A client that closes normally answers at once
(Go's ``crypto/tls`` ``Conn.Close``, used by the API server, sends close_notify), and the side
that closes first need not wait for the reply at all (RFC 5246 section 7.2.1, RFC 8446 section
6.1): our answer goes out before it, so giving up after a second loses nothing."""


class GracefulServer(uvicorn.Server):
    """uvicorn server whose SIGTERM starts a drain instead of closing the listener at once.

    Kubernetes sends SIGTERM and removes the pod from the Service endpoints concurrently; the API
    server keeps calling us until it sees the change. So on the first SIGTERM/SIGINT: ``/readyz``
    answers 503 at once, requests are still served for ``drain_seconds``, then the listener closes
    and in-flight requests get ``timeout_graceful_shutdown`` seconds to finish. A second signal
    skips the rest of the drain; a second SIGINT also skips waiting for in-flight requests.
    The process then exits 0 (the signal is not re-raised as plain uvicorn does).

    The signal handler only records the signal (flags, the readiness switch and the drain
    deadline); the log line is written on the next 100 ms tick. Logging inside the handler could
    re-enter a stream write the signal interrupted ("RuntimeError: reentrant call inside
    BufferedWriter" with stderr on a slow pipe) and lose or split lines.

    With ``listener`` (a bound socket, see ``server.runner.bind_listener``) it serves that socket,
    gives each TLS handshake at most ``handshake_timeout`` seconds (asyncio's default is 60 s,
    during which a client that never finishes the handshake holds a file descriptor), each TLS
    shutdown at most ``TLS_SHUTDOWN_SECONDS``, and logs ``snapready listening on ...`` once the
    listener accepts connections.
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
        self.signals: deque[int] = deque()
        """Signals received and not yet logged (appended by the handler, read by the tick)."""
        self.signals_logged = 0

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
            ssl_shutdown_timeout=TLS_SHUTDOWN_SECONDS if config.ssl is not None else None,
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
        """First signal: start draining. Later ones: stop now (SIGINT: do not wait either).

        Runs as a signal handler, between two bytecodes of whatever the main thread was doing:
        it only sets attributes and records ``sig`` (a deque append is atomic), no I/O.
        """
        self.signals.append(sig)
        if self.drain_deadline is None:
            self.app.shutting_down = True
            self.drain_deadline = time.monotonic() + self.drain_seconds
            return
        self.should_exit = True
        if sig == signal.SIGINT:
            self.force_exit = True

    async def on_tick(self, counter: int) -> bool:
        """uvicorn's 100 ms tick: log the signals received since the last tick, flush buffered
        admission log lines; end the drain when its deadline has passed."""
        self.log_and_flush()
        if self.drain_deadline is not None and time.monotonic() >= self.drain_deadline:
            self.should_exit = True
        return await super().on_tick(counter)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's shutdown, after logging a signal that ended the main loop before a tick.

        The tick stops with the main loop, so the graceful phase keeps its own 100 ms flush:
        admission lines of requests finished then would otherwise wait for the exit (or be lost
        to a SIGKILL at the end of the pod's termination grace period).
        """
        self.log_signals()
        ticker = asyncio.create_task(self._tick_while_closing())
        try:
            await super().shutdown(sockets)
        finally:
            ticker.cancel()
            self.log_and_flush()

    async def _tick_while_closing(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            self.log_and_flush()

    def log_and_flush(self) -> None:
        """Log the signals received since the last call, then flush buffered log lines."""
        self.log_signals()
        flush_logs()

    def log_signals(self) -> None:
        """Log each recorded signal once: the first started the drain, later ones end it."""
        while self.signals:
            sig = self.signals.popleft()
            if not self.signals_logged:
                log.info("signal %d: readiness off, draining for %.1f s", sig, self.drain_seconds)
            elif sig == signal.SIGINT:
                log.info("signal %d again: stopping without waiting for requests in flight", sig)
            else:
                log.info("signal %d again: drain ended early", sig)
            self.signals_logged += 1
