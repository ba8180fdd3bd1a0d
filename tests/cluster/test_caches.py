"""Cluster caches: the real ``kubernetes`` client against ``FakeApiServer`` replaying the real JSON.

The engine is built by ``server.build_engine`` with ``source.kind = kube`` (the wiring ``serve``
uses). A test rule that reports one ``deny`` finding on every pod it sees makes "selected by a
policy" visible as a denial, so policy and namespace events show up as changed decisions.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import load_review, make_settings
from tests.support.fake_apiserver import (
    COMPUTE_CLASSES,
    NAMESPACES,
    NODES,
    POLICIES,
    POLICIES_V1ALPHA1,
    FakeApiServer,
    items_named,
    load,
    load_events,
    with_resource_version,
)
from webhook.admission.engine import Engine, admit
from webhook.base.errors import ConfigError
from webhook.base.types import Finding
from webhook.cluster.client import open_cluster_source
from webhook.kube.responses import Decision
from webhook.kube.review import parse_review
from webhook.kube.state import ClusterState
from webhook.pod.context import PodContext
from webhook.server.app import AdmissionApp
from webhook.server.metrics import Metrics
from webhook.server.runner import build_engine, stop_source

POLICY_EVENTS = load_events("podsnapshotpolicies-watch.jsonl")
TOO_OLD = load_events("podsnapshotpolicies-watch-too-old.jsonl")[0]


class SelectedRule:
    """Test rule: one ``deny`` finding naming the selecting policies, on every selected pod."""

    rule_ids: tuple[str, ...] = ("test-selected",)

    def __call__(self, pod: PodContext) -> list[Finding]:
        names = ",".join(p.name for p in pod.policies)
        return [Finding(pod.spec_field("containers"), "test-selected", names, "deny")]


Started = Callable[..., Engine]


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    """A fresh fake API server serving every capture (ComputeClasses not served)."""
    with FakeApiServer() as server:
        yield server


@pytest.fixture
def start(api: FakeApiServer, tmp_path: Path) -> Iterator[Started]:
    """Build kube-mode engines against ``api`` (tiny backoff); all are stopped afterwards."""
    engines: list[Engine] = []

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
        engine = dataclasses.replace(build_engine(settings), rules=(SelectedRule(),))
        engines.append(engine)
        if wait:
            api.wait_for(lambda: engine.state().synced)
        return engine

    yield factory
    for engine in engines:
        stop_source(engine)


def validate(engine: Engine, review: dict[str, Any]) -> Decision:
    """Run ``review`` through ``admit`` on the validating endpoint."""
    request = parse_review(json.dumps(review).encode()).request
    return admit(request, "validate", engine)


def pod_review(labels: dict[str, str], namespace: str = "snap") -> dict[str, Any]:
    """Review 03 (gVisor, 4 x L4) with other labels and namespace."""
    review = load_review("03")
    review["request"]["namespace"] = namespace
    review["request"]["object"]["metadata"]["labels"] = labels
    review["request"]["object"]["metadata"]["namespace"] = namespace
    return review


def selected_by(decision: Decision) -> str | None:
    """The policy names the test rule reported (denial or warning), None when not selected."""
    findings = decision.audit.get("findings") or []
    names = [f.message for f in findings if f.rule == "test-selected"]
    return names[0] if names else None


def namespace_event(kind: str, name: str, extra: dict[str, str], version: str) -> dict[str, Any]:
    """A watch event for the captured Namespace ``name`` with ``extra`` labels added."""
    namespace = items_named(load("namespaces-list.json"), [name])[0]
    namespace["metadata"]["labels"].update(extra)
    namespace["metadata"]["resourceVersion"] = version
    return {"type": kind, "object": {"kind": "Namespace", "apiVersion": "v1", **namespace}}


def test_ready_only_after_every_cache_synced(api: FakeApiServer, start: Started) -> None:
    api.hold(NODES)
    engine = start(wait=False)
    api.wait_for(lambda: engine.state().details.get("podsnapshotpolicies") == "synced")
    ready, details = AdmissionApp(engine).ready()
    assert (ready, details["nodes"]) == (False, "syncing")
    api.release(NODES)
    api.wait_for(lambda: engine.state().synced)
    ready, details = AdmissionApp(engine).ready()
    assert ready
    assert details["computeclasses"] == "not served"
    assert details["gkeVersion"] == "1.35.3-gke.1234000"


def test_initial_sync_holds_only_the_compact_facts(api: FakeApiServer, start: Started) -> None:
    state = start().state()
    assert [(p.namespace, p.name) for p in state.policies.all()] == [
        ("snap", "llm-policy"),
        ("snap", "web-policy"),
    ]
    assert state.storage_configs["snapshots-us-central1"].bucket == "my-project-pod-snapshots"
    assert sorted(state.node_pools) == ["a100-mig-pool", "e2-pool", "l4-sandbox-pool"]
    assert state.node_pools["l4-sandbox-pool"].instance_types == {"g2-standard-48"}
    assert state.compute_classes is None  # not served: unknown, not empty
    assert state.namespace_labels == {}  # no namespace carries a snapready.io/ label
    assert state.gke_version == "1.35.3-gke.1234000"
    assert all(seen.authorized for seen in api.seen), "bearer token from the kubeconfig is sent"


def _policy_named(state: ClusterState, name: str) -> Any:
    return next((p for p in state.policies.all() if p.name == name), None)


def test_policy_added_modified_deleted_change_decisions(api: FakeApiServer, start: Started) -> None:
    engine = start()
    batch_pod = pod_review({"app": "batch"})
    assert validate(engine, batch_pod).allowed
    added, modified, deleted, *_ = POLICY_EVENTS
    api.push(POLICIES, added)
    api.wait_for(lambda: _policy_named(engine.state(), "batch-policy") is not None)
    decision = validate(engine, batch_pod)
    assert (decision.allowed, selected_by(decision)) == (False, "batch-policy")
    assert _policy_named(engine.state(), "batch-policy").trigger_type == "manual"
    api.push(POLICIES, modified)
    api.wait_for(lambda: _policy_named(engine.state(), "batch-policy").trigger_type == "workload")
    api.push(POLICIES, deleted)
    api.wait_for(lambda: _policy_named(engine.state(), "batch-policy") is None)
    decision = validate(engine, batch_pod)
    assert (decision.allowed, selected_by(decision)) == (True, None)


def test_namespace_events_change_decisions(api: FakeApiServer, start: Started) -> None:
    engine = start()
    llm_pod = pod_review({"app": "llm", "model": "llama-3-8b-instruct"})
    assert not validate(engine, llm_pod).allowed  # enforce: the test finding denies

    def labels() -> dict[str, str]:
        return dict(engine.state().namespace_labels.get("snap") or {})

    api.push(
        NAMESPACES, namespace_event("MODIFIED", "snap", {"snapready.io/enforcement": "warn"}, "700")
    )
    api.wait_for(lambda: labels() == {"snapready.io/enforcement": "warn"})
    decision = validate(engine, llm_pod)
    assert decision.allowed
    assert any("[test-selected]" in line for line in decision.warnings)

    api.push(
        NAMESPACES, namespace_event("MODIFIED", "snap", {"snapready.io/ignore": "true"}, "701")
    )
    api.wait_for(lambda: labels() == {"snapready.io/ignore": "true"})
    decision = validate(engine, llm_pod)
    assert (decision.allowed, decision.warnings, selected_by(decision)) == (True, (), None)

    api.push(NAMESPACES, namespace_event("DELETED", "snap", {"snapready.io/ignore": "true"}, "702"))
    api.wait_for(lambda: "snap" not in engine.state().namespace_labels)
    assert not validate(engine, llm_pod).allowed

    api.push(NAMESPACES, namespace_event("ADDED", "snap", {"snapready.io/ignore": "true"}, "703"))
    api.wait_for(lambda: labels() == {"snapready.io/ignore": "true"})
    assert selected_by(validate(engine, llm_pod)) is None


@pytest.mark.parametrize(
    "abrupt",
    [
        pytest.param(False, id="server-closed-watch-resumes"),
        pytest.param(True, id="broken-connection-resumes"),
    ],
)
def test_dropped_watch_resumes_from_last_resource_version(
    api: FakeApiServer, start: Started, abrupt: bool
) -> None:
    engine = start()
    api.wait_for(lambda: bool(api.requests(POLICIES, watch=True)))
    first_watch = api.requests(POLICIES, watch=True)[0].query
    assert first_watch["resourceVersion"] == "645"  # the list's resourceVersion
    assert first_watch["allowWatchBookmarks"] == "true"
    bookmark = with_resource_version(POLICY_EVENTS[-1], "655")
    api.push(POLICIES, *POLICY_EVENTS, bookmark)
    api.drop(POLICIES, abrupt=abrupt)
    api.wait_for(lambda: len(api.requests(POLICIES, watch=True)) == 2)
    resumed = api.requests(POLICIES, watch=True)[1].query
    assert resumed["resourceVersion"] == "655"  # the last BOOKMARK seen
    assert len(api.requests(POLICIES, watch=False)) == 1, "resumed, not relisted"
    assert _policy_named(engine.state(), "batch-policy") is None  # ADDED then DELETED


@pytest.mark.parametrize(
    "how",
    [
        pytest.param("error-event", id="410-error-event-in-stream-relists"),
        pytest.param("http-status", id="410-status-on-watch-request-relists"),
    ],
)
def test_gone_relists_and_watches_from_the_new_list(
    api: FakeApiServer, start: Started, how: str
) -> None:
    engine = start()
    fresh = load("podsnapshotpolicies-list.json")
    fresh["items"] = items_named(fresh, ["web-policy"])
    fresh["metadata"]["resourceVersion"] = "700"
    api.routes[POLICIES] = fresh
    if how == "error-event":
        api.push(POLICIES, TOO_OLD)
    else:
        api.fail_next(POLICIES, 410, json.dumps(TOO_OLD["object"]).encode())
        api.drop(POLICIES)
    api.wait_for(lambda: len(api.requests(POLICIES, watch=False)) == 2)
    api.wait_for(lambda: [p.name for p in engine.state().policies.all()] == ["web-policy"])
    api.wait_for(lambda: api.requests(POLICIES, watch=True)[-1].query["resourceVersion"] == "700")


def test_crd_not_served_counts_as_synced_and_is_logged_once(
    api: FakeApiServer, start: Started, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="snapready.kube")
    del api.routes[POLICIES]
    engine = start(resync_seconds=0.02)  # re-check the missing APIs every 20 ms
    api.wait_for(lambda: len(api.requests(COMPUTE_CLASSES)) >= 3)
    state = engine.state()
    assert state.synced
    assert state.details["podsnapshotpolicies"] == "not served"
    assert state.details["computeclasses"] == "not served"
    assert len(state.policies) == 0
    assert state.compute_classes is None
    assert validate(engine, pod_review({"app": "llm"})).allowed
    warned = [r for r in caplog.records if "computeclasses: not served" in r.getMessage()]
    assert len(warned) == 1


def test_policies_fall_back_to_v1alpha1(api: FakeApiServer, start: Started) -> None:
    listing = api.routes.pop(POLICIES)
    for item in listing["items"]:
        item["apiVersion"] = "podsnapshot.gke.io/v1alpha1"
    api.routes[POLICIES_V1ALPHA1] = listing
    engine = start()
    assert engine.state().details["podsnapshotpolicies"] == "synced (v1alpha1)"
    assert selected_by(validate(engine, pod_review({"app": "llm"}))) == "llm-policy"
    api.wait_for(lambda: bool(api.requests(POLICIES_V1ALPHA1, watch=True)))


def test_served_compute_classes_are_cached(api: FakeApiServer, start: Started) -> None:
    mig_class = {
        "apiVersion": "cloud.google.com/v1",
        "kind": "ComputeClass",
        "metadata": {"name": "mig-class", "resourceVersion": "10"},
        "spec": {
            "priorities": [
                {"gpu": {"type": "nvidia-h100-80gb", "gpuSharing": {"gpuPartitionSize": "1g.10gb"}}}
            ]
        },
    }
    api.routes[COMPUTE_CLASSES] = {
        "kind": "ComputeClassList",
        "metadata": {"resourceVersion": "10"},
        "items": [mig_class],
    }
    engine = start()
    classes = engine.state().compute_classes
    assert classes is not None
    assert classes["mig-class"].enables_mig
    e2_class = copy.deepcopy(mig_class)
    e2_class["metadata"] = {"name": "cheap", "resourceVersion": "11"}
    e2_class["spec"] = {"priorities": [{"machineFamily": "e2"}]}
    api.push(COMPUTE_CLASSES, {"type": "ADDED", "object": e2_class})
    api.wait_for(lambda: "cheap" in (engine.state().compute_classes or {}))
    assert (engine.state().compute_classes or {})["cheap"].machine_families == {"e2"}


def test_invalid_policy_is_skipped_and_counted(api: FakeApiServer, start: Started) -> None:
    del api.routes[POLICIES]["items"][1]["spec"]["storageConfigName"]  # web-policy
    state = start().state()
    assert [p.name for p in state.policies.all()] == ["llm-policy"]
    assert state.details["podsnapshotpolicies"] == "synced (1 invalid)"


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
        pytest.param(403, id="retries-after-403-forbidden"),
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


def test_stop_ends_every_cache_thread(api: FakeApiServer, tmp_path: Path) -> None:
    settings = make_settings(source={"kind": "kube", "kubeconfig": api.kubeconfig(tmp_path)})
    source = open_cluster_source(settings)
    api.wait_for(lambda: len(api.requests(NODES, watch=True)) == 1)
    assert source.stop(timeout=5.0), "every thread ended although its watches were open"
    assert not any(t.name.startswith("snapready-") for t in threading.enumerate())
    seen = len(api.seen)
    api.push(NODES, {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "900"}}})
    api.drop(NODES)
    assert len(api.seen) == seen, "no reconnection after stop"


def test_missing_kubeconfig_is_a_config_error(tmp_path: Path) -> None:
    settings = make_settings(source={"kind": "kube", "kubeconfig": tmp_path / "absent"})
    with pytest.raises(ConfigError, match="cannot load kubeconfig"):
        build_engine(settings)


def test_apis_not_served_are_exposed_as_metrics(api: FakeApiServer, start: Started) -> None:
    del api.routes[POLICIES]
    engine = start()
    metrics = Metrics()
    metrics.watch_state(engine.state)
    served = {
        sample.labels["resource"]: sample.value
        for family in metrics.registry.collect()
        if family.name == "snapready_source_api_served"
        for sample in family.samples
    }
    assert served["podsnapshotpolicies"] == 0.0
    assert served["computeclasses"] == 0.0
    assert served["nodes"] == 1.0
    assert served["namespaces"] == 1.0
