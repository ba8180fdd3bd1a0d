"""Closing the loop on a real API server: restore outcomes, missed-restore and stale events.

Pods admitted through snapready's engine are created on a node; GKE's kubelet is simulated by
setting their status through ``pods/status`` (PodScheduled, Ready, and ``PodRestored`` set
together with Ready for a restored pod: one case among the timelines of ``test_evidence.py``,
where PodRestored comes tens of seconds after Ready). The leader decides each outcome once (here
with ``outcomes.settle_seconds`` 3 for the pods GKE says nothing about), counts it, and writes
``events.k8s.io/v1`` Events: ``SnapshotRestoreMissed`` on a pod that should have restored,
``SnapshotsStale`` once on the policy after a node-pool upgrade.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml
from kubernetes import client

from tests.cluster.api.test_real_apiserver import RBAC, bind_role, manifest_role, wait_until_allowed
from tests.cluster.controllers.test_snapshots import (
    NEW,
    OLD,
    Env,
    make_env,
    set_node_version,
    take_snapshot,
)
from tests.conftest import make_settings
from tests.envtest.controlplane import ControlPlane
from tests.envtest.plugin import service_account_token, wait_for
from tests.support.kube_real import delete_quietly
from webhook.base.config import LeaderSettings
from webhook.cluster.api.client import api_client
from webhook.cluster.api.events import Event, EventRecorder, Regarding
from webhook.cluster.api.leader import LeaderElector
from webhook.cluster.api.syncing import TransportError
from webhook.cluster.api.transport import KubeTransport
from webhook.snapshots.outcomes import Verdict, startup_seconds
from webhook.snapshots.pod_records import PodRecord

SETTLE = 3.0


@pytest.fixture
def env(
    control_plane: ControlPlane,
    kube_admin: client.ApiClient,
    namespace: str,
    podsnapshot_crds: list[str],
) -> Iterator[Env]:
    """test_snapshots' cluster, with pods GKE says nothing about decided 3 s after Ready."""
    with make_env(
        control_plane, kube_admin, namespace, outcomes={"settle_seconds": SETTLE}
    ) as made:
        yield made


def create_admitted(env: Env, name: str, **changes: Any) -> dict[str, Any]:
    """Admit a pod through the engine (label, annotations, prediction) and create it on the node."""
    pod = env.pod(name, **changes)
    admitted: dict[str, Any] = jsonpatch.apply_patch(pod, list(env.mutate(pod).patch))
    admitted["spec"]["nodeName"] = env.node
    created = client.CoreV1Api(env.api).create_namespaced_pod(
        env.namespace, client.V1Pod.model_validate(admitted)
    )
    assert created.metadata is not None and created.metadata.creation_timestamp is not None
    return admitted


def turn_ready(env: Env, name: str, *, restored: str | None = None, after: float = 42.0) -> None:
    """What the kubelet (and GKE's restore) report: Ready, optionally PodRestored."""
    core = client.CoreV1Api(env.api)
    pod = core.read_namespaced_pod(name, env.namespace)
    assert pod.metadata is not None and pod.metadata.creation_timestamp is not None
    # Ready now (a timestamp in the future would never settle); scheduled ``after - 2`` s
    # before, as if the pod had been created ``after`` s ago and bound 2 s later.
    ready_at = datetime.now(UTC).replace(microsecond=0)
    stamp = ready_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    scheduled = (ready_at - timedelta(seconds=after - 2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled},
        {"type": "Ready", "status": "True", "lastTransitionTime": stamp},
    ]
    if restored is not None:
        conditions.append(
            {
                "type": "PodRestored",
                "status": "True",
                "lastTransitionTime": stamp,
                "message": f"restored from PodSnapshot {restored}",
            }
        )
    core.patch_namespaced_pod_status(name, env.namespace, {"status": {"conditions": conditions}})


def events(env: Env, reason: str) -> list[dict[str, Any]]:
    """events.k8s.io/v1 Events of ``reason`` in the test namespace."""
    listed = client.EventsV1Api(env.api).list_namespaced_event(env.namespace)
    return [e.to_dict() for e in listed.items if e.reason == reason]


