"""Structured logs (issue: operations): one JSON line per admission, no secrets at any level.

The secret tests run a real ``snapready serve`` at ``info`` and at ``debug`` and read its output;
the field tests drive the ASGI app in-process with a rule whose finding is known.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import RunningServer, load_review, make_settings
from webhook.admission.engine import Engine
from webhook.base.types import Finding
from webhook.kube.redact import REDACTED
from webhook.kube.responses import allowed, denied
from webhook.kube.review import AdmissionReviewRequest
from webhook.pod.context import PodContext
from webhook.server.app import create_app
from webhook.server.logs import (
    JsonFormatter,
    _admission_writer,
    admission_fields,
    configure,
    flush_logs,
    log,
    log_admission,
)
from webhook.server.runner import build_engine

DB_PASSWORD = "hunter2-db-pa55w0rd-VALUE"
API_TOKEN = "tok_9f8e7d6c5b4a39281706f5e4d3c2b1a0"
ARG_SECRET = "argsecret-QWERTY-77"
# A flag and its value as separate items, and a probe header: no pattern can recognise these
# values, so redaction must replace them by position (found by a user test at debug level).
FLAG_VALUE = "SEKRIT-ARG-3333"
AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
BEARER = "Bearer probe-header-TOKEN-4444"
SECRETS = (DB_PASSWORD, API_TOKEN, ARG_SECRET, FLAG_VALUE, AWS_KEY_ID, "probe-header-TOKEN-4444")


def secret_pod_review(name: str, uid: str) -> dict[str, Any]:
    """Review 03 (selected by llm-policy) carrying secrets in env, an annotation, args and the
    last-applied-configuration annotation kubectl writes."""
    review = load_review(name)
    review["request"]["uid"] = uid
    pod = review["request"]["object"]
    container = pod["spec"]["containers"][0]
    container["env"] = [
        {"name": "DB_PASSWORD", "value": DB_PASSWORD},
        {"name": "MODE", "value": "prod"},
        {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}},
    ]
    container["args"] = [*container.get("args", []), f"--db-password={ARG_SECRET}"]
    container["args"] += ["--token", FLAG_VALUE]
    headers = [{"name": "Authorization", "value": BEARER}]
    container["readinessProbe"] = {
        "httpGet": {"path": "/ready", "port": 8080, "httpHeaders": headers}
    }
    pod["spec"]["initContainers"] = [
        {"name": "fetch", "image": "busybox:1.36", "args": ["--aws-key", AWS_KEY_ID]}
    ]
    annotations = pod["metadata"].setdefault("annotations", {})
    annotations["example.com/api-token"] = API_TOKEN
    annotations["kubectl.kubernetes.io/last-applied-configuration"] = json.dumps(
        {"spec": {"containers": [{"env": [{"name": "DB_PASSWORD", "value": DB_PASSWORD}]}]}}
    )
    return review


def log_lines(server: RunningServer) -> list[dict[str, Any]]:
    """Every JSON line the server wrote (non-JSON lines fail the test: logs are JSON only)."""
    return [json.loads(line) for line in server.log().splitlines() if line.strip()]


@pytest.mark.parametrize("level", ["info", "debug"])
def test_secrets_never_reach_the_logs(
    server_factory: Callable[..., RunningServer], level: str
) -> None:
    server = server_factory("--log-level", level)
    uids = {f"{level}-{index}" for index in range(4)}
    with server.client() as client:
        for uid, (name, endpoint) in zip(
            sorted(uids),
            [("03", "/mutate"), ("03", "/validate"), ("01", "/mutate"), ("01", "/validate")],
            strict=True,
        ):
            body = json.dumps(secret_pod_review(name, uid))
            answer = client.post(
                endpoint, content=body, headers={"Content-Type": "application/json"}
            )
            assert answer.status_code == 200
    # Admission lines are flushed on the server's 100 ms tick: wait for all of them.
    deadline = time.monotonic() + 10
    while not all(uid in server.log() for uid in uids) and time.monotonic() < deadline:
        time.sleep(0.05)
    text = server.log()
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} leaked into the {level} log"
    lines = log_lines(server)
    admissions = [line for line in lines if line["msg"] == "admission"]
    assert {line["uid"] for line in admissions} == uids
    if level == "debug":
        objects = [line for line in lines if line["msg"] == "admission object"]
        assert len(objects) == 4, "debug logs the redacted object of every review"
        dumped = json.dumps(objects)
        assert "DB_PASSWORD" in dumped and REDACTED in dumped  # redacted, not dropped
        spec = objects[0]["object"]["spec"]
        assert spec["initContainers"][0]["args"] == [REDACTED, REDACTED]  # length kept
        assert spec["containers"][0]["args"][-2:] == [REDACTED, REDACTED]
        probe = spec["containers"][0]["readinessProbe"]["httpGet"]
        assert probe["httpHeaders"] == [{"name": "Authorization", "value": REDACTED}]
    else:
        assert not [line for line in lines if line["msg"] == "admission object"]


class FindingRule:
    """A rule with one known finding, so the expected ``rules`` field is independent of the
    real rule table."""

    rule_ids: tuple[str, ...] = ("test-rule",)

    def __call__(self, pod: PodContext) -> list[Finding]:
        return [Finding(pod.spec_field("containers"), "test-rule", "fix it", "deny")]


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """The admission logger's output as JSON lines, at info."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("snapready.admission")
    logger.addHandler(handler)
    previous = logger.level
    logger.setLevel(logging.INFO)
    yield stream
    logger.setLevel(previous)
    logger.removeHandler(handler)


