"""Connection lifecycle under misbehaving clients, signals and refusal counting (issue: operations).

1. A connection the server closes (request deadline, header cap, idle keep-alive) gives its
   ``max_concurrency`` slot back promptly even when the client never answers the TLS
   close_notify: asyncio/uvloop wait 30 s for it by default, and meanwhile every new client, the
   API server's included, got uvicorn's 503.
2. The SIGTERM handler does no I/O: logging from it re-entered a stream write the signal had
   interrupted ("RuntimeError: reentrant call inside BufferedWriter") and lost the line.
3. ``snapready_rejected_requests_total`` counts the protocol's refusals: 408 (request deadline),
   431 (header cap) and uvicorn's own 503 at the connection limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import signal
import socket
import ssl
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import RunningServer, make_settings, start_server, stop_server
from tests.support.ports import free_port
from webhook.server.app import create_app
from webhook.server.runner import build_engine
from webhook.server.shutdown import GracefulServer

SLOTS = 6
"""``server.max_concurrency`` of the test servers: few, so a handful of clients fill them."""
DEADLINE_SECONDS = 1
"""``server.request_timeout_seconds`` of the impatient server (also its TLS handshake bound)."""
HEADER_CAP = 1024
"""``server.max_header_bytes`` of the impatient server (the smallest the settings allow)."""
SERVED_WITHIN_SECONDS = 12.0
"""Generous bound for "a new client is served" once the stalled ones are cut off: far above the
server's 1 s TLS shutdown bound, far below the 30 s asyncio waited for a close_notify."""
JSON = {"Content-Type": "application/json"}


@dataclass
class Instrumented:
    """A running server and its plain-HTTP metrics port."""

    server: RunningServer
    metrics_port: int

    def rejected(self, endpoint: str, code: int) -> float:
        """``snapready_rejected_requests_total{endpoint, code}`` as scraped now (0 if absent)."""
        scrape = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10)
        for family in text_string_to_metric_families(scrape.text):
            for sample in family.samples:
                if sample.name == "snapready_rejected_requests_total" and sample.labels == {
                    "endpoint": endpoint,
                    "code": str(code),
                }:
                    return sample.value
        return 0.0


@contextlib.contextmanager
def instrumented(tmp: pytest.TempPathFactory, name: str, **env: str) -> Iterator[Instrumented]:
    """A real ``snapready serve`` with ``SNAPREADY_SERVER__<KEY>`` settings and metrics on."""
    metrics_port = free_port()
    settings = {f"SNAPREADY_SERVER__{key.upper()}": value for key, value in env.items()}
    settings["SNAPREADY_SERVER__METRICS_PORT"] = str(metrics_port)
    server = start_server(tmp.mktemp(name), env=settings)
    try:
        yield Instrumented(server, metrics_port)
    finally:
        stop_server(server)


@pytest.fixture(scope="module")
def impatient(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instrumented]:
    """Few slots, a 1 s request deadline, a 1 KiB header cap and 1 s of keep-alive."""
    with instrumented(
        tmp_path_factory,
        "impatient",
        max_concurrency=str(SLOTS),
        request_timeout_seconds=str(DEADLINE_SECONDS),
        max_header_bytes=str(HEADER_CAP),
        keepalive_seconds="1",
    ) as running:
        yield running


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instrumented]:
    """Few slots and a 30 s request deadline: silent clients keep their slots while held."""
    with instrumented(
        tmp_path_factory, "crowded", max_concurrency=str(SLOTS), request_timeout_seconds="30"
    ) as running:
        yield running


def tls_connect(server: RunningServer) -> ssl.SSLSocket:
    """A raw TLS connection to ``server`` (handshake done)."""
    raw = socket.create_connection(("127.0.0.1", int(server.base_url.rsplit(":", 1)[1])), 15)
    context = ssl.create_default_context(cafile=str(server.ca_file))
    return context.wrap_socket(raw, server_hostname="localhost")


def read_until_closed(conn: ssl.SSLSocket) -> bytes:
    """Everything the server sends until it closes (reading never answers its close_notify:
    OpenSSL replies only on an explicit shutdown, which this client never makes)."""
    data = b""
    while True:
        try:
            chunk = conn.recv(65536)
        except (ConnectionResetError, ssl.SSLEOFError):
            return data
        if not chunk:
            return data
        data += chunk