def test_outcomes_are_decided_once_and_a_missed_restore_is_an_event(env: Env) -> None:
    seen: list[tuple[str, str, float | None]] = []
    tracker = env.source.restores

    def listen(record: PodRecord, verdict: Verdict) -> None:
        seen.append((record.name, verdict.outcome, startup_seconds(record, verdict)))

    tracker.listeners.append(listen)
    wait_for("leader", lambda: env.source.state().details.get("leader") == "leader", 20)
    take_snapshot(env)

    create_admitted(env, "hit-cold")  # predicted hit
    create_admitted(env, "hit-restored")
    create_admitted(env, "miss-restored", container={"image": "registry.example/llm:v2"})
    create_admitted(env, "first", labels={"model": "other"})  # no snapshot in its group
    create_admitted(env, "miss-cold", container={"image": "registry.example/llm:v3"})
    turn_ready(env, "hit-cold", after=95)
    turn_ready(env, "miss-cold", after=80)
    turn_ready(env, "hit-restored", restored="snap-1", after=7)
    turn_ready(env, "miss-restored", restored="snap-1", after=9)
    turn_ready(env, "first", after=120)

    wait_for("five outcomes", lambda: len(seen) >= 5, timeout=15)
    outcomes = {name: outcome for name, outcome, _ in seen}
    assert outcomes == {
        "hit-cold": "missed",
        "hit-restored": "restored",
        "miss-restored": "restored_unexpected",
        "first": "cold_first",
        "miss-cold": "cold_expected",
    }
    seconds = {name: s for name, _, s in seen}  # from PodScheduled
    assert seconds["hit-restored"] == 5 and seconds["hit-cold"] == 93

    missed = wait_for("missed event", lambda: events(env, "SnapshotRestoreMissed"), timeout=10)
    assert len(missed) == 1
    event = missed[0]
    assert event["type"] == "Warning"
    assert event["regarding"]["name"] == "hit-cold"
    assert event["reporting_controller"] == "snapready.io/snapready"
    assert "snap-1" in event["note"] and env.node in event["note"]
    read = client.CoreV1Api(env.api).read_namespaced_pod("hit-cold", env.namespace)
    assert read.metadata is not None
    assert (read.metadata.annotations or {}).get("snapready.io/restore-outcome") == "missed"

    # A later status update of the same pod is not a second outcome.
    turn_ready(env, "hit-cold", after=96)
    wait_for("update seen", lambda: _cached(env, "hit-cold", "ready_at"), timeout=10)
    assert [n for n, _, _ in seen].count("hit-cold") == 1


def test_a_dry_run_create_is_never_an_outcome_or_an_event(env: Env) -> None:
    """Events come from pods that exist: a server-side dry-run create leaves nothing to see."""
    wait_for("leader", lambda: env.source.state().details.get("leader") == "leader", 20)
    take_snapshot(env)
    pod = env.pod("dry")
    admitted = jsonpatch.apply_patch(pod, list(env.mutate(pod).patch))
    client.CoreV1Api(env.api).create_namespaced_pod(
        env.namespace, client.V1Pod.model_validate(admitted), dry_run="All"
    )
    create_admitted(env, "real")  # a real pod afterwards: once it is cached, "dry" never was
    wait_for("real pod cached", lambda: _cached(env, "real", "name"), timeout=10)
    assert _cached(env, "dry", "name") is None
    assert events(env, "SnapshotRestoreMissed") == []


def _cached(env: Env, name: str, attribute: str) -> object:
    record: PodRecord | None = env.source.state().pods.get(f"{env.namespace}/{name}")
    return getattr(record, attribute) if record is not None else None


def test_a_node_pool_upgrade_marks_snapshots_stale_once(env: Env) -> None:
    wait_for("leader", lambda: env.source.state().details.get("leader") == "leader", 20)
    take_snapshot(env)
    assert events(env, "SnapshotsStale") == []
    set_node_version(env.api, env.node, NEW)
    stale = wait_for("stale event", lambda: events(env, "SnapshotsStale"), timeout=15)
    assert len(stale) == 1
    note = stale[0]["note"]
    assert f"{OLD[1:]} -> {NEW[1:]}" in note and env.pool in note and "llm-policy" in note
    assert stale[0]["regarding"]["kind"] == "PodSnapshotPolicy"
    env.source.warnings.reconcile()  # one more pass by hand: the same upgrade is not reported
    assert len(events(env, "SnapshotsStale")) == 1, "reported once per upgrade"


def test_followers_write_no_event(env: Env) -> None:
    tracker = env.source.restores
    tracker.stop()  # drive it by hand, as a replica that does not hold the Lease
    assert tracker.join(5)
    tracker.is_leader = lambda: False
    written = tracker.events.written  # the env is shared: earlier tests' events count too
    take_snapshot(env, name="snap-f", origin="origin-f")
    create_admitted(env, "follower-pod")
    turn_ready(env, "follower-pod", after=30)
    wait_for("pod ready in cache", lambda: _cached(env, "follower-pod", "ready_at"), timeout=10)
    time.sleep(SETTLE)  # past the settle time: a leader would decide now
    tracker.reconcile()
    assert tracker.events.written == written
    assert events(env, "SnapshotRestoreMissed") == []


