"""Outcomes from GKE's own evidence, on a real API server with GKE's agent simulated.

The agent (``tests.support.gke_agent``) replays docs/gke-facts.md#section-9's timelines in real
time: a restored pod is Ready first and gets ``PodRestored`` 30 s later; GKE's Warning
``GKEPodSnapshotting`` "falling back to a cold start" for a skipped restore; a crashed restore
(CrashLoopBackOff with ``vfs.CompleteRestore() failed``); the PodSnapshot condition sequence
(``AwaitingCheckpoint``, then ``Succeeded`` or ``Failed``). snapready (a real cluster source with
leader election) must decide each outcome from that evidence, never at the Ready transition.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any, cast

import jsonpatch
import pytest
from kubernetes import client

from tests.cluster.controllers.test_snapshots import Env, leading_env, make_env, take_snapshot
from tests.envtest.controlplane import ControlPlane
from tests.envtest.plugin import wait_for
from tests.support.gke_agent import GkeAgent
from webhook.cluster.manager import start_cluster
from webhook.snapshots.outcomes import Verdict, restore_seconds
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.views import SnapshotView

SETTLE = 40.0
"""Seconds a Ready pod waits for evidence here: above the 30 s PodRestored delay replayed."""


@pytest.fixture
def evidence(
    control_plane: ControlPlane,
    kube_admin: client.ApiClient,
    namespace: str,
    podsnapshot_crds: list[str],
) -> Iterator[Env]:
    """snapready with ``outcomes.settle_seconds`` 40 and a 3 s checkpoint stall."""
    with leading_env(
        control_plane,
        kube_admin,
        namespace,
        outcomes={"settle_seconds": SETTLE},
        checkpoint={"stall_seconds": 3},
    ) as made:
        yield made


QUICK_SETTLE = 10.0
"""Seconds a Ready pod waits for evidence in tests that replay no PodRestored delay."""


@pytest.fixture
def quick_evidence(
    control_plane: ControlPlane,
    kube_admin: client.ApiClient,
    namespace: str,
    podsnapshot_crds: list[str],
) -> Iterator[Env]:
    """snapready with ``outcomes.settle_seconds`` 10 (no 30 s timeline to wait out)."""
    with leading_env(
        control_plane, kube_admin, namespace, outcomes={"settle_seconds": QUICK_SETTLE}
    ) as made:
        yield made


def admit_and_create(env: Env, name: str, **changes: Any) -> dict[str, Any]:
    """Admit a pod through snapready's engine and create it on the node (as the scheduler
    would bind it); the agent then marks it scheduled."""
    pod = env.pod(name, **changes)
    admitted: dict[str, Any] = jsonpatch.apply_patch(pod, list(env.mutate(pod).patch))
    admitted["spec"]["nodeName"] = env.node
    client.CoreV1Api(env.api).create_namespaced_pod(
        env.namespace, client.V1Pod.model_validate(admitted)
    )
    GkeAgent(env.api, env.namespace, env.gke).scheduled(name)
    return admitted


def events(env: Env, reason: str, pod: str | None = None) -> list[dict[str, Any]]:
    """snapready's events.k8s.io/v1 Events of ``reason`` (about ``pod``) in the namespace."""
    # Raw JSON: GKE's core/v1 Events (no eventTime) are in the same list, which the typed
    # events.k8s.io model cannot parse.
    listed = cast(
        "dict[str, Any]",
        client.CustomObjectsApi(env.api).list_namespaced_custom_object(
            "events.k8s.io", "v1", env.namespace, "events"
        ),
    )
    return [
        e
        for e in listed["items"]
        if e.get("reason") == reason and (pod is None or e["regarding"].get("name") == pod)
    ]


def recorded_outcome(env: Env, pod: str) -> str | None:
    """The ``snapready.io/restore-outcome`` annotation the leader wrote on the pod."""
    obj = client.CoreV1Api(env.api).read_namespaced_pod(pod, env.namespace)
    assert obj.metadata is not None
    return (obj.metadata.annotations or {}).get("snapready.io/restore-outcome")


