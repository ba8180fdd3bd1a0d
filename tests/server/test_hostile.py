"""Hostile input against a real HTTPS ``snapready serve`` (issue: operations).

Every answer is a well-formed AdmissionReview or a 4xx/503 JSON error, never a crash, a hang, a
500 page or an internal error; slow clients are cut off by deadlines and the number of
concurrent requests and buffered body bytes are bounded.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import json
import re
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import (
    RunningServer,
    load_review,
    make_settings,
    ssl_context,
    start_server,
    stop_server,
)
from webhook.server.app import create_app
from webhook.server.runner import build_engine

JSON_HEADERS = {"Content-Type": "application/json"}
REVIEW_03 = load_review("03")  # selected by llm-policy: rules and mutation run
UID = REVIEW_03["request"]["uid"]


def port_of(server: RunningServer) -> int:
    """The HTTPS port from the server's base URL."""
    return int(server.base_url.rsplit(":", 1)[1])


def tls_connect(server: RunningServer, timeout: float = 15) -> ssl.SSLSocket:
    """A raw TLS connection to ``server`` (handshake done)."""
    raw = socket.create_connection(("127.0.0.1", port_of(server)), timeout=timeout)
    return ssl_context(server.ca_file).wrap_socket(raw, server_hostname="localhost")