def admit_in_process(review: dict[str, Any], endpoint: str) -> None:
    """Run ``review`` through the ASGI app with a ``FindingRule`` engine and the log observer."""
    base = build_engine(make_settings())
    engine = Engine(settings=base.settings, state=base.state, rules=(FindingRule(),))
    app = create_app(engine, observer=log_admission)

    async def call() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="https://t") as client:
            body = json.dumps(review).encode()
            answer = await client.post(
                endpoint, content=body, headers={"Content-Type": "application/json"}
            )
            assert answer.status_code == 200

    asyncio.run(call())


@pytest.mark.parametrize(
    ("name", "endpoint", "expected"),
    [
        pytest.param(
            "03",
            "/validate",
            {
                "name": "llm-l4x4",
                "namespace": "snap",
                "kind": "Pod",
                "operation": "CREATE",
                "policy": "snap/llm-policy",
                "decision": "denied",
                # Review 03 is the mutating view: no spec-hash yet, so /validate also warns.
                "rules": ["not-stamped", "test-rule"],
            },
            id="selected-pod-denied-by-a-rule",
        ),
        pytest.param(
            "40",
            "/validate",
            {"generateName": "llm-server-b867fccc6-", "kind": "Pod", "decision": "denied"},
            id="pod-without-name-logs-its-generate-name",
        ),
        pytest.param(
            "13",
            "/validate",
            {"name": "llm-server", "kind": "Deployment", "rules": ["test-rule"]},
            id="deployment-template-findings",
        ),
        pytest.param(
            "01",
            "/mutate",
            {"name": "plain", "decision": "allowed", "rules": []},
            id="unselected-pod-allowed-without-policy",
        ),
        pytest.param(
            "03",
            "/mutate",
            {
                "name": "llm-l4x4",
                "decision": "patched",
                "policy": "snap/llm-policy",
                "mode": "enforce",
            },
            id="mutated-pod-names-its-policy-and-mode",
        ),
    ],
)
def test_one_admission_line_with_identifiers(
    captured: io.StringIO, name: str, endpoint: str, expected: dict[str, Any]
) -> None:
    review = load_review(name)
    admit_in_process(review, endpoint)
    lines = [json.loads(line) for line in captured.getvalue().splitlines()]
    assert len(lines) == 1
    line = lines[0]
    assert line["msg"] == "admission"
    assert line["level"] == "info"
    assert line["uid"] == review["request"]["uid"]
    assert line["endpoint"] == endpoint.strip("/")
    assert isinstance(line["durationMs"], float) and line["durationMs"] >= 0
    for key, value in expected.items():
        assert line[key] == value, key
    if expected.get("decision") == "allowed":
        assert "policy" not in line