def listen(env: Env) -> dict[str, tuple[Verdict, PodRecord]]:
    """Every outcome the leader decides, by pod name."""
    seen: dict[str, tuple[Verdict, PodRecord]] = {}
    env.source.restores.listeners.append(lambda r, v: seen.setdefault(r.name, (v, r)))
    return seen


def test_a_restore_whose_podrestored_comes_30s_after_ready_is_restored(evidence: Env) -> None:
    """Google's measured timeline: Ready first, PodRestored ~28-30 s later. No missed-restore
    alarm at Ready, then ``restored`` with a restore time of at least 30 s from PodScheduled;
    and alongside, a pod GKE said nothing about is only decided after the settle time."""
    env, agent = evidence, GkeAgent(evidence.api, evidence.namespace, evidence.gke)
    seen = listen(env)
    take_snapshot(env)
    assert env.annotations(env.pod("probe"))["snapready.io/restore-prediction"] == "hit"
    admit_and_create(env, "replica")
    admit_and_create(env, "silent")
    agent.containers_ready("replica")
    agent.containers_ready("silent")
    ready_at = time.monotonic()
    time.sleep(30)  # the memory streams in; the app answers health checks meanwhile
    assert "replica" not in seen and "silent" not in seen, "decided before any evidence"
    assert events(env, "SnapshotRestoreMissed") == [], "a false missed-restore alarm"
    agent.restored("replica", "snap-1")

    verdict, record = wait_for("replica", lambda: seen.get("replica"), timeout=10) or (None, None)
    assert verdict is not None and record is not None
    assert verdict.outcome == "restored" and verdict.evidence == "PodRestored"
    assert verdict.snapshot == "snap-1"
    seconds = restore_seconds(record, verdict)
    assert seconds is not None and seconds >= 30
    assert wait_for("recorded", lambda: recorded_outcome(env, "replica"), 10) == "restored"

    # "silent" never got evidence: missed only once the settle time has passed.
    silent = wait_for("silent decided", lambda: seen.get("silent"), timeout=SETTLE)
    assert silent is not None
    verdict = silent[0]
    assert time.monotonic() - ready_at >= SETTLE - 1
    assert verdict.outcome == "missed" and verdict.evidence == "no restore evidence"
    missed = wait_for("missed event", lambda: events(env, "SnapshotRestoreMissed", "silent"), 10)
    assert "no PodRestored and no GKE restore event" in missed[0]["note"]
    assert events(env, "SnapshotRestoreMissed", "replica") == []


def test_gke_fallback_warning_is_quoted_within_seconds(evidence: Env) -> None:
    env, agent = evidence, GkeAgent(evidence.api, evidence.namespace, evidence.gke)
    seen = listen(env)
    take_snapshot(env)
    admit_and_create(env, "landed-new")
    agent.containers_ready("landed-new")
    started = time.monotonic()
    said = agent.fell_back("landed-new", "node runs 1.35.4-gke.100, snapshot taken on 1.35.3")
    missed = wait_for(
        "missed event", lambda: events(env, "SnapshotRestoreMissed", "landed-new"), timeout=10
    )
    assert time.monotonic() - started < SETTLE / 2, "GKE's Warning decides at once"
    note = missed[0]["note"]
    assert note.startswith("GKE skipped the restore from snap-1: ")
    assert said in note, "GKE's own reason is quoted first"
    assert seen["landed-new"][0].outcome == "missed"
    assert seen["landed-new"][0].evidence == "GKE event"


def test_a_crashed_restore_gets_snapshot_restore_failed(evidence: Env) -> None:
    env, agent = evidence, GkeAgent(evidence.api, evidence.namespace, evidence.gke)
    seen = listen(env)
    take_snapshot(env)
    admit_and_create(env, "db")
    agent.restore_crash("db")
    failed = wait_for("failed event", lambda: events(env, "SnapshotRestoreFailed", "db"), 10)
    note = failed[0]["note"]
    assert failed[0]["type"] == "Warning"
    assert "vfs.CompleteRestore() failed" in note and "container server" in note
    assert "delete it to cold-start it" in note and "postCheckpoint: stop" in note
    assert seen["db"][0].outcome == "restore_failed"
    assert wait_for("recorded", lambda: recorded_outcome(env, "db"), 10) == "restore_failed"


