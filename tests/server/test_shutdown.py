"""Graceful shutdown of a real ``snapready serve`` (issue: operations).

SIGTERM must turn ``/readyz`` to 503 at once while reviews are still answered for the drain
period; a request in flight when the listener closes still gets its answer; afterwards new
connections are refused and the process exits 0 within drain + grace.
"""

from __future__ import annotations

import json
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Callable

from tests.conftest import RunningServer, load_review, ssl_context

DRAIN_SECONDS = 2.0
GRACE_SECONDS = 5.0
SLACK_SECONDS = 10.0
"""Generous bound on top of drain + grace for a busy CI machine (a bound, not a timing)."""


def port_of(server: RunningServer) -> int:
    """The HTTPS port from the server's base URL."""
    return int(server.base_url.rsplit(":", 1)[1])


def refuses_connections(port: int) -> bool:
    """Whether a TCP connect to 127.0.0.1:``port`` is refused (listener closed)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True


def start_partial_request(server: RunningServer, body: bytes) -> ssl.SSLSocket:
    """Open a TLS connection and send a POST /validate with only half of ``body``."""
    raw = socket.create_connection(("127.0.0.1", port_of(server)), timeout=30)
    conn = ssl_context(server.ca_file).wrap_socket(raw, server_hostname="localhost")
    head = (
        f"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    conn.sendall(head + body[: len(body) // 2])
    return conn


def read_response(conn: ssl.SSLSocket) -> tuple[int, dict[str, object]]:
    """Read one HTTP/1.1 response (Content-Length framed): (status, JSON body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    length = int({k.lower(): v for k, v in headers.items()}["content-length"])
    while len(rest) < length:
        rest += conn.recv(65536)
    return int(lines[0].split()[1]), json.loads(rest[:length])


def test_sigterm_drains_then_finishes_in_flight_and_exits_zero(
    server_factory: Callable[..., RunningServer],
) -> None:
    server = server_factory(
        env={
            "SNAPREADY_SERVER__DRAIN_SECONDS": str(DRAIN_SECONDS),
            "SNAPREADY_SERVER__GRACEFUL_TIMEOUT_SECONDS": str(GRACE_SECONDS),
        }
    )
    review = load_review("03")
    body = json.dumps(review).encode()
    headers = {"Content-Type": "application/json"}
    with server.client() as client:
        assert client.get("/readyz").status_code == 200
        in_flight = start_partial_request(server, body)
        signalled = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        # 1. Readiness turns false at once; reviews are still answered during the drain.
        deadline = signalled + DRAIN_SECONDS / 2
        ready = client.get("/readyz")
        while ready.status_code == 200 and time.monotonic() < deadline:
            ready = client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["shuttingDown"] is True
        during = client.post("/validate", content=body, headers=headers)
        assert during.status_code == 200
        assert during.json()["response"]["uid"] == review["request"]["uid"]
        # Each answer during the drain closes its connection, so the client's next request
        # does not race the listener's close on a kept-alive connection (found by a user test).
        assert during.headers.get("connection") == "close"
    # 2. After the drain the listener closes: new connections are refused.
    port = port_of(server)
    bound = signalled + DRAIN_SECONDS + SLACK_SECONDS
    while not refuses_connections(port) and time.monotonic() < bound:
        time.sleep(0.05)
    assert refuses_connections(port), "listener still open after the drain"
    # 3. The request begun before the close still completes.
    assert server.process.poll() is None, "exited with a request in flight"
    in_flight.sendall(body[len(body) // 2 :])
    status, answer = read_response(in_flight)
    in_flight.close()
    assert status == 200
    assert answer["response"]["uid"] == review["request"]["uid"]  # type: ignore[index]
    # 4. Then the process exits 0 within drain + grace.
    try:
        code = server.process.wait(GRACE_SECONDS + SLACK_SECONDS)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running after drain + grace:\n{server.log()}") from None
    assert code == 0, server.log()


def test_second_sigterm_skips_the_rest_of_the_drain(
    server_factory: Callable[..., RunningServer],
) -> None:
    server = server_factory(env={"SNAPREADY_SERVER__DRAIN_SECONDS": "600"})
    with server.client() as client:
        assert client.get("/readyz").status_code == 200
        server.process.send_signal(signal.SIGTERM)
        while client.get("/readyz").status_code == 200:
            time.sleep(0.02)
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(SLACK_SECONDS + GRACE_SECONDS) == 0


def test_in_flight_request_beyond_the_grace_period_is_cut_and_exit_is_still_clean(
    server_factory: Callable[..., RunningServer],
) -> None:
    server = server_factory(
        env={
            "SNAPREADY_SERVER__DRAIN_SECONDS": "0",
            "SNAPREADY_SERVER__GRACEFUL_TIMEOUT_SECONDS": "1",
            "SNAPREADY_SERVER__REQUEST_TIMEOUT_SECONDS": "60",
        }
    )
    stuck = start_partial_request(server, json.dumps(load_review("03")).encode())
    time.sleep(0.2)  # let the server start the request's task before the signal
    server.process.send_signal(signal.SIGTERM)
    try:
        assert server.process.wait(SLACK_SECONDS + 1) == 0, server.log()
    finally:
        stuck.close()
    assert "timeout graceful shutdown exceeded" in server.log()