def request_head(path: str, method: str = "POST", body_length: int | None = None) -> bytes:
    """A complete request head (JSON ``Content-Length`` when ``body_length`` is given)."""
    lines = [f"{method} {path} HTTP/1.1", "Host: localhost"]
    if body_length is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {body_length}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def oversized_head(path: str, method: str = "POST") -> bytes:
    """An unfinished head past ``HEADER_CAP`` by one header, after a complete Host header."""
    start = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nX-Big: ".encode()
    return start + b"v" * (HEADER_CAP + 1 - len(start))


def status_once_served(server: RunningServer, seconds: float) -> tuple[int, list[int]]:
    """GET ``/readyz`` on fresh connections until not 503 or ``seconds`` have passed:
    (last status, statuses seen)."""
    deadline = time.monotonic() + seconds
    seen: list[int] = []
    while True:
        with server.client() as client:
            seen.append(client.get("/readyz").status_code)
        if seen[-1] != 503 or time.monotonic() >= deadline:
            return seen[-1], seen
        time.sleep(0.05)


# ---- 1. slots of cut-off clients come back ------------------------------------------------------

STALLS: list[Any] = [
    pytest.param(b"", b"", id="silent-after-the-handshake-is-closed-without-an-answer"),
    pytest.param(
        request_head("/validate", body_length=5000) + b'{"apiVersion": ',
        b"HTTP/1.1 408",
        id="body-drip-gets-408-and-a-close",
    ),
    pytest.param(oversized_head("/validate"), b"HTTP/1.1 431", id="head-over-the-cap-gets-431"),
    pytest.param(
        request_head("/healthz", method="GET"),
        b"HTTP/1.1 200",
        id="idle-keep-alive-after-an-answer-is-closed-by-uvicorn",
    ),
]


@pytest.mark.parametrize(("opening", "reply_start"), STALLS)
def test_slots_of_cut_off_clients_that_never_answer_the_tls_close_come_back(
    impatient: Instrumented, opening: bytes, reply_start: bytes
) -> None:
    # One slot short of the limit, so that the stalled requests are not refused themselves
    # (uvicorn counts the asking connection): the next client takes the last slot.
    stalled = [tls_connect(impatient.server) for _ in range(SLOTS - 1)]
    try:
        for conn in stalled:
            conn.sendall(opening)
        # Every stalled client is cut off by the server; none of them answers the close_notify
        # or closes its socket (they stay open until the end of the test).
        for conn in stalled:
            assert read_until_closed(conn).startswith(reply_start)
        status, seen = status_once_served(impatient.server, SERVED_WITHIN_SECONDS)
        assert status == 200, f"{len(seen)} answers in {SERVED_WITHIN_SECONDS} s, last {status}"
    finally:
        for conn in stalled:
            conn.close()


# ---- 3. refusals are counted ---------------------------------------------------------------------

REFUSALS: list[Any] = [
    pytest.param(b"", "unknown", 408, b"", id="silent-connection-counts-408-unknown"),
    pytest.param(
        b"POST /validate HTTP/1.1\r\nHo", "unknown", 408, b"", id="request-line-only-counts-unknown"
    ),
    pytest.param(
        b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nX-Slow: a",
        "mutate",
        408,
        b"",
        id="slow-headers-after-the-host-header-count-408-mutate",
    ),
    pytest.param(
        request_head("/validate", body_length=5000) + b'{"apiVersion": ',
        "validate",
        408,
        b"HTTP/1.1 408",
        id="body-drip-on-validate-counts-408-validate",
    ),
    pytest.param(
        oversized_head("/mutate"), "mutate", 431, b"HTTP/1.1 431", id="big-head-on-mutate-431"
    ),
    pytest.param(
        oversized_head("/healthz", method="GET"),
        "other",
        431,
        b"HTTP/1.1 431",
        id="big-head-on-a-probe-path-counts-431-other",
    ),
    pytest.param(
        b"POST /validate?q=" + b"u" * HEADER_CAP,
        "unknown",
        431,
        b"HTTP/1.1 431",
        id="request-line-over-the-cap-counts-431-unknown",
    ),
]


@pytest.mark.parametrize(("opening", "endpoint", "code", "reply_start"), REFUSALS)
def test_protocol_refusals_are_counted_once_with_a_bounded_endpoint_label(
    impatient: Instrumented, opening: bytes, endpoint: str, code: int, reply_start: bytes
) -> None:
    before = impatient.rejected(endpoint, code)
    with tls_connect(impatient.server) as conn:
        conn.sendall(opening)
        assert read_until_closed(conn).startswith(reply_start)
    # Counted before the close: the client has seen it, so the count is already there.
    assert impatient.rejected(endpoint, code) == before + 1