def request_head(length: int, path: str = "/validate") -> bytes:
    """The head of a JSON POST with ``Content-Length: length``."""
    return (
        f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def read_until_closed(conn: ssl.SSLSocket) -> bytes:
    """Everything the server sends until it closes the connection (socket timeout = hang)."""
    data = b""
    while True:
        try:
            chunk = conn.recv(65536)
        except (ConnectionResetError, ssl.SSLEOFError):
            return data
        if not chunk:
            return data
        data += chunk


def post(server: RunningServer, path: str, body: bytes) -> httpx.Response:
    """POST raw ``body`` as JSON over a fresh verified client."""
    with server.client() as client:
        return client.post(path, content=body, headers=JSON_HEADERS)


def assert_answered(answer: httpx.Response, uid: str | None = UID) -> dict[str, Any]:
    """A well-formed review (uid echoed, no internal error) or a 4xx JSON error."""
    assert answer.headers["content-type"] == "application/json"
    payload: dict[str, Any] = answer.json()
    if answer.status_code != 200:
        assert 400 <= answer.status_code < 500, answer.text[:300]
        assert payload["code"] == answer.status_code and payload["error"]
        return payload
    assert payload["kind"] == "AdmissionReview"
    response = payload["response"]
    if uid is not None:
        assert response["uid"] == uid
    status = response.get("status", {})
    assert status.get("code") != 500, f"internal error: {status.get('message')}"
    if "patch" in response:
        assert isinstance(json.loads(base64.b64decode(response["patch"])), list)
    return payload


OBJ = ("request", "object")
SPEC = (*OBJ, "spec")
META = (*OBJ, "metadata")
C0 = (*SPEC, "containers", 0)


def put(path: tuple[str | int, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    """An edit setting ``path`` (from the review root) to ``value``."""

    def edit(review: dict[str, Any]) -> None:
        target: Any = review
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


def nested(depth: int) -> str:
    """A placeholder that ``encode`` replaces by ``{"a": {"a": ... "x"}}`` ``depth`` deep
    (spliced in as text: the json module itself cannot encode that depth)."""
    return f"@@nested-{depth}@@"


def encode(review: Any) -> bytes:
    """JSON bytes of ``review`` with ``nested`` placeholders expanded."""
    text = json.dumps(review)
    for match in set(re.findall(r'"@@nested-(\d+)@@"', text)):
        depth = int(match)
        text = text.replace(f'"@@nested-{depth}@@"', '{"a": ' * depth + '"x"' + "}" * depth)
    return text.encode()


def edited(*edits: Callable[[dict[str, Any]], None]) -> bytes:
    """Review 03 with ``edits`` applied, encoded."""
    review = copy.deepcopy(REVIEW_03)
    for edit in edits:
        edit(review)
    return encode(review)


# ---- malformed bodies and wrong types, on the shared server ---------------------------------

WRONG_TYPES: list[Any] = [
    pytest.param(put(("request", "kind"), "Pod"), id="request-kind-as-string"),
    pytest.param(put(("request", "uid"), 12345), id="uid-as-number"),
    pytest.param(put(("request", "operation"), 7), id="operation-as-number"),
    pytest.param(put(("apiVersion",), 1), id="api-version-as-number"),
    pytest.param(put(("request",), [REVIEW_03["request"]]), id="request-as-list"),
    pytest.param(put(OBJ, [1, 2]), id="object-as-list"),
    pytest.param(put(("request", "namespace"), ["snap"]), id="namespace-as-list"),
    pytest.param(put(("request", "subResource"), {}), id="subresource-as-object"),
    pytest.param(put(META, 5), id="metadata-as-number"),
    pytest.param(put(SPEC, "x"), id="spec-as-string"),
    pytest.param(put((*META, "labels"), ["app", "llm"]), id="labels-as-list"),
    pytest.param(put((*META, "annotations"), ["a"]), id="annotations-as-list"),
    pytest.param(put((*META, "labels", "model"), 7), id="label-value-as-number"),
    pytest.param(put((*META, "labels", "app"), ["llm"]), id="label-value-as-list"),
    pytest.param(put((*SPEC, "containers"), None), id="containers-null"),
    pytest.param(put((*SPEC, "containers"), {"a": 1}), id="containers-as-object"),
    pytest.param(put((*SPEC, "containers"), [1, "x", None]), id="containers-of-scalars"),
    pytest.param(put((*SPEC, "volumes"), "v"), id="volumes-as-string"),
    pytest.param(put((*SPEC, "volumes"), [{"name": ["v"]}]), id="volume-name-as-list"),
    pytest.param(put((*SPEC, "initContainers"), True), id="init-containers-as-bool"),
    pytest.param(put((*SPEC, "nodeSelector"), "g2"), id="node-selector-as-string"),
    pytest.param(put((*SPEC, "affinity"), []), id="affinity-as-list"),
    pytest.param(put((*SPEC, "runtimeClassName"), ["gvisor"]), id="runtime-class-as-list"),
    pytest.param(put((*C0, "env"), {"A": "1"}), id="env-as-object"),
    pytest.param(put((*C0, "env"), [{"name": {"x": 1}}]), id="env-name-as-object"),
    pytest.param(put((*C0, "resources"), []), id="resources-as-list"),
    pytest.param(
        put((*C0, "resources", "limits"), {"nvidia.com/gpu": [4]}), id="gpu-limit-as-list"
    ),
    pytest.param(
        put((*C0, "resources", "limits"), {"nvidia.com/gpu": "lots"}),
        id="gpu-limit-not-a-quantity",
    ),
    pytest.param(put((*C0, "image"), None), id="image-null"),
    pytest.param(put((*C0, "name"), 3), id="container-name-as-number"),
    pytest.param(put((*C0, "securityContext"), "root"), id="security-context-as-string"),
    pytest.param(put((*C0, "ports"), [{"hostPort": "80"}]), id="host-port-as-string"),
    pytest.param(put((*C0, "volumeMounts"), [{"name": []}]), id="volume-mount-name-as-list"),
]


@pytest.mark.parametrize("edit", WRONG_TYPES)
@pytest.mark.parametrize("endpoint", ["/mutate", "/validate"])
def test_wrong_types_get_a_review_or_a_400(
    https_server: RunningServer, endpoint: str, edit: Callable[[dict[str, Any]], None]
) -> None:
    review = copy.deepcopy(REVIEW_03)
    edit(review)
    request = review.get("request")
    uid = request.get("uid") if isinstance(request, dict) else None
    answer = post(https_server, endpoint, encode(review))
    assert_answered(answer, uid if isinstance(uid, str) else None)


INVALID_UTF8 = b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "x": "\xff"}'
MALFORMED: list[Any] = [
    pytest.param(INVALID_UTF8, id="invalid-utf8"),
    pytest.param(b'{"a": "\\ud800"}', id="lone-surrogate-escape"),
    pytest.param(encode({"request": nested(5000)}), id="nested-5000-deep-beyond-parser-limit"),
    pytest.param(b"[" * 100_000, id="unclosed-arrays"),
    pytest.param(b'{"a": 1' + b" " * 100_000, id="truncated-with-padding"),
    pytest.param(b"\x00" * 1000, id="nul-bytes"),
    pytest.param(b'{"request": 1e999999}', id="number-overflow"),
    pytest.param(b'{"request": 123456789012345678901234567890}', id="huge-integer"),
]


@pytest.mark.parametrize("body", MALFORMED)
def test_malformed_bodies_get_a_json_400(https_server: RunningServer, body: bytes) -> None:
    answer = post(https_server, "/validate", body)
    assert answer.status_code == 400
    assert answer.json()["code"] == 400


OBJECTS: list[Any] = [
    pytest.param(put((*SPEC, "deep"), nested(900)), id="nested-900-deep-in-spec"),
    pytest.param(put((*META, "annotations", "deep"), nested(600)), id="nested-600-deep-annotation"),
    pytest.param(put((*C0, "securityContext"), nested(950)), id="nested-950-deep-in-hashed-field"),
    # Deeper than orjson writes (255) but within Python's recursion: was an internal error (500).
    pytest.param(put((*C0, "securityContext"), nested(300)), id="nested-300-deep-in-hashed-field"),
    # 20k, not more: mutation costs ~0.1 ms per container (200k take ~13 s, reported).
    pytest.param(put((*SPEC, "containers"), [{}] * 20_000), id="20k-empty-containers"),
    pytest.param(
        put((*SPEC, "volumes"), [{"name": f"v{i}", "emptyDir": {}} for i in range(50_000)]),
        id="50k-volumes",
    ),
    pytest.param(
        put((*C0, "env"), [{"name": f"E{i}", "value": "v"} for i in range(50_000)]),
        id="50k-env-vars",
    ),
    pytest.param(put((*C0, "args"), [0] * 1_000_000), id="million-element-array"),
    pytest.param(put((*META, "labels", "model"), "m" * 5_000_000), id="5mb-label-value"),
    pytest.param(put((*C0, "name"), "c" * 5_000_000), id="5mb-container-name"),
    pytest.param(
        put((*META, "annotations"), {f"k{i}": "v" for i in range(100_000)}), id="100k-annotations"
    ),
]


@pytest.mark.parametrize("edit", OBJECTS)
@pytest.mark.parametrize("endpoint", ["/mutate", "/validate"])
def test_huge_and_deep_objects_are_answered(
    https_server: RunningServer, endpoint: str, edit: Callable[[dict[str, Any]], None]
) -> None:
    answer = post(https_server, endpoint, edited(edit))
    assert_answered(answer)
    with https_server.client() as client:
        assert client.get("/healthz").status_code == 200


def test_a_denial_listing_thousands_of_values_stays_readable(https_server: RunningServer) -> None:
    # A user test pinned 5000 instance types in one affinity term: the denial was 1 MB.
    types = [f"zz{i}-standard-4" for i in range(5000)]  # 5000 unknown machine families
    term = {"matchExpressions": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                  "values": types}]}  # fmt: skip
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term] * 50}}}  # fmt: skip
    review = edited(put((*SPEC, "affinity"), affinity), put((*SPEC, "nodeSelector"), {}))
    payload = assert_answered(post(https_server, "/validate", review))
    response = payload["response"]
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert "[machine-family]" in message  # gpu-machine is a warning for unlisted types now
    assert "more problems" in message
    assert len(message) <= 4096 + 512