def test_a_failed_checkpoint_names_the_driver(evidence: Env) -> None:
    """The env's node runs GKE's default GPU driver branch (535): exit status 128."""
    env, agent = evidence, GkeAgent(evidence.api, evidence.namespace, evidence.gke)
    checkpoints: list[tuple[str, str]] = []
    env.source.checkpoints.listeners.append(lambda v, o, s: checkpoints.append((v.name, o)))
    admit_and_create(env, "origin-gpu")
    wait_for("cached", lambda: f"{env.namespace}/origin-gpu" in env.source.state().pods, 10)
    agent.new_snapshot("snap-gpu", "origin-gpu")
    agent.checkpoint("snap-gpu", "failed", "runsc error: exit status 128")
    failed = wait_for("event", lambda: events(env, "SnapshotCheckpointFailed"), timeout=15)
    on_policy = [e for e in failed if e["regarding"]["kind"] == "PodSnapshotPolicy"]
    assert len(on_policy) == 1
    note = on_policy[0]["note"]
    assert "GKE says: runsc error: exit status 128" in note
    assert "default GPU driver branch" in note and "gke-gpu-driver-version: latest" in note
    on_pod = wait_for(
        "pod event", lambda: events(env, "SnapshotCheckpointFailed", "origin-gpu"), 10
    )
    assert on_pod[0]["regarding"]["kind"] == "Pod"
    assert ("snap-gpu", "failed") in checkpoints


def test_a_checkpoint_awaiting_too_long_is_stalled(evidence: Env) -> None:
    env, agent = evidence, GkeAgent(evidence.api, evidence.namespace, evidence.gke)
    admit_and_create(env, "origin-slow")
    agent.new_snapshot("snap-slow", "origin-slow")
    # Stall time 3 s: reported when due, not at the next 30 s recheck.
    stalled = wait_for("stalled", lambda: events(env, "SnapshotCheckpointStalled"), timeout=20)
    assert "snap-slow" in stalled[0]["note"] and "AwaitingCheckpoint" in stalled[0]["note"]
    agent.checkpoint("snap-slow", "succeeded")

    def succeeded() -> SnapshotView | None:
        view = env.source.state().snapshots.named(env.namespace, "snap-slow")
        return view if view is not None and view.checkpoint == "succeeded" else None

    done = wait_for("succeeded", succeeded, timeout=10)
    assert done is not None and done.ready


def test_the_readiness_gate_holds_a_checkpointing_origin_and_a_restoring_replica(
    control_plane: ControlPlane,
    kube_admin: client.ApiClient,
    namespace: str,
    podsnapshot_crds: list[str],
) -> None:
    with make_env(control_plane, kube_admin, namespace, restore={"readiness_gate": True}) as env:
        wait_for("leader", lambda: env.source.state().details.get("leader") == "leader", 20)
        agent = GkeAgent(env.api, env.namespace, env.gke)
        origin = admit_and_create(env, "origin")
        gates = origin["spec"]["readinessGates"]
        assert gates == [{"conditionType": "snapready.io/restore-settled"}]
        agent.containers_ready("origin")
        # Nothing to restore, nothing uploading: snapready settles it; the kubelet says Ready.
        wait_for("origin settled", lambda: _settled(env, "origin") == "True", 15)
        assert agent.kubelet_sync("origin")
        agent.new_snapshot("snap-1", "origin")  # the upload pauses the origin
        wait_for("origin held", lambda: _settled(env, "origin") == "False", 15)
        assert not agent.kubelet_sync("origin"), "a checkpointing origin is not Ready"
        agent.checkpoint("snap-1", "succeeded")
        wait_for("origin back", lambda: _settled(env, "origin") == "True", 15)
        assert agent.kubelet_sync("origin")
        wait_for(
            "snapshot Ready with its record",
            lambda: (
                (v := env.source.state().snapshots.named(env.namespace, "snap-1"))
                and v.ready
                and v.origin is not None
            ),
            15,
        )

        replica = admit_and_create(env, "replica")
        assert replica["metadata"]["annotations"]["snapready.io/restore-prediction"] == "hit"
        assert (
            replica["metadata"]["annotations"]["snapready.io/spec-hash"]
            == (origin["metadata"]["annotations"]["snapready.io/spec-hash"])
        ), "the gate is not part of the fingerprint"
        agent.containers_ready("replica")
        wait_for("replica held", lambda: _settled(env, "replica") == "False", 15)
        assert not agent.kubelet_sync("replica"), "Ready only after PodRestored"
        agent.restored("replica", "snap-1")
        wait_for("replica settled", lambda: _settled(env, "replica") == "True", 15)
        assert agent.kubelet_sync("replica")


