"""Two ``snapready serve`` processes on a real API server: one writer, and a takeover.

Both run cluster mode as admin with the same Lease. Exactly one holds it (``/readyz`` says
``leader``/``follower``); a PodSnapshot gets its origin record written by that one. Then the
leader is killed with SIGKILL (no release of the Lease): the follower takes over once the lease
expires (lease 15 s, so within ~20 s), and writes the origin record of a snapshot created after
the kill. The Lease names one holder at every step.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import jsonpatch
from kubernetes import client

from tests.cluster.controllers.test_evidence import events, recorded_outcome
from tests.cluster.controllers.test_restores import create_admitted, turn_ready
from tests.cluster.controllers.test_snapshots import GROUP, VERSION, Env, env, take_snapshot
from tests.envtest.plugin import wait_for
from tests.support.identity import IdentityFactory, require_token
from tests.support.records import get_record
from tests.support.snapready_proc import SnapreadyProcess, generate_certs, start_snapready
from webhook.base.config import LeaderSettings

__all__ = ["env"]
LEASE_SECONDS = 15


def leader_of(process: SnapreadyProcess) -> str:
    """``leader`` or ``follower`` from ``/readyz`` (empty when unreachable)."""
    try:
        _, body = process.readyz()
    except Exception:
        return ""
    return str(body.get("leader", ""))


def lease_holder(api: client.ApiClient, namespace: str, name: str) -> str:
    """The Lease's ``holderIdentity`` (empty when released)."""
    lease = client.CoordinationV1Api(api).read_namespaced_lease(name, namespace)
    return (lease.spec.holder_identity if lease.spec else None) or ""


def snapshot(env: Env, name: str, origin: str) -> None:
    """A Ready PodSnapshot of ``llm-policy`` naming ``origin`` (created as GKE's controller)."""
    custom = client.CustomObjectsApi(env.gke)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodSnapshot",
        "metadata": {"name": name, "annotations": {"podsnapshot.gke.io/origin-pod": origin}},
        "spec": {"policyName": "llm-policy"},
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, env.namespace, "podsnapshots", body)
    ready = {"type": "Ready", "status": "True", "reason": "AllSnapshotsAvailable"}
    ready |= {"lastTransitionTime": "2026-12-01T10:00:00Z", "message": ""}
    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, env.namespace, "podsnapshots", name, {"status": {"conditions": [ready]}}
    )


def recorded(env: Env, name: str) -> bool:
    """Whether snapready wrote the PodSnapshot's origin record (its SnapshotRecord)."""
    return get_record(env.api, env.namespace, name) is not None


def writes(process: SnapreadyProcess, name: str) -> int:
    """How many times ``process`` logged writing the origin record of ``name``."""
    return sum(
        1
        for line in process.log().splitlines()
        if "origin record written" in line and f"/{name}" in line
    )


def test_one_writer_and_the_follower_takes_over_after_a_kill(
    env: Env, snapready_identity: IdentityFactory, tmp_path: Path
) -> None:
    lease = f"failover-{env.namespace}"[:60]
    settings = {
        "SNAPREADY_LEADER__LEASE_NAME": lease,
        "SNAPREADY_LEADER__LEASE_NAMESPACE": env.namespace,
        "SNAPREADY_LEADER__LEASE_DURATION_SECONDS": str(LEASE_SECONDS),
        # Origin records are written in the tracked namespaces only (outcomes.namespaces).
        "SNAPREADY_OUTCOMES__NAMESPACES": f'["{env.namespace}"]',
    }
    certs = generate_certs(tmp_path / "certs")
    kubeconfig = require_token(snapready_identity(env.namespace, lease_name=lease).kubeconfig)
    first = start_snapready(tmp_path / "a", certs, kubeconfig=kubeconfig, env=settings)
    second = start_snapready(tmp_path / "b", certs, kubeconfig=kubeconfig, env=settings)
    try:
        processes = (first, second)
        wait_for(
            "one leader",
            lambda: sorted(leader_of(p) for p in processes) == ["follower", "leader"],
            timeout=30,
        )
        leader = next(p for p in processes if leader_of(p) == "leader")
        follower = second if leader is first else first
        # the test's own source must not write: only the two processes do (a stop that timed
        # out left its controllers running, and they wrote the records first: a CI flake)
        assert env.source.stop(timeout=30), "the test's own snapready did not stop"
        holder = lease_holder(env.api, env.namespace, lease)
        assert holder, "the Lease names the leader"

        pod = env.pod("origin-1")
        admitted = jsonpatch.apply_patch(pod, list(env.mutate(pod).patch))
        admitted["spec"]["nodeName"] = env.node
        core = client.CoreV1Api(env.api)
        core.create_namespaced_pod(env.namespace, client.V1Pod.model_validate(admitted))
        snapshot(env, "before-kill", "origin-1")
        wait_for("record by the leader", lambda: recorded(env, "before-kill"), timeout=20)
        # The annotation can be visible before the writer's log line is: wait for the line.
        wait_for("leader's log line", lambda: writes(leader, "before-kill") == 1, timeout=5)
        assert writes(follower, "before-kill") == 0

        os.kill(leader.process.pid, signal.SIGKILL)
        leader.process.wait(10)
        killed_at = time.monotonic()
        wait_for("takeover", lambda: leader_of(follower) == "leader", timeout=LEASE_SECONDS + 15)
        took = time.monotonic() - killed_at
        assert took <= LEASE_SECONDS + 10, f"takeover after {took:.1f} s"
        assert lease_holder(env.api, env.namespace, lease) not in ("", holder)

        snapshot(env, "after-kill", "origin-1")
        wait_for("the new leader writes", lambda: recorded(env, "after-kill"), timeout=20)
        wait_for("new leader's log line", lambda: writes(follower, "after-kill") == 1, timeout=5)
    finally:
        for process in (first, second):
            process.stop()


