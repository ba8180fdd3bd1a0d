"""The AdmissionReview wire contract, end to end over real HTTPS (issue: admission service core).

Every captured review from ``tests/data/reviews/`` is posted to a real ``snapready serve``
subprocess on both endpoints; edge cases are checked byte-for-byte at the HTTP layer.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from tests.conftest import (
    RunningServer,
    load_review,
    make_settings,
    review_files,
    ssl_context,
)
from tests.support.ports import free_port
from webhook.admission.engine import Engine
from webhook.base.types import Finding
from webhook.pod.context import PodContext
from webhook.server import certs
from webhook.server.app import create_app
from webhook.server.runner import build_engine

JSON_HEADERS = {"Content-Type": "application/json"}


def post(client: httpx.Client, path: str, review: Any, **kwargs: Any) -> httpx.Response:
    """POST ``review`` (a dict, or raw bytes) as JSON."""
    body = review if isinstance(review, bytes) else json.dumps(review).encode()
    return client.post(
        path, content=body, headers={**JSON_HEADERS, **kwargs.pop("headers", {})}, **kwargs
    )


def assert_review_shape(answer: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """The contract every answer obeys; returns ``answer["response"]``."""
    assert answer["apiVersion"] == request["apiVersion"]
    assert answer["kind"] == "AdmissionReview"
    response: dict[str, Any] = answer["response"]
    assert response["uid"] == request["request"]["uid"]
    assert isinstance(response["allowed"], bool)
    if "patch" in response:
        assert response["patchType"] == "JSONPatch"
        ops = json.loads(base64.b64decode(response["patch"]))
        assert isinstance(ops, list) and ops, "a patch, when present, is a non-empty op list"
    else:
        assert "patchType" not in response
    return response


@pytest.mark.parametrize("path", review_files(), ids=lambda p: p.stem)
@pytest.mark.parametrize("endpoint", ["/mutate", "/validate"])
def test_every_captured_review_gets_a_well_formed_answer(
    https_server: RunningServer, path: Path, endpoint: str
) -> None:
    request = json.loads(path.read_text())
    with https_server.client() as client:
        answer = post(client, endpoint, request)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    response = assert_review_shape(answer.json(), request)
    if endpoint == "/validate":
        assert "patch" not in response, "validating responses never carry a patch"


def test_v1beta1_review_is_answered_as_v1beta1(https_server: RunningServer) -> None:
    request = load_review("01")
    request["apiVersion"] = "admission.k8s.io/v1beta1"
    with https_server.client() as client:
        answer = post(client, "/validate", request).json()
    assert answer["apiVersion"] == "admission.k8s.io/v1beta1"
    assert answer["response"]["uid"] == request["request"]["uid"]


def test_unselected_pod_gets_no_patch_on_mutate(https_server: RunningServer) -> None:
    request = load_review("01")  # run=plain: no example policy selects it
    with https_server.client() as client:
        response = post(client, "/mutate", request).json()["response"]
    assert response == {"uid": request["request"]["uid"], "allowed": True}


@pytest.mark.parametrize(
    ("body", "content_type", "fragment"),
    [
        pytest.param(b"", JSON_HEADERS["Content-Type"], "empty body", id="rejects-empty-body"),
        pytest.param(b"{not json", "application/json", "not valid JSON", id="rejects-invalid-json"),
        pytest.param(b"[1, 2]", "application/json", "not a JSON object", id="rejects-json-array"),
        pytest.param(
            b'{"kind": "Pod"}', "application/json", "apiVersion", id="rejects-non-review-object"
        ),
        pytest.param(
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}',
            "application/json",
            "request",
            id="rejects-review-without-request",
        ),
    ],
)
def test_broken_requests_get_http_400_with_a_json_error(
    https_server: RunningServer, body: bytes, content_type: str, fragment: str
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    with https_server.client() as client:
        answer = client.post("/validate", content=body, headers=headers)
    assert answer.status_code == 400
    error = answer.json()
    assert error["code"] == 400
    assert fragment in error["error"]


@pytest.mark.parametrize("content_type", ["text/plain", "application/yaml", ""])
def test_a_body_not_sent_as_json_gets_http_415(
    https_server: RunningServer, content_type: str
) -> None:
    """RFC 9110 15.5.16: a media type the endpoint does not take is 415, not a generic 400; the
    API server always sends application/json, so only a stray client sees this."""
    headers = {"Content-Type": content_type} if content_type else {}
    with https_server.client() as client:
        answer = client.post("/validate", content=json.dumps(load_review("01")), headers=headers)
    assert answer.status_code == 415
    error = answer.json()
    assert error["code"] == 415
    assert "content type must be application/json" in error["error"]
    said = f"got {content_type!r}" if content_type else "the request has none"
    assert error["error"].endswith(said)


def test_two_content_type_headers_are_a_400(https_server: RunningServer) -> None:
    """Content-Type is a singleton field (RFC 9110 5.3, 8.3): with two, the webhook refuses the
    request instead of judging the body by one of them (a proxy in front may have read the
    other)."""
    body = json.dumps(load_review("01")).encode()
    for pair in (("application/json", "text/plain"), ("text/plain", "application/json")):
        headers = [("Content-Type", value) for value in pair]
        with https_server.client() as client:
            answer = client.post("/validate", content=body, headers=headers)
        assert answer.status_code == 400, pair
        error = answer.json()
        assert error["code"] == 400
        assert "2 Content-Type headers" in error["error"]
    with https_server.client() as client:  # one header, as the API server sends: answered
        answer = client.post("/validate", content=body, headers=JSON_HEADERS)
    assert answer.status_code == 200


def test_review_without_uid_is_a_400(https_server: RunningServer) -> None:
    request = load_review("01")
    del request["request"]["uid"]
    with https_server.client() as client:
        answer = post(client, "/validate", request)
    assert answer.status_code == 400
    assert "uid" in answer.json()["error"]


def test_malformed_review_with_known_uid_gets_an_error_review(https_server: RunningServer) -> None:
    request = load_review("03")
    request["request"]["operation"] = "EXPLODE"
    with https_server.client() as client:
        answer = post(client, "/validate", request)
    assert answer.status_code == 200
    response = assert_review_shape(answer.json(), request)
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    assert response["status"]["reason"] == "BadRequest"
    assert "operation" in response["status"]["message"]


def test_malformed_embedded_object_is_answered_with_uid(https_server: RunningServer) -> None:
    request = load_review("03")
    request["request"]["object"] = ["not", "an", "object"]
    with https_server.client() as client:
        answer = post(client, "/mutate", request)
    assert answer.status_code == 200
    response = assert_review_shape(answer.json(), request)
    assert response["allowed"] is False


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
@pytest.mark.parametrize("path", ["/mutate", "/validate"])
def test_a_create_or_update_without_its_object_is_a_bad_request(
    https_server: RunningServer, path: str, operation: str
) -> None:
    # The API server always sends the object of a CREATE or UPDATE; one without is no pod to
    # allow (it was answered allowed, unjudged).
    request = load_review("03")
    request["request"].update(object=None, operation=operation)
    if operation == "UPDATE":
        request["request"]["oldObject"] = load_review("03")["request"]["object"]
    with https_server.client() as client:
        answer = post(client, path, request)
    assert answer.status_code == 200
    response = assert_review_shape(answer.json(), request)
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    assert response["status"]["message"].endswith(f"request.object is required for {operation}")


def test_oversize_body_with_content_length_is_413(https_server: RunningServer) -> None:
    body = b'{"pad": "' + b"x" * (7 * 1024 * 1024 + 10) + b'"}'
    with https_server.client() as client:
        answer = client.post("/validate", content=body, headers=JSON_HEADERS)
    assert answer.status_code == 413
    assert "limit" in answer.json()["error"]


def test_oversize_chunked_body_is_413(https_server: RunningServer) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"pad": "'
        for _ in range(8):
            yield b"x" * (1024 * 1024)
        yield b'"}'

    with https_server.client() as client:
        answer = client.post("/validate", content=chunks(), headers=JSON_HEADERS)
    assert answer.status_code == 413


def binding(annotations: dict[str, str]) -> dict[str, Any]:
    """The request fields of a ``pods/binding`` CREATE of a Binding with ``annotations``."""
    return {
        "subResource": "binding",
        "kind": {"group": "", "version": "v1", "kind": "Binding"},
        "object": {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "p", "annotations": annotations},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"},
        },
    }


@pytest.mark.parametrize(
    ("mutate", "why"),
    [
        pytest.param(
            lambda r: r["request"].update(
                object=None, operation="DELETE", oldObject=load_review("03")["request"]["object"]
            ),
            "delete",
            id="allows-delete-with-null-object",
        ),
        pytest.param(
            lambda r: r["request"].update(subResource="status", operation="UPDATE"),
            "status",
            id="allows-status-subresource",
        ),
        pytest.param(
            lambda r: r["request"].update(**binding({"team": "a"})),
            "binding",
            id="allows-a-binding-without-snapready-annotations",
        ),
        pytest.param(
            lambda r: r["request"].update(**binding({"snapready.io/x": "y"}), operation="UPDATE"),
            "binding update",  # bindings are created; nothing else is judged
            id="allows-a-binding-that-is-not-a-create",
        ),
        pytest.param(
            lambda r: r["request"].update(kind={"group": "", "version": "v1", "kind": "ConfigMap"}),
            "configmap",
            id="allows-unhandled-kind",
        ),
    ],
)
def test_paths_without_work_are_allowed_without_patch(
    https_server: RunningServer, mutate: Any, why: str
) -> None:
    request = load_review("03")
    mutate(request)
    with https_server.client() as client:
        for endpoint in ("/mutate", "/validate"):
            response = assert_review_shape(post(client, endpoint, request).json(), request)
            assert response["allowed"] is True, why
            assert "patch" not in response, why


def test_health_and_readiness(https_server: RunningServer) -> None:
    with https_server.client() as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["ready"] is True
    # manifests/examples/policies.yaml holds one PodSnapshotPolicy (llm-policy): a count is a
    # JSON number, as a monitoring probe or jq would compare it.
    assert ready.json()["policies"] == 1


def test_probes_answer_head_like_get_without_a_body(https_server: RunningServer) -> None:
    """RFC 9110 9.3.2: HEAD gets GET's status and headers and no body (load balancers and
    uptime checkers probe with HEAD); the admission endpoints stay POST only."""
    with https_server.client() as client:
        for path in ("/healthz", "/readyz"):
            get, head = client.get(path), client.head(path)
            assert head.status_code == get.status_code == 200, path
            assert head.content == b"", path
            for header in ("content-type", "content-length"):
                assert head.headers[header] == get.headers[header], (path, header)
        assert client.head("/mutate").status_code == 405


def test_api_server_timeout_query_is_accepted(https_server: RunningServer) -> None:
    # The API server calls webhooks as <path>?timeout=<n>s (the webhook's timeoutSeconds).
    request = load_review("03")
    with https_server.client() as client:
        answer = post(client, "/mutate?timeout=10s", request)
    response = assert_review_shape(answer.json(), request)
    assert response["patchType"] == "JSONPatch"


def test_trailing_slash_is_not_redirected(https_server: RunningServer) -> None:
    with https_server.client() as client:
        answer = post(client, "/mutate/", load_review("01"))
    assert answer.status_code == 404
    assert answer.json()["code"] == 404


def test_plain_http_is_not_served(https_server: RunningServer) -> None:
    plain = https_server.base_url.replace("https://", "http://")
    with pytest.raises(httpx.HTTPError):
        httpx.get(plain + "/healthz", timeout=5)


class ExplodingRule:
    """A rule that raises, to exercise the internal-error path."""

    rule_ids: tuple[str, ...] = ("explode",)

    def __call__(self, pod: PodContext) -> list[Finding]:
        raise RuntimeError("boom " + pod.kind)


@pytest.fixture(params=["Fail", "Ignore"])
def exploding_server(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[str, Path, str]]:
    """A real uvicorn HTTPS server in a thread whose engine has a raising rule."""
    paths = certs.generate(tmp_path / "certs")
    settings = make_settings(failure_policy=request.param)
    base = build_engine(settings)
    engine = Engine(settings=settings, state=base.state, rules=(ExplodingRule(),))
    port = free_port()
    config = uvicorn.Config(
        create_app(engine),
        host="127.0.0.1",
        port=port,
        log_config=None,
        ssl_certfile=str(paths.tls_cert),
        ssl_keyfile=str(paths.tls_key),
        lifespan="off",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield f"https://127.0.0.1:{port}", paths.ca_cert, request.param
    server.should_exit = True
    thread.join(10)


def test_internal_error_answers_by_failure_policy_with_uid(
    exploding_server: tuple[str, Path, str],
) -> None:
    url, ca, failure_policy = exploding_server
    request = load_review("03")  # selected by llm-policy, so the rules run
    with httpx.Client(base_url=url, verify=ssl_context(ca), timeout=10) as client:
        answer = post(client, "/validate", request)
    assert answer.status_code == 200
    response = assert_review_shape(answer.json(), request)
    if failure_policy == "Fail":
        assert response["allowed"] is False
        assert response["status"]["code"] == 500
        assert response["status"]["reason"] == "InternalError"
        assert "internal error" in response["status"]["message"]
    else:
        assert response["allowed"] is True
        assert any("internal error" in w for w in response["warnings"])