def test_the_readiness_gate_holds_a_pod_whose_match_gvisor_refuses_until_it_crashes(
    control_plane: ControlPlane,
    kube_admin: client.ApiClient,
    namespace: str,
    podsnapshot_crds: list[str],
) -> None:
    """The pod's init container ``fetch`` mounts the emptyDir ``cache`` first: it matches its
    origin's Ready snapshot, so GKE restores it, and gVisor refuses that restore (runsc,
    ``tests/gvisor/test_pod_sandbox.py``; domain.md section 9: no cold-start fallback). Its
    prediction is ``miss``, yet the gate must not settle it as a cold start: it waits for the
    restore, saying it is predicted to crash, and the crash then fails it."""
    cache = {"name": "cache", "mountPath": "/cache"}
    fetch = {"name": "fetch", "image": "registry.example/llm", "command": ["true"]}
    spec = {
        "initContainers": [{**fetch, "volumeMounts": [cache]}],
        "volumes": [{"name": "cache", "emptyDir": {}}],
    }
    shape: dict[str, Any] = {"container": {"volumeMounts": [cache]}, "spec": spec}
    with make_env(control_plane, kube_admin, namespace, restore={"readiness_gate": True}) as env:
        wait_for("leader", lambda: env.source.state().details.get("leader") == "leader", 20)
        agent = GkeAgent(env.api, env.namespace, env.gke)
        take_snapshot(env, **shape)
        doomed = admit_and_create(env, "doomed", **shape)
        annotations = doomed["metadata"]["annotations"]
        assert annotations["snapready.io/restore-prediction"] == "miss"
        assert annotations["snapready.io/restore-reason"].startswith("gVisor cannot restore")
        agent.containers_ready("doomed")
        wait_for("held", lambda: _settled(env, "doomed") == "False", 15)
        reason, message, since = _gate(env, "doomed")
        assert reason == "AwaitingRestore", (reason, message)
        assert message.startswith("restoring from snap-1: waiting for PodRestored")
        assert "predicted to crash" in message
        assert not agent.kubelet_sync("doomed"), "not Ready while the refused restore runs"
        # Still False, a new reason: written, and the transition time stays when it went False.
        agent.restore_crash("doomed")
        wait_for("failed", lambda: _gate(env, "doomed")[0] == "RestoreFailed", 15)
        assert _settled(env, "doomed") == "False"
        assert _gate(env, "doomed")[2] == since


def _gate(env: Env, pod: str) -> tuple[str, str, object]:
    """The ``snapready.io/restore-settled`` condition's reason, message and
    ``lastTransitionTime`` ("" and None when unset)."""
    obj = client.CoreV1Api(env.api).read_namespaced_pod(pod, env.namespace)
    assert obj.status is not None
    for condition in obj.status.conditions or []:
        if condition.type == "snapready.io/restore-settled":
            reason, message = str(condition.reason or ""), str(condition.message or "")
            return reason, message, condition.last_transition_time
    return "", "", None


def _settled(env: Env, pod: str) -> str | None:
    obj = client.CoreV1Api(env.api).read_namespaced_pod(pod, env.namespace)
    assert obj.status is not None
    for condition in obj.status.conditions or []:
        if condition.type == "snapready.io/restore-settled":
            return str(condition.status)
    return None