def test_a_frozen_leader_writes_nothing_after_it_wakes_and_nothing_is_written_twice(
    env: Env, snapready_identity: IdentityFactory, tmp_path: Path
) -> None:
    """The leader is stopped (SIGSTOP) with four pods about to be decided (Ready, no restore
    evidence: ``missed`` once the 6 s settle time ends, during the freeze) and two new
    PodSnapshots to record. The follower takes over after the lease duration and writes it all;
    the ex-leader wakes then (frozen ~15-20 s: past its renew deadline, so its last renew no
    longer covers it) believing it leads, and writes nothing (its writes are fenced by monotonic
    time since its last renew). Every pod has one Event, from the new leader."""
    lease = f"freeze-{env.namespace}"[:60]
    settings = {
        "SNAPREADY_LEADER__LEASE_NAME": lease,
        "SNAPREADY_LEADER__LEASE_NAMESPACE": env.namespace,
        "SNAPREADY_LEADER__LEASE_DURATION_SECONDS": str(LEASE_SECONDS),
        "SNAPREADY_OUTCOMES__NAMESPACES": f'["{env.namespace}"]',
        "SNAPREADY_OUTCOMES__SETTLE_SECONDS": "6",
    }
    take_snapshot(env)

    def ready() -> bool:
        view = env.source.state().snapshots.named(env.namespace, "snap-1")
        return view is not None and view.ready

    wait_for("snapshot ready in the engine's cache", ready, timeout=10)
    # the test's own source must not write: only the two processes do (a stop that timed out
    # left its controllers running, and they wrote the records first: a CI flake)
    assert env.source.stop(timeout=30), "the test's own snapready did not stop"
    certs = generate_certs(tmp_path / "certs")
    kubeconfig = require_token(snapready_identity(env.namespace, lease_name=lease).kubeconfig)
    first = start_snapready(tmp_path / "a", certs, kubeconfig=kubeconfig, env=settings)
    second = start_snapready(tmp_path / "b", certs, kubeconfig=kubeconfig, env=settings)
    try:
        processes = (first, second)
        wait_for(
            "one leader",
            lambda: sorted(leader_of(p) for p in processes) == ["follower", "leader"],
            timeout=30,
        )
        leader = next(p for p in processes if leader_of(p) == "leader")
        follower = second if leader is first else first
        old_holder = lease_holder(env.api, env.namespace, lease)
        pods = [f"frozen-pod-{i}" for i in range(4)]
        for name in pods:
            create_admitted(env, name)
            turn_ready(env, name, after=40)
        time.sleep(1)  # the leader has them pending, settle time running
        os.kill(leader.process.pid, signal.SIGSTOP)
        frozen_at = time.monotonic()
        try:
            for name in ("frozen-1", "frozen-2"):
                snapshot(env, name, "origin")
            wait_for(
                "takeover",
                lambda: lease_holder(env.api, env.namespace, lease) not in ("", old_holder),
                timeout=LEASE_SECONDS + 15,
            )
            new_holder = lease_holder(env.api, env.namespace, lease)
            for name in ("frozen-1", "frozen-2"):
                wait_for(f"{name} recorded", lambda n=name: recorded(env, n), timeout=20)  # type: ignore[misc]
            wait_for("outcomes", lambda: all(recorded_outcome(env, p) for p in pods), timeout=20)
            renew_deadline = LeaderSettings().renew_deadline_seconds
            assert time.monotonic() - frozen_at > renew_deadline, "it wakes past its fence"
        finally:
            os.kill(leader.process.pid, signal.SIGCONT)
        time.sleep(8)  # the ex-leader's loops run again, with what they had pending
        assert leader.process.poll() is None, leader.log()
        for name in ("frozen-1", "frozen-2"):
            assert writes(leader, name) == 0, leader.log()
            assert writes(follower, name) == 1
        for pod in pods:
            missed = events(env, "SnapshotRestoreMissed", pod)
            assert len(missed) == 1, missed
            assert missed[0]["reportingInstance"] == new_holder
            assert (missed[0].get("series") or {}).get("count") in (None, 1)
        assert leader_of(leader) == "follower"
    finally:
        for process in (first, second):
            process.stop()