def test_an_oversized_uid_is_not_echoed(https_server: RunningServer) -> None:
    # The uid is echoed in the answer: a 1 MB one would let a client that never reads its
    # answers hold that much memory per request (found by a user test).
    review = copy.deepcopy(REVIEW_03)
    review["request"]["uid"] = "u" * 1_000_000
    answer = post(https_server, "/mutate", json.dumps(review).encode())
    assert answer.status_code == 400
    assert answer.json()["code"] == 400
    assert "request.uid" in answer.json()["error"]
    assert len(answer.content) < 1000


def test_duplicate_keys_are_answered_with_the_last_value(https_server: RunningServer) -> None:
    first = json.dumps({**REVIEW_03["request"], "uid": "first-uid"})
    second = json.dumps({**REVIEW_03["request"], "uid": "second-uid"})
    body = (
        '{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", '
        f'"request": {first}, "request": {second}}}'
    ).encode()
    payload = assert_answered(post(https_server, "/validate", body), uid=None)
    assert payload["response"]["uid"] == "second-uid"


def test_content_type_is_checked_before_the_body_is_parsed(https_server: RunningServer) -> None:
    with https_server.client() as client:
        answer = client.post("/validate", content=b"{not json", headers={"Content-Type": "text/x"})
    assert answer.status_code == 415
    assert "content type" in answer.json()["error"]