def test_a_new_leader_reports_what_happened_while_nobody_led_and_nothing_twice(
    control_plane: ControlPlane, evidence: Env
) -> None:
    env, agent = evidence, GkeAgent(evidence.api, evidence.namespace, evidence.gke)
    take_snapshot(env)
    admit_and_create(env, "before")
    agent.containers_ready("before")
    agent.fell_back("before", "node version differs")
    wait_for("reported by the first leader", lambda: recorded_outcome(env, "before"), 10)
    admit_and_create(env, "midway")
    agent.containers_ready("midway")  # Ready under the first leader, restore still streaming
    first_events = len(events(env, "SnapshotRestoreMissed"))

    # graceful: the Lease is released after the drain; a stop that timed out (5 s) could leave
    # the first leader deciding "leaderless" itself, unseen by the second's listener
    assert env.source.stop(timeout=30), "the first snapready did not stop"
    admit_and_create(env, "leaderless")
    agent.containers_ready("leaderless")
    agent.fell_back("leaderless", "no compatible snapshot")  # nobody leads now
    agent.restored("midway", "snap-1")

    settings = env.engine.settings
    second = start_cluster(settings)
    try:
        seen: dict[str, Verdict] = {}
        second.restores.listeners.append(lambda r, v: seen.setdefault(r.name, v))
        wait_for("second leads", lambda: second.state().details.get("leader") == "leader", 30)
        # Liveness bounds, not timings: the new leader lists, syncs and decides; on a 2-core
        # machine running the whole suite that took over 15 s (clean-clone CI, 2026-12-07).
        wait_for("leaderless decided", lambda: "leaderless" in seen, 60)
        wait_for("midway decided", lambda: "midway" in seen, 60)
        assert seen["midway"].outcome == "restored"
        assert seen["leaderless"].outcome == "missed"
        assert "before" not in seen, "decided by the first leader: not reported again"
        missed = events(env, "SnapshotRestoreMissed")
        assert len(missed) == first_events + 1
        before = [e for e in missed if e["regarding"]["name"] == "before"]
        assert len(before) == 1 and (before[0].get("series") or {}).get("count") in (None, 1)
    finally:
        second.stop()
        with contextlib.suppress(Exception):
            env.source.stop()


def test_a_restore_event_without_podrestored_is_not_a_restore(quick_evidence: Env) -> None:
    """An Event can be written by anyone who may create Events in the namespace (a fresh-user
    test forged one); PodRestored only through pods/status. A Normal "Successfully restored"
    without PodRestored, and a fallback Warning that names no uid, decide nothing."""
    env = quick_evidence
    agent = GkeAgent(env.api, env.namespace, env.gke)
    seen = listen(env)
    take_snapshot(env)
    admit_and_create(env, "claimed")
    agent.containers_ready("claimed")
    ready_at = time.monotonic()
    agent.event("claimed", "Normal", f"Successfully restored the pod from PodSnapshot "
                f"{env.namespace}/snap-1")  # fmt: skip
    body = client.CoreV1Event(
        metadata=client.V1ObjectMeta(name="claimed.forged"),
        involved_object=client.V1ObjectReference(
            kind="Pod", namespace=env.namespace, name="claimed", api_version="v1"
        ),
        reason="GKEPodSnapshotting",
        message="No compatible PodSnapshot, falling back to a cold start of pod: forged",
        type="Warning",
    )
    client.CoreV1Api(env.api).create_namespaced_event(env.namespace, body)
    time.sleep(5)
    assert "claimed" not in seen, "an Event alone decided"
    decided = wait_for("settled", lambda: seen.get("claimed"), timeout=QUICK_SETTLE + 10)
    assert decided is not None
    assert time.monotonic() - ready_at >= QUICK_SETTLE - 1, "decided by the settle time only"
    verdict = decided[0]
    assert verdict.outcome == "missed" and verdict.evidence == "restore Event, no PodRestored"