def test_uvicorns_503_at_the_connection_limit_is_counted(crowded: Instrumented) -> None:
    before = crowded.rejected("validate", 503)
    held = [tls_connect(crowded.server) for _ in range(SLOTS)]
    refused = 0
    try:
        # The server registers a connection once its side of the handshake is done: ask until
        # the held connections fill every slot.
        deadline = time.monotonic() + SERVED_WITHIN_SECONDS
        while refused == 0 and time.monotonic() < deadline:
            with crowded.server.client() as client:
                answer = client.post("/validate", content=b"{}", headers=JSON)
            refused += answer.status_code == 503
    finally:
        for conn in held:
            conn.close()
    assert refused == 1, "the held connections never filled the slots"
    assert crowded.rejected("validate", 503) == before + refused


# ---- 2. signals are logged outside the handler ---------------------------------------------------


def graceful_server(drain_seconds: float) -> GracefulServer:
    """A ``GracefulServer`` (not started) over the example-policy app."""
    app = create_app(build_engine(make_settings()))
    config = uvicorn.Config(app, lifespan="off", log_config=None)
    return GracefulServer(config, app.state.admission, drain_seconds)


class SignalMidWrite(io.RawIOBase):
    """The raw stream under a ``BufferedWriter``: runs ``interrupt`` inside its first write, as
    a signal handler runs between two bytecodes of the write it interrupted."""

    def __init__(self, interrupt: Callable[[], None]) -> None:
        super().__init__()
        self.interrupt: Callable[[], None] | None = interrupt
        self.written = bytearray()

    def writable(self) -> bool:
        """A sink."""
        return True

    def write(self, data: Any) -> int:
        """Keep ``data``; the first call runs ``interrupt`` first."""
        interrupt, self.interrupt = self.interrupt, None
        if interrupt is not None:
            interrupt()
        self.written += bytes(data)
        return len(data)


class RecordingHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler that keeps the errors logging would print and swallow."""

    def __init__(self, stream: io.TextIOWrapper) -> None:
        super().__init__(stream)
        self.errors: list[BaseException | None] = []

    def handleError(self, record: logging.LogRecord) -> None:
        """Keep the exception instead of printing it."""
        self.errors.append(sys.exc_info()[1])


def test_sigterm_arriving_during_a_log_write_is_logged_whole_after_the_handler() -> None:
    server = graceful_server(drain_seconds=5.0)
    raw = SignalMidWrite(lambda: server.handle_exit(signal.SIGTERM, None))
    stream = io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8")
    handler = RecordingHandler(stream)
    logger = logging.getLogger("snapready.server")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        logger.info("a line being written when SIGTERM arrives")
        assert server.app.shutting_down, "readiness must turn off in the handler itself"
        asyncio.run(server.on_tick(1))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert handler.errors == []
    assert raw.written.decode().splitlines() == [
        "a line being written when SIGTERM arrives",
        "signal 15: readiness off, draining for 5.0 s",
    ]


@pytest.mark.parametrize(
    ("signals", "should_exit", "force_exit", "logged"),
    [
        pytest.param(
            [signal.SIGTERM],
            False,
            False,
            ["signal 15: readiness off, draining for 5.0 s"],
            id="first-sigterm-starts-the-drain",
        ),
        pytest.param(
            [signal.SIGTERM, signal.SIGTERM],
            True,
            False,
            ["signal 15: readiness off, draining for 5.0 s", "signal 15 again: drain ended early"],
            id="second-sigterm-ends-the-drain-and-waits-for-requests",
        ),
        pytest.param(
            [signal.SIGTERM, signal.SIGINT],
            True,
            True,
            [
                "signal 15: readiness off, draining for 5.0 s",
                "signal 2 again: stopping without waiting for requests in flight",
            ],
            id="sigint-after-sigterm-does-not-wait-for-requests",
        ),
    ],
)
def test_signal_handler_only_records_and_the_tick_logs(
    caplog: pytest.LogCaptureFixture,
    signals: list[int],
    should_exit: bool,
    force_exit: bool,
    logged: list[str],
) -> None:
    server = graceful_server(drain_seconds=5.0)
    caplog.set_level(logging.INFO, logger="snapready.server")
    for sig in signals:
        server.handle_exit(sig, None)
    assert caplog.messages == [], "logged inside the signal handler"
    assert server.app.shutting_down
    assert (server.should_exit, server.force_exit) == (should_exit, force_exit)
    asyncio.run(server.on_tick(1))
    asyncio.run(server.on_tick(2))  # each signal is logged once
    assert caplog.messages == logged