@pytest.mark.parametrize(
    ("length", "status"),
    [
        pytest.param("99999999999", 413, id="content-length-over-the-cap-is-413-unread"),
        pytest.param("99999999999999999999999", 400, id="content-length-beyond-64-bits-is-400"),
        pytest.param("-5", 400, id="negative-content-length-is-400"),
    ],
)
def test_bad_content_length_headers(https_server: RunningServer, length: str, status: int) -> None:
    with tls_connect(https_server) as conn:
        conn.sendall(request_head(0).replace(b": 0\r\n", f": {length}\r\n".encode()) + b"{}")
        reply = read_until_closed(conn)
    assert reply.startswith(f"HTTP/1.1 {status}".encode()), reply[:200]


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        pytest.param("GET", "/validate", 405, id="get-on-validate-is-405"),
        # The admission routes' direct dispatch (app.SnapreadyApp) takes POST only.
        pytest.param("PUT", "/mutate", 405, id="put-on-mutate-is-405"),
        pytest.param("POST", "/MUTATE", 404, id="paths-are-case-sensitive"),
        pytest.param("POST", "/healthz", 405, id="post-on-healthz-is-405"),
        pytest.param("POST", "/nope", 404, id="unknown-path-is-json-404"),
    ],
)
def test_unknown_routes_get_json_errors(
    https_server: RunningServer, method: str, path: str, status: int
) -> None:
    with https_server.client() as client:
        answer = client.request(method, path, content=b"{}", headers=JSON_HEADERS)
    assert answer.status_code == status
    assert answer.json()["code"] == status


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(put((*C0, "securityContext"), {"runAsUser": 2**60}), id="int-beyond-2-53"),
        pytest.param(put((*SPEC, "dnsPolicy"), 9007199254740992.0), id="float-beyond-2-53"),
        pytest.param(put((*C0, "securityContext"), {"runAsUser": 1.5}), id="fraction"),
    ],
)
def test_numbers_beyond_json_safe_range_in_hashed_fields(
    https_server: RunningServer, edit: Callable[[dict[str, Any]], None]
) -> None:
    # RFC 8785 (the fingerprint's canonical JSON) only represents integers up to 2**53 exactly.
    assert_answered(post(https_server, "/mutate", edited(edit)))


# ---- slow clients and limits, on servers with small limits ------------------------------------


@pytest.fixture(scope="module")
def impatient_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """A server allowing 1 s for a request's headers and 1 s for its body."""
    env = {"SNAPREADY_SERVER__REQUEST_TIMEOUT_SECONDS": "1"}
    server = start_server(tmp_path_factory.mktemp("impatient"), env=env)
    yield server
    stop_server(server)


@pytest.mark.parametrize(
    "opening",
    [
        pytest.param(b"", id="silent-after-tls-handshake"),
        pytest.param(b"POST /validate HTTP/1.1\r\nHost: loc", id="headers-trickle-then-stop"),
    ],
)
def test_slow_headers_are_cut_off(impatient_server: RunningServer, opening: bytes) -> None:
    with tls_connect(impatient_server) as conn:
        conn.sendall(opening)
        # Closed by the server after 1 s, long before the 15 s socket timeout.
        assert read_until_closed(conn) == b""