def test_formatter_writes_one_json_object_with_extras_and_exception() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed %s", ("here",), None)
        record.exc_info = sys.exc_info()
    record.endpoint = "validate"
    record.fields = {"name": "pod-1"}
    line = JsonFormatter().format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["msg"] == "failed here"
    assert entry["level"] == "error"
    assert entry["endpoint"] == "validate"
    assert entry["name"] == "pod-1"
    assert "ValueError: boom" in entry["exc"]


@contextlib.contextmanager
def snapready_logging() -> Iterator[None]:
    """Logging as ``snapready serve`` configures it (``logs.configure``), undone afterwards.

    Entered inside the test body: pytest adds its own capture handlers to the root logger when
    the test call starts, which would switch the direct admission line off.
    """
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    configure("info")
    try:
        yield
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)


def test_direct_admission_line_is_the_line_logging_would_write(
    capfd: pytest.CaptureFixture[str],
) -> None:
    # Under serve's configuration the admission line skips LogRecord and handler dispatch
    # (logs._admission_writer); it must be the same line, with the same keys in the same order.
    review = AdmissionReviewRequest.model_validate(load_review("03"))
    decision = denied("no", code=403)
    with snapready_logging():
        assert _admission_writer() is not None, "the direct path is what this test is about"
        log_admission("validate", review, decision, 0.0042)
        flush_logs()
    direct = capfd.readouterr().err.splitlines()
    assert len(direct) == 1
    fields = admission_fields("validate", review, decision, 0.0042)
    record = logging.makeLogRecord(
        {"name": "snapready.admission", "levelno": logging.INFO, "levelname": "INFO",
         "msg": "admission", "fields": fields}
    )  # fmt: skip
    through_logging = json.loads(JsonFormatter().format(record))
    line = json.loads(direct[0])
    assert list(line) == list(through_logging)
    assert {**line, "time": None} == {**through_logging, "time": None}
    assert line["uid"] == review.request.uid and line["decision"] == "denied"


def test_admission_lines_go_through_logging_when_another_handler_listens(
    capfd: pytest.CaptureFixture[str],
) -> None:
    # A handler added after configure() (an embedding application, pytest's caplog) must see
    # every admission line: the direct path is then off.
    review = AdmissionReviewRequest.model_validate(load_review("01"))
    stream = io.StringIO()
    listener = logging.StreamHandler(stream)
    listener.setFormatter(JsonFormatter())
    with snapready_logging():
        log.addHandler(listener)
        try:
            log_admission("mutate", review, allowed(), 0.001)
        finally:
            log.removeHandler(listener)
        flush_logs()
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["uid"] for line in lines] == [review.request.uid]
    stderr = [json.loads(line) for line in capfd.readouterr().err.splitlines()]
    assert [line["uid"] for line in stderr] == [review.request.uid]  # root handler, once


def test_error_review_for_a_known_uid_is_logged(captured: io.StringIO) -> None:
    # A broken review whose uid can be read gets an error review (HTTP 200); it must still leave
    # a line saying it was refused and why (found by a user test: nothing was logged).
    review = load_review("01")
    review["request"]["operation"] = "NOPE"
    app = create_app(build_engine(make_settings()), observer=log_admission)

    async def call() -> dict[str, Any]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="https://t") as client:
            answer = await client.post(
                "/validate",
                content=json.dumps(review).encode(),
                headers={"Content-Type": "application/json"},
            )
            payload: dict[str, Any] = answer.json()
            return payload

    payload = asyncio.run(call())
    assert payload["response"]["uid"] == review["request"]["uid"]
    assert payload["response"]["allowed"] is False
    lines = [json.loads(line) for line in captured.getvalue().splitlines()]
    assert len(lines) == 1
    assert lines[0]["msg"].startswith("rejected request: ")
    assert "operation" in lines[0]["msg"]
    assert lines[0]["uid"] == review["request"]["uid"]
    assert lines[0]["code"] == 400
