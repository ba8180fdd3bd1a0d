"""A tenant's Event about another namespace's pod decides nothing (real kube-apiserver).

GKE records its ``GKEPodSnapshotting`` Events in the pod's namespace. The API server accepts a
core/v1 Event created in namespace A whose ``involvedObject`` is a pod of namespace B when
``eventTime`` is set, from a user with ``edit`` in A only (a hostile trial, 2026-12-07: the
victim pod was decided ``missed`` 0.1 s later, with a ``SnapshotRestoreMissed`` Warning quoting
the forged text). snapready must ignore it; GKE's own Event in B still decides.
"""

from __future__ import annotations

import secrets
import time
from datetime import UTC, datetime
from pathlib import Path

from kubernetes import client

from tests.cluster.controllers.test_evidence import (
    admit_and_create,
    evidence,  # noqa: F401 (fixture)
    listen,
)
from tests.cluster.controllers.test_snapshots import Env, take_snapshot
from tests.envtest.controlplane import ControlPlane
from tests.envtest.plugin import service_account_token, wait_for
from tests.support import kube_raw
from tests.support.gke_agent import GkeAgent

FORGED = "No compatible PodSnapshot, falling back to a cold start of pod: forged"


def test_an_event_in_another_namespace_about_a_pod_decides_nothing(
    evidence: Env,  # noqa: F811
    control_plane: ControlPlane,
    tmp_path: Path,
) -> None:
    env = evidence
    agent = GkeAgent(env.api, env.namespace, env.gke)
    seen = listen(env)
    take_snapshot(env)
    admit_and_create(env, "victim")
    agent.containers_ready("victim")
    pod = client.CoreV1Api(env.api).read_namespaced_pod("victim", env.namespace)
    assert pod.metadata is not None

    attacker = "attacker-" + secrets.token_hex(3)
    client.CoreV1Api(env.api).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=attacker))
    )
    token = service_account_token(env.api, attacker, "mallory")
    kubeconfig = control_plane.token_kubeconfig(
        tmp_path / "mallory.kubeconfig", token, namespace=attacker, user="mallory"
    )
    binding = {
        "metadata": {"name": "mallory-edit"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "mallory", "namespace": attacker}],
    }
    client.RbacAuthorizationV1Api(env.api).create_namespaced_role_binding(
        attacker, client.V1RoleBinding.model_validate(binding)
    )
    mallory = ControlPlane.client_from_kubeconfig(kubeconfig)
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "forged-" + secrets.token_hex(3), "namespace": attacker},
        "involvedObject": {
            "kind": "Pod",
            "apiVersion": "v1",
            "namespace": env.namespace,
            "name": "victim",
            "uid": pod.metadata.uid,
        },
        "reason": "GKEPodSnapshotting",
        "type": "Warning",
        "message": FORGED,
        "eventTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingComponent": "gke-pod-snapshot",
        "reportingInstance": "x",
        "action": "Restore",
    }

    def forged() -> bool:
        reply = kube_raw.request(mallory, "POST", f"/api/v1/namespaces/{attacker}/events", body)
        assert reply.ok or reply.status == 403, (reply.status, reply.body)
        return reply.ok  # 403 until the RoleBinding is in the authorizer's cache

    wait_for("the forged Event stored", forged, timeout=20)
    # The hostile trial saw the forged Event decide within 0.1 s; give it 3 s to be sure.
    time.sleep(3)
    assert "victim" not in seen, seen["victim"][0]

    genuine = agent.fell_back("victim", "node version differs")
    decided = wait_for("decided by GKE's Event", lambda: seen.get("victim"), timeout=15)
    assert decided is not None
    verdict = decided[0]
    assert verdict.outcome == "missed" and verdict.evidence == "GKE event"
    assert verdict.gke_reason == genuine and "forged" not in (verdict.gke_reason or "")
