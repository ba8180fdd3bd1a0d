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
from typing import Any, cast

import jsonpatch
from kubernetes import client

from tests.cluster.test_snapshots import GROUP, VERSION, Env, env
from tests.envtest.controlplane import ControlPlane
from tests.envtest.plugin import wait_for
from tests.support.snapready_proc import SnapreadyProcess, generate_certs, start_snapready

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
    """A Ready PodSnapshot of ``llm-policy`` naming ``origin`` (created as GKE's agent would)."""
    custom = client.CustomObjectsApi(env.api)
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
    """Whether the PodSnapshot carries an origin record."""
    obj = cast(
        "dict[str, Any]",
        client.CustomObjectsApi(env.api).get_namespaced_custom_object(
            GROUP, VERSION, env.namespace, "podsnapshots", name
        ),
    )
    return "snapready.io/origin" in (obj["metadata"].get("annotations") or {})


def writes(process: SnapreadyProcess, name: str) -> int:
    """How many times ``process`` logged writing the origin record of ``name``."""
    return sum(
        1
        for line in process.log().splitlines()
        if "origin record written" in line and f"/{name}" in line
    )


def test_one_writer_and_the_follower_takes_over_after_a_kill(
    env: Env, control_plane: ControlPlane, tmp_path: Path
) -> None:
    lease = f"failover-{env.namespace}"[:60]
    settings = {
        "SNAPREADY_LEADER__LEASE_NAME": lease,
        "SNAPREADY_LEADER__LEASE_NAMESPACE": env.namespace,
        "SNAPREADY_LEADER__LEASE_DURATION_SECONDS": str(LEASE_SECONDS),
    }
    certs = generate_certs(tmp_path / "certs")
    kubeconfig = control_plane.admin_kubeconfig
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
        env.source.stop()  # the test's own source must not write: only the two processes do
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
