"""Issue 27 on a real API server: snapready believes the cluster, not what pods say of themselves.

The attacker writes pods directly (no admission webhook is installed here, like a user whose
pods bypass it, or who patches them afterwards): forged ``snapready.io/policy`` values, a
``snapready.io/selected`` label on a pod no policy selects ("ghost"), hundreds of distinct policy
values for the metrics, and a stamped pod whose label is removed. Outcomes, Events and the
metric series must follow the live PodSnapshotPolicy (``llm-policy``, selecting ``app=llm``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from prometheus_client import CollectorRegistry

from tests.cluster.controllers.test_evidence import events, recorded_outcome
from tests.cluster.controllers.test_restores import create_admitted, turn_ready
from tests.cluster.controllers.test_snapshots import GROUP, VERSION, Env, leading_env, take_snapshot
from tests.envtest.controlplane import ControlPlane
from tests.envtest.plugin import wait_for
from webhook.cluster.api.events import Event, Regarding
from webhook.server.outcome_metrics import OutcomeMetrics
from webhook.snapshots.outcomes import Verdict
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.views import OriginRecord

SETTLE = 2.0


@pytest.fixture
def trust(
    control_plane: ControlPlane,
    kube_admin: client.ApiClient,
    namespace: str,
    podsnapshot_crds: list[str],
) -> Iterator[Env]:
    """snapready leading, pods GKE says nothing about decided 2 s after Ready, one snapshot."""
    with leading_env(
        control_plane, kube_admin, namespace, outcomes={"settle_seconds": SETTLE}
    ) as made:
        take_snapshot(made)
        yield made


def ghost(env: Env, name: str, policy: str, labels: dict[str, str] | None = None) -> None:
    """A pod that claims to be stamped: selected label, prediction ``hit``, a policy name."""
    annotations = {
        "snapready.io/policy": policy,
        "snapready.io/restore-prediction": "hit",
        "snapready.io/restore-snapshot": "snap-1",
        "snapready.io/spec-hash": "v1:sha256:" + "0" * 64,
    }
    body: dict[str, Any] = {
        "metadata": {
            "name": name,
            "labels": {"snapready.io/selected": "true", **(labels or {"app": "ghost"})},
            "annotations": annotations,
        },
        "spec": {"nodeName": env.node, "containers": [{"name": "c", "image": "busybox"}]},
    }
    client.CoreV1Api(env.api).create_namespaced_pod(
        env.namespace, client.V1Pod.model_validate(body)
    )


def seen_outcomes(env: Env) -> dict[str, tuple[PodRecord, Verdict]]:
    """Every outcome the tracker reports, by pod name."""
    seen: dict[str, tuple[PodRecord, Verdict]] = {}
    env.source.restores.listeners.append(lambda r, v: seen.setdefault(r.name, (r, v)))
    return seen


def series(registry: CollectorRegistry) -> set[tuple[str, str, str]]:
    """``(namespace, policy, outcome)`` of every ``snapready_restores_total`` series."""
    return {
        (s.labels["namespace"], s.labels["policy"], s.labels["outcome"])
        for metric in registry.collect()
        if metric.name == "snapready_restores"
        for s in metric.samples
        if s.name == "snapready_restores_total"
    }


def test_forged_annotations_and_ghost_pods_change_nothing_anyone_sees(trust: Env) -> None:
    env, seen = trust, seen_outcomes(trust)
    registry = CollectorRegistry()
    env.source.restores.listeners.append(OutcomeMetrics(registry).observe_restore)
    create_admitted(env, "real")
    core = client.CoreV1Api(env.api)
    forged = {"metadata": {"annotations": {"snapready.io/policy": "llm-forged"}}}
    core.patch_namespaced_pod("real", env.namespace, forged)
    ghost(env, "ghost", "ghost-policy")  # no live policy selects app=ghost
    # Many distinct (and long) policy values on pods the policy does select: one series.
    for index in range(20):
        value = f"p-{index}-" + "x" * (2000 if index < 3 else 1)
        ghost(env, f"many-{index}", value, {"app": "llm"})
    names = ["real", "ghost", *(f"many-{i}" for i in range(20))]
    for name in names:
        turn_ready(env, name, after=60)

    wait_for("selected pods decided", lambda: len(seen) >= 21, timeout=30)
    assert "ghost" not in seen
    assert {record.policy for record, _ in seen.values()} == {"llm-policy"}
    assert seen["real"][1].outcome == "missed"
    assert series(registry) == {(env.namespace, "llm-policy", "missed")}
    assert recorded_outcome(env, "ghost") is None
    assert events(env, "SnapshotRestoreMissed", "ghost") == []
    note = events(env, "SnapshotRestoreMissed", "real")[0]["note"]
    assert "llm-forged" not in note


def test_a_pod_that_lost_its_label_is_relabelled_and_still_decided(trust: Env) -> None:
    """The pod cache watches only ``selected=true``: removing the label looks like a deletion.
    The leader looks the pod up, writes the label back (a live policy selects it) and decides
    its outcome; a pod that lost the label and is no longer selected is forgotten."""
    env, seen = trust, seen_outcomes(trust)
    core = client.CoreV1Api(env.api)
    create_admitted(env, "unlabelled")
    create_admitted(env, "moved")
    wait_for("cached", lambda: f"{env.namespace}/moved" in env.source.state().pods, timeout=10)
    drop = {"metadata": {"labels": {"snapready.io/selected": None}}}
    core.patch_namespaced_pod("unlabelled", env.namespace, drop)
    moved = {"metadata": {"labels": {"snapready.io/selected": None, "app": "elsewhere"}}}
    core.patch_namespaced_pod("moved", env.namespace, moved)

    def labelled() -> bool:
        pod = core.read_namespaced_pod("unlabelled", env.namespace)
        assert pod.metadata is not None
        return (pod.metadata.labels or {}).get("snapready.io/selected") == "true"

    wait_for("label written back", labelled, timeout=15)
    turn_ready(env, "unlabelled", after=50)
    turn_ready(env, "moved", after=50)
    wait_for("decided", lambda: "unlabelled" in seen, timeout=20)
    assert seen["unlabelled"][1].outcome == "missed"
    wait_for("recorded", lambda: recorded_outcome(env, "unlabelled") == "missed", timeout=10)
    assert "moved" not in seen and recorded_outcome(env, "moved") is None
    assert env.source.restores.guard.relabelled >= 1


def test_an_origin_pod_that_is_not_a_pod_name_is_recorded_unknown_once(
    trust: Env, caplog: pytest.LogCaptureFixture
) -> None:
    """``..`` once read the Namespace object and ``?...`` a pod list as "origin pods"; an
    encoded ``..%2F`` got a 403 retried on every cache change with a warning each time."""
    custom = client.CustomObjectsApi(trust.gke)  # GKE writes the origin-pod annotation
    names = {"evil-dotdot": "..", "evil-query": "?limit=1", "evil-encoded": "..%2Fx"}
    for name, origin in names.items():
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "PodSnapshot",
            "metadata": {"name": name, "annotations": {"podsnapshot.gke.io/origin-pod": origin}},
            "spec": {"policyName": "llm-policy"},
        }
        custom.create_namespaced_custom_object(
            GROUP, VERSION, trust.namespace, "podsnapshots", body
        )

    def records() -> dict[str, OriginRecord | None]:
        snapshots = trust.source.state().snapshots
        return {
            n: (v.origin if (v := snapshots.named(trust.namespace, n)) else None) for n in names
        }

    wait_for("recorded", lambda: all(records().values()), timeout=15)
    for record in records().values():
        assert record is not None and record.pod is None and record.spec_hash is None
    trust.source.restores.notify()
    time.sleep(1)
    assert not [r for r in caplog.records if "not written" in r.getMessage()]


def test_an_event_name_taken_by_a_user_is_not_reused(trust: Env) -> None:
    """A user pre-creates a harmless Normal event under the name snapready would use: the
    Warning still appears (under a generated name) and the user's event is left as it was."""
    recorder = trust.source.restores.events
    regarding = Regarding("v1", "Pod", trust.namespace, "victim")
    event = Event(regarding, "Warning", "SnapshotRestoreMissed", "Restore", "predicted hit")
    name = f"victim.{event.key[:16]}"
    decoy = event.body(name, "2026-12-01T10:00:00.000000Z", "user") | {
        "type": "Normal",
        "reportingController": "user/decoy",
        "note": "all fine",
    }
    events_api = "events.k8s.io", "v1", trust.namespace, "events"
    client.CustomObjectsApi(trust.api).create_namespaced_custom_object(*events_api, decoy)
    assert recorder.emit(event)
    listed = [e for e in events(trust, "SnapshotRestoreMissed", "victim")]
    warnings = [e for e in listed if e["type"] == "Warning"]
    assert len(warnings) == 1 and warnings[0]["metadata"]["name"] != name
    assert warnings[0]["reportingController"] == "snapready.io/snapready"
    left = [e for e in listed if e["metadata"]["name"] == name]
    assert left[0]["type"] == "Normal" and not left[0].get("series")
