"""Cluster caches against ``FakeApiServer``: only the failures a real API server cannot be made
to produce on demand.

Everything a real kube-apiserver does (list + watch of every cache, bookmarks, 410 Gone as a watch
event, 403, 404 and CRDs appearing or disappearing, /version, shutdown with open watches) is tested
against the envtest control plane in ``test_real_apiserver*.py``. What stays here is injected: a
watch connection cut mid-stream, 410 as the HTTP status of a watch request, an API server that
stops answering, 500 and 429 answers, and a missing kubeconfig. The engine is built by
``server.open_source`` with ``source.kind = kube`` (the wiring ``serve`` uses); a test rule that
reports one ``deny`` finding on every pod it sees makes "selected by a policy" visible.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import load_review, make_settings
from tests.support.fake_apiserver import (
    NODES,
    POLICIES,
    FakeApiServer,
    items_named,
    load,
    load_events,
    with_resource_version,
)
from tests.support.kube_real import SelectedRule, pod_review, selected_by, validate
from webhook.admission.engine import Engine
from webhook.base.errors import ConfigError
from webhook.cluster.api.caches import resources
from webhook.server.app import AdmissionApp
from webhook.server.runner import PolicySource, build_engine, open_source
from webhook.snapshots.state import ClusterState

POLICY_EVENTS = load_events("podsnapshotpolicies-watch.jsonl")
TOO_OLD = load_events("podsnapshotpolicies-watch-too-old.jsonl")[0]
Started = Callable[..., Engine]


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    """A fresh fake API server serving every capture (ComputeClasses not served)."""
    with FakeApiServer() as server:
        yield server


@pytest.fixture
def start(api: FakeApiServer, tmp_path: Path) -> Iterator[Started]:
    """Build kube-mode engines against ``api`` (tiny backoff); all are stopped afterwards."""
    sources: list[PolicySource] = []

    def factory(wait: bool = True, **source: Any) -> Engine:
        settings = make_settings(
            source={
                "kind": "kube",
                "kubeconfig": api.kubeconfig(tmp_path),
                "backoff_initial_seconds": 0.01,
                "backoff_max_seconds": 0.05,
                **source,
            }
        )
        started = open_source(settings)
        sources.append(started)
        engine = dataclasses.replace(started.engine, rules=(SelectedRule(),))
        if wait:
            api.wait_for(lambda: engine.state().synced)
        return engine

    yield factory
    for started in sources:
        started.stop()


def _policy_named(state: ClusterState, name: str) -> Any:
    return next((p for p in state.policies.all() if p.name == name), None)


def test_broken_watch_connection_resumes_from_last_resource_version(
    api: FakeApiServer, start: Started
) -> None:
    """The stream is cut mid-way (no final chunk); a server that closes a watch cleanly after its
    bookmarks is the real-server test ``test_watch_resumes_from_the_servers_bookmark``."""
    engine = start()
    api.wait_for(lambda: bool(api.requests(POLICIES, watch=True)))
    first_watch = api.requests(POLICIES, watch=True)[0].query
    assert first_watch["resourceVersion"] == "645"  # the list's resourceVersion
    assert first_watch["allowWatchBookmarks"] == "true"
    bookmark = with_resource_version(POLICY_EVENTS[-1], "655")
    api.push(POLICIES, *POLICY_EVENTS, bookmark)
    api.drop(POLICIES, abrupt=True)
    api.wait_for(lambda: len(api.requests(POLICIES, watch=True)) == 2)
    resumed = api.requests(POLICIES, watch=True)[1].query
    assert resumed["resourceVersion"] == "655"  # the last BOOKMARK seen
    assert len(api.requests(POLICIES, watch=False)) == 1, "resumed, not relisted"
    assert _policy_named(engine.state(), "batch-policy") is None  # ADDED then DELETED


def test_gone_as_http_status_of_the_watch_request_relists(
    api: FakeApiServer, start: Started
) -> None:
    """410 as the watch request's HTTP status (a proxy, an older server); the real API server
    sends it as an ERROR event in the stream: ``test_too_old_resource_version_gets_410...``."""
    engine = start()
    fresh = load("podsnapshotpolicies-list.json")
    fresh["items"] = items_named(fresh, ["web-policy"])
    fresh["metadata"]["resourceVersion"] = "700"
    api.routes[POLICIES] = fresh
    api.fail_next(POLICIES, 410, json.dumps(TOO_OLD["object"]).encode())
    api.drop(POLICIES)
    api.wait_for(lambda: len(api.requests(POLICIES, watch=False)) == 2)
    api.wait_for(lambda: [p.name for p in engine.state().policies.all()] == ["web-policy"])
    api.wait_for(lambda: api.requests(POLICIES, watch=True)[-1].query["resourceVersion"] == "700")


def test_slow_api_server_admission_answers_from_cache(api: FakeApiServer, start: Started) -> None:
    engine = start()
    api.wait_for(lambda: bool(api.requests(POLICIES, watch=True)))
    api.hold(POLICIES)  # the API server stops answering policy requests
    api.push(POLICIES, TOO_OLD)  # forces a relist, which now hangs
    api.wait_for(lambda: len(api.requests(POLICIES, watch=False)) == 2)
    llm = validate(engine, pod_review({"app": "llm"}))
    assert (llm.allowed, selected_by(llm)) == (False, "llm-policy")
    assert selected_by(validate(engine, pod_review({"app": "batch"}))) is None
    assert AdmissionApp(engine).ready()[0], "a cache that synced once stays ready"
    api.release(POLICIES)


@pytest.mark.parametrize(
    "status",
    [
        pytest.param(500, id="retries-after-500"),
        pytest.param(429, id="retries-after-429-too-many-requests"),
    ],
)
def test_list_errors_back_off_then_sync(api: FakeApiServer, start: Started, status: int) -> None:
    body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": status})
    api.fail_next(NODES, status, body.encode())
    api.fail_next(NODES, status, body.encode())
    engine = start()
    assert len(api.requests(NODES, watch=False)) == 3
    assert engine.state().details["nodes"] == "synced"


def test_missing_kubeconfig_is_a_config_error(tmp_path: Path) -> None:
    settings = make_settings(source={"kind": "kube", "kubeconfig": tmp_path / "absent"})
    with pytest.raises(ConfigError, match="cannot load kubeconfig"):
        build_engine(settings)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        pytest.param("garbage: [unclosed\n", "invalid YAML at line 2, column 1", id="broken-yaml"),
        pytest.param("- a\n", "not a kubeconfig", id="a-list-not-a-mapping"),
    ],
)
def test_a_kubeconfig_that_is_not_one_is_a_one_line_config_error(
    tmp_path: Path, text: str, says: str
) -> None:
    """``serve`` (through ``build_engine``) and ``status``/``explain`` (``connect``) answer a
    broken kubeconfig with one line naming the file and what is wrong, never a parser's
    several lines or a traceback."""
    from webhook.cluster.api.client import connect  # noqa: PLC0415

    path = tmp_path / "kubeconfig"
    path.write_text(text)
    settings = make_settings(source={"kind": "kube", "kubeconfig": path})
    with pytest.raises(ConfigError) as served:
        build_engine(settings)
    with pytest.raises(ConfigError) as connected:
        connect(path, request_timeout=5)
    for raised in (served.value, connected.value):
        assert says in str(raised) and str(path) in str(raised)
        assert "\n" not in str(raised)


@pytest.mark.parametrize(
    ("labels", "logged"),
    [
        pytest.param({"snapready.io/enforcement": "audti"}, True, id="a-typo"),
        pytest.param({"snapready.io/enforcement": "audit"}, False, id="a-mode"),
        pytest.param({"snapready.io/ignore": "true"}, False, id="no-enforcement-label"),
    ],
)
def test_a_namespace_enforcement_label_that_is_no_mode_is_logged(
    caplog: pytest.LogCaptureFixture, labels: dict[str, str], logged: bool
) -> None:
    # Admission ignores it (the namespace's pods keep the global mode); no webhook of ours sees
    # a Namespace, so the cache that reads it says so.
    [namespaces] = [r for r in resources("snapready.io/") if r.name == "namespaces"]
    namespace = {"kind": "Namespace", "metadata": {"name": "team-a", "labels": labels}}
    with caplog.at_level(logging.WARNING, logger="snapready.kube"):
        assert namespaces.convert(namespace) == labels
    said = [r.getMessage() for r in caplog.records]
    if logged:
        assert said == [
            "Namespace team-a: label snapready.io/enforcement='audti' is not enforce, warn or "
            "audit: ignored (its pods follow their policies' annotations, else the global mode)"
        ]
    else:
        assert said == []


def test_a_policy_enforcement_annotation_that_is_no_mode_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # One created before snapready was installed was never warned by policy-enforcement.
    [policies] = [r for r in resources("snapready.io/") if r.name == "podsnapshotpolicies"]
    policy = load_review("34")["request"]["object"]
    policy["metadata"]["annotations"]["snapready.io/enforcement"] = "audti"
    with caplog.at_level(logging.WARNING, logger="snapready.kube"):
        assert policies.convert(policy).enforcement == "audti"
    assert [r.getMessage() for r in caplog.records] == [
        "PodSnapshotPolicy snap/llm-policy: annotation snapready.io/enforcement='audti' is not "
        "enforce, warn or audit: ignored (its pods follow the namespace label, else the global "
        "mode)"
    ]


def test_a_namespace_enforcement_typo_is_said_once_per_value_not_per_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The trial: ten unrelated changes to the namespace logged the same warning eleven times.
    [namespaces] = [r for r in resources("snapready.io/") if r.name == "namespaces"]

    def event(value: str, other: str) -> dict[str, Any]:
        labels = {"snapready.io/enforcement": value, "team": other}
        return {"kind": "Namespace", "metadata": {"name": "team-a", "labels": labels}}

    with caplog.at_level(logging.WARNING, logger="snapready.kube"):
        for number in range(10):
            namespaces.convert(event("audti", str(number)))
        namespaces.convert(event("enforc", "x"))  # another typo: said
        namespaces.convert(event("audit", "x"))  # fixed
        namespaces.convert(event("enforc", "y"))  # the typo again: said again
    said = [r.getMessage().split("=")[1].split(" ")[0] for r in caplog.records]
    assert said == ["'audti'", "'enforc'", "'enforc'"]