def test_start_time_runs_from_podscheduled() -> None:
    """Scheduling and node provisioning are not start-up (docs/gke-facts.md#section-9)."""
    created = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)

    def at(seconds: int) -> str:
        return (created + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")

    cold = PodRecord("ns", "p", created=at(0), scheduled_at=at(180), ready_at=at(221))
    assert startup_seconds(cold, Verdict("cold_first", "no restore evidence")) == 41
    restored = PodRecord(
        "ns",
        "r",
        created=at(0),
        scheduled_at=at(60),
        ready_at=at(65),
        restored=True,
        restored_at=at(93),
    )
    assert startup_seconds(restored, Verdict("restored", "PodRestored")) == 33


def test_the_leaders_writes_are_allowed_by_manifests_rbac(
    env: Env, control_plane: ControlPlane, tmp_path: Path
) -> None:
    """As a ServiceAccount bound to exactly ``manifests/rbac.yaml`` (ClusterRole, and the lease
    Role moved to this namespace): creating and deleting an origin record (a SnapshotRecord),
    the outcome annotation and the readiness-gate condition on a pod, listing core Events, a new
    Event and its series patch, and holding the Lease are all allowed; patching a PodSnapshot
    is refused by RBAC (GKE's guard would refuse it anyway)."""
    token = service_account_token(env.api, env.namespace, "writer")
    kubeconfig = control_plane.token_kubeconfig(tmp_path / "writer.kubeconfig", token)
    name = f"writer-{env.namespace}"[:63]
    role = manifest_role(name)
    bind_role(env.api, role, env.namespace, "writer")
    lease_role = next(d for d in yaml.safe_load_all(RBAC.read_text()) if d and d["kind"] == "Role")
    lease_role["metadata"] = {"name": "snapready", "namespace": env.namespace}
    rbac = client.RbacAuthorizationV1Api(env.api)
    rbac.create_namespaced_role(env.namespace, client.V1Role.model_validate(lease_role))
    binding = {
        "metadata": {"name": "snapready", "namespace": env.namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "snapready"},
        "subjects": [{"kind": "ServiceAccount", "name": "writer", "namespace": env.namespace}],
    }
    rbac.create_namespaced_role_binding(env.namespace, client.V1RoleBinding.model_validate(binding))
    take_snapshot(env)  # the origin pod and a Ready PodSnapshot
    wait_until_allowed(kubeconfig, "nodes")
    settings = make_settings(source={"kind": "kube", "kubeconfig": kubeconfig})
    transport = KubeTransport(api_client(settings), 10.0)
    path = f"/apis/podsnapshot.gke.io/v1/namespaces/{env.namespace}/podsnapshots/snap-1"
    with pytest.raises(TransportError, match="HTTP 403"):
        transport.merge_patch(path, {"metadata": {"annotations": {"x.test/probe": "1"}}})
    records = f"/apis/snapready.io/v1alpha1/namespaces/{env.namespace}/snapshotrecords"
    probe = {
        "apiVersion": "snapready.io/v1alpha1",
        "kind": "SnapshotRecord",
        "metadata": {"name": "rbac-probe"},
        "spec": {"snapshot": {"name": "rbac-probe", "uid": "0"}},
    }
    transport.create(records, probe)
    transport.delete(f"{records}/rbac-probe")
    pod = f"/api/v1/namespaces/{env.namespace}/pods/origin"
    transport.merge_patch(pod, {"metadata": {"annotations": {"snapready.io/restore-outcome": "x"}}})
    condition = {"type": "snapready.io/restore-settled", "status": "True"}
    transport.strategic_patch(pod + "/status", {"status": {"conditions": [condition]}})
    transport.list(f"/api/v1/namespaces/{env.namespace}/events", page_size=10)
    recorder = EventRecorder(transport, "rbac-test")
    regarding = Regarding("v1", "Pod", env.namespace, "origin")
    event = Event(regarding, "Warning", "SnapshotRestoreMissed", "Restore", "rbac probe")
    assert recorder.emit(event) and recorder.emit(event)
    (written,) = events(env, "SnapshotRestoreMissed")
    assert written["series"]["count"] == 2
    # The API server deletes Events after --event-ttl: the next repeat's series update gets
    # its 404 and creates the Event again (as the ServiceAccount, through the real API server).
    client.EventsV1Api(env.api).delete_namespaced_event(written["metadata"]["name"], env.namespace)
    assert recorder.emit(event)
    (again,) = events(env, "SnapshotRestoreMissed")
    assert again["metadata"]["name"] == written["metadata"]["name"] and not again.get("series")
    assert recorder.results == {"written": 3, "already": 0, "dropped": 0, "failed": 0}
    # A 250-character pod name (the longest valid ones): the Event's name is accepted.
    long_name = "p" * 240 + "-" + "q" * 9
    long = Event(Regarding("v1", "Pod", env.namespace, long_name), "Warning", "LongName", "R", "x")
    assert recorder.emit(long) and len(events(env, "LongName")) == 1
    elector = LeaderElector(
        api_client(settings),
        LeaderSettings(lease_name="snapready", lease_namespace=env.namespace),
        lock=threading.Lock(),
        on_change=lambda: None,
    )
    elector.start()
    try:
        wait_for("lease held", lambda: elector.is_leader, timeout=15)
    finally:
        elector.stop()
        elector.join(10)
    delete_quietly(rbac.delete_cluster_role_binding, name)
    delete_quietly(rbac.delete_cluster_role, name)