def read_one_response(conn: ssl.SSLSocket) -> bytes:
    """One Content-Length framed HTTP/1.1 response, head and body."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"content-length: (\d+)", head.lower()).group(1))  # type: ignore[union-attr]
    while len(body) < length:
        body += conn.recv(65536)
    return head + b"\r\n\r\n" + body


def test_slow_headers_after_a_keep_alive_request_are_cut_off(
    impatient_server: RunningServer,
) -> None:
    body = json.dumps(load_review("01")).encode()
    with tls_connect(impatient_server) as conn:
        conn.sendall(request_head(len(body)) + body)
        assert read_one_response(conn).startswith(b"HTTP/1.1 200")
        conn.sendall(b"POST /validate HTTP/1.1\r\n")
        assert read_until_closed(conn) == b""


def test_body_drip_gets_408_and_the_connection_is_closed(impatient_server: RunningServer) -> None:
    with tls_connect(impatient_server) as conn:
        conn.sendall(request_head(5000) + b'{"apiVersion": ')
        reply = read_until_closed(conn)
    assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
    assert b"connection: close" in reply.lower()


@pytest.fixture(scope="module")
def small_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """A server with 3 concurrent connections and 100 KiB of body bytes in flight at most."""
    env = {
        "SNAPREADY_SERVER__MAX_CONCURRENCY": "3",
        "SNAPREADY_SERVER__MAX_INFLIGHT_BODY_BYTES": str(100 * 1024),
        "SNAPREADY_SERVER__REQUEST_TIMEOUT_SECONDS": "30",
    }
    server = start_server(tmp_path_factory.mktemp("small"), env=env)
    yield server
    stop_server(server)


def test_connections_beyond_the_concurrency_bound_get_503(small_server: RunningServer) -> None:
    body = json.dumps(load_review("01")).encode()
    with contextlib.ExitStack() as stack:
        for _ in range(3):
            stack.enter_context(tls_connect(small_server))
        time.sleep(0.2)  # the server registers connections after the handshake completes
        answer = post(small_server, "/validate", body)
        assert answer.status_code == 503
    assert post(small_server, "/validate", body).status_code == 200


def test_body_bytes_beyond_the_in_flight_budget_get_503(small_server: RunningServer) -> None:
    padded = json.dumps(load_review("01")).encode() + b" " * (20 * 1024)
    with tls_connect(small_server) as holder:
        holder.sendall(request_head(95 * 1024) + b" " * (90 * 1024))  # held, not finished
        time.sleep(0.2)
        refused = post(small_server, "/validate", padded)
        assert refused.status_code == 503
        assert "in flight" in refused.json()["error"]
    time.sleep(0.2)  # the server notices the disconnect and gives the bytes back
    assert post(small_server, "/validate", padded).status_code == 200


@pytest.mark.parametrize(
    ("name", "endpoint"),
    [
        pytest.param("33", "/validate", id="storage-config-decided-in-a-worker-thread"),
        pytest.param("03", "/mutate", id="pod-decided-on-the-event-loop"),
    ],
)
def test_body_bytes_stay_in_the_budget_until_the_decision(name: str, endpoint: str) -> None:
    # The parsed object lives until the decision; a review waiting for its worker thread (a
    # slow GCS) used to have its bytes given back at once, so the budget bounded nothing there.
    app = create_app(build_engine(make_settings(storage={"enabled": False})))
    admission = app.state.admission
    decide = admission._decide
    seen: list[int] = []

    def recording(review: Any, endpoint: Any) -> Any:
        seen.append(admission.budget.used)
        return decide(review, endpoint)

    admission._decide = recording
    body = json.dumps(load_review(name)).encode()

    async def call() -> int:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="https://t") as client:
            answer = await client.post(endpoint, content=body, headers=JSON_HEADERS)
            return answer.status_code

    assert asyncio.run(call()) == 200
    assert seen == [len(body)]
    assert admission.budget.used == 0


# ---- request head size, idle connections and stalled TLS handshakes ---------------------------

HEADER_CAP = 64 * 1024  # server.max_header_bytes default


def head_of_size(kind: str, size: int) -> bytes:
    """An unfinished request head (no blank line) of exactly ``size`` bytes, made large by
    one header value, many headers, or the URL."""
    start = b"POST /validate HTTP/1.1\r\nHost: localhost\r\n"
    if kind == "url":
        start = b"POST /validate?q="
        return start + b"u" * (size - len(start))
    if kind == "one-header":
        return start + b"X-Big: " + b"v" * (size - len(start) - len(b"X-Big: "))
    line = b"X-Pad-0000: " + b"p" * 36 + b"\r\n"  # 50 bytes per header
    count, rest = divmod(size - len(start), len(line))
    headers = b"".join(line.replace(b"0000", b"%04d" % index) for index in range(count))
    return start + headers + b"X-Last: " + b"l" * max(rest - len(b"X-Last: "), 0)


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("one-header", id="one-header-value-over-the-cap-gets-431"),
        pytest.param("many-headers", id="many-small-headers-over-the-cap-get-431"),
        pytest.param("url", id="request-line-over-the-cap-gets-431"),
    ],
)
def test_request_head_over_the_cap_gets_431_and_a_close(
    https_server: RunningServer, kind: str
) -> None:
    # One byte over: the server has read everything we sent when it answers, so its close is
    # a clean TLS shutdown rather than a reset that could swallow the answer.
    head = head_of_size(kind, HEADER_CAP + 1)
    assert len(head) == HEADER_CAP + 1
    with tls_connect(https_server) as conn:
        conn.sendall(head)
        reply = read_until_closed(conn)
    assert reply.startswith(b"HTTP/1.1 431"), reply[:200]
    assert b"connection: close" in reply.lower()
    with https_server.client() as client:
        assert client.get("/healthz").status_code == 200


def test_a_complete_oversized_head_sent_at_once_gets_431(https_server: RunningServer) -> None:
    # A user test sent a whole 70 KB head (blank line included) with its body in one write: the
    # chunk completed the head, so it was never counted and the request was served.
    body = json.dumps(load_review("01")).encode()
    head = head_of_size("one-header", 70 * 1024) + b"\r\n"
    head += b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    with tls_connect(https_server) as conn:
        conn.sendall(head + body)
        reply = read_until_closed(conn)
    assert reply.startswith(b"HTTP/1.1 431"), reply[:200]


def test_request_head_under_the_cap_is_served(https_server: RunningServer) -> None:
    body = json.dumps(load_review("01")).encode()
    with https_server.client() as client:
        answer = client.post(
            "/validate", content=body, headers={**JSON_HEADERS, "X-Big": "v" * (60 * 1024)}
        )
    assert answer.status_code == 200


def test_hundreds_of_idle_connections_leave_room_for_requests(https_server: RunningServer) -> None:
    # A user test held 257 idle TLS connections (above the old default of 256): /readyz got
    # uvicorn's plain-text 503. The default must leave room for an API server's pool.
    with contextlib.ExitStack() as stack:
        for _ in range(300):
            stack.enter_context(tls_connect(https_server))
        with https_server.client() as client:
            assert client.get("/readyz").status_code == 200


@pytest.fixture(scope="module")
def tiny_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """A server with 8 connection slots that cuts off silent clients after 1 s."""
    env = {
        "SNAPREADY_SERVER__MAX_CONCURRENCY": "8",
        "SNAPREADY_SERVER__REQUEST_TIMEOUT_SECONDS": "1",
    }
    server = start_server(tmp_path_factory.mktemp("tiny"), env=env)
    yield server
    stop_server(server)


def test_idle_connections_beyond_the_limit_are_closed_and_slots_return(
    tiny_server: RunningServer,
) -> None:
    conns = [tls_connect(tiny_server, timeout=10) for _ in range(8 + 5)]
    try:
        for conn in conns:
            assert read_until_closed(conn) == b""  # closed by the server's 1 s header deadline
    finally:
        for conn in conns:
            conn.close()
    with tiny_server.client() as client:
        assert client.get("/readyz").status_code == 200


@pytest.mark.parametrize(
    "opening",
    [
        pytest.param(b"", id="tcp-connection-that-never-starts-tls"),
        pytest.param(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", id="client-hello-cut-short"),
    ],
)
def test_stalled_tls_handshakes_are_cut_off(tiny_server: RunningServer, opening: bytes) -> None:
    # asyncio's own handshake limit is 60 s; the server uses its 1 s request timeout instead.
    raws = [socket.create_connection(("127.0.0.1", port_of(tiny_server)), timeout=8)]
    raws += [socket.create_connection(("127.0.0.1", port_of(tiny_server))) for _ in range(12)]
    try:
        for raw in raws:
            raw.sendall(opening)
        raws[0].settimeout(8)
        assert raws[0].recv(1024) == b""  # closed by the server, not by the socket timeout
    finally:
        for raw in raws:
            raw.close()
    with tiny_server.client() as client:
        assert client.get("/readyz").status_code == 200
