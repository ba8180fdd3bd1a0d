"""Cluster mode while the API surface changes: CRDs installed, deleted and re-created.

This runs on a private control plane (started here, ~10 s): deleting the PodSnapshotPolicy CRD or
installing a ComputeClass CRD on the shared one would break the tests running beside it.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.cluster.conftest import StartCluster
from tests.envtest.controlplane import ControlPlane, start
from tests.envtest.plugin import CRDS, install_crds, wait_for
from tests.support.identity import IdentityFactory
from tests.support.kube_real import COMPUTE_CLASSES, POLICIES_V1ALPHA1, create_policy, policy
from webhook.cluster.api.client import connect
from webhook.cluster.api.snapshot_reader import read_compute_classes
from webhook.server.metrics import Metrics

POLICY_CRD = "podsnapshotpolicies.podsnapshot.gke.io"
COMPUTE_CLASS_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "computeclasses.cloud.google.com"},
    "spec": {
        "group": "cloud.google.com",
        "scope": "Cluster",
        "names": {
            "kind": "ComputeClass",
            "listKind": "ComputeClassList",
            "plural": "computeclasses",
            "singular": "computeclass",
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                        },
                    }
                },
            }
        ],
    },
}


@pytest.fixture(scope="module")
def private_plane(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    """A control plane of this module's own (same binaries as the shared one)."""
    directory = tmp_path_factory.mktemp("private-plane")
    plane = start(control_plane.assets, directory / "run", directory / "controlplane.json")
    yield plane
    plane.stop()


def policy_crd_v1alpha1_only(path: Path) -> Path:
    """The PodSnapshotPolicy CRD of ``tests/data/crds`` serving only ``v1alpha1`` (older GKE)."""
    crd = next(
        d for d in yaml.safe_load_all(CRDS.read_text()) if d["metadata"]["name"] == POLICY_CRD
    )
    crd = copy.deepcopy(crd)
    crd["spec"]["versions"][0]["name"] = "v1alpha1"
    path.write_text(yaml.safe_dump(crd))
    return path


def served_metric(metrics: Metrics) -> dict[str, float]:
    """``snapready_source_api_served`` by resource, as a scrape would read it."""
    return {
        sample.labels["resource"]: sample.value
        for family in metrics.registry.collect()
        if family.name == "snapready_source_api_served"
        for sample in family.samples
    }


def test_apis_installed_deleted_and_recreated_while_running(
    private_plane: ControlPlane,
    start_cluster: StartCluster,
    snapready_identity: IdentityFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="snapready.kube")
    admin = private_plane.api_client()
    extensions = client.ApiextensionsV1Api(admin)
    install_crds(admin)
    client.CoreV1Api(admin).create_namespace(
        client.V1Namespace.model_validate({"metadata": {"name": "snap"}})
    )
    create_policy(admin, policy("first", "snap", {"app": "llm"}))
    # Re-check not-served APIs every 0.5 s (also the /version interval; watches last 1-2 s).
    identity = snapready_identity("snap", plane=private_plane)
    cluster = start_cluster(kubeconfig=identity.kubeconfig, resync_seconds=0.5)
    metrics = Metrics()
    metrics.watch_state(cluster.source.state)

    # 1. No ComputeClass API: 404 -> "not served", synced, unknown (None, not empty).
    state = cluster.state()
    assert state.synced
    assert cluster.status("computeclasses") == "not served"
    assert state.compute_classes is None
    assert [p.name for p in state.policies.all()] == ["first"]
    wait_for(
        "two re-checks of the missing API",
        lambda: sum(path == COMPUTE_CLASSES for path, _ in cluster.spy.errors) >= 3,
    )
    warned = [r for r in caplog.records if "computeclasses: not served" in r.getMessage()]
    assert len(warned) == 1, "logged once, not at every re-check"
    assert served_metric(metrics)["computeclasses"] == 0.0
    # ``snapready explain`` reads ComputeClasses live, as snapready's identity: not served is
    # None (not known) and no note.
    reader = connect(identity.kubeconfig, request_timeout=10)
    notes: list[str] = []
    assert read_compute_classes(reader.transport, 100, notes) is None and notes == []

    # 2. The ComputeClass CRD appears: picked up at the next re-check, then watched.
    compute_class_crd = tmp_path / "computeclass.yaml"
    compute_class_crd.write_text(yaml.safe_dump(COMPUTE_CLASS_CRD))
    install_crds(admin, compute_class_crd)
    wait_for("ComputeClasses served", lambda: cluster.state().compute_classes == {})
    assert cluster.status("computeclasses") == "synced"
    mig = {
        "apiVersion": "cloud.google.com/v1",
        "kind": "ComputeClass",
        "metadata": {"name": "mig"},
        "spec": {
            "priorities": [
                {
                    "gpu": {
                        "type": "nvidia-h100-80gb",
                        "gpuSharing": {"gpuPartitionSize": "1g.10gb"},
                    }
                },
                {"machineFamily": "a3"},
            ]
        },
    }
    client.CustomObjectsApi(admin).create_cluster_custom_object(
        "cloud.google.com", "v1", "computeclasses", mig
    )
    wait_for("the ComputeClass", lambda: "mig" in (cluster.state().compute_classes or {}))
    facts = (cluster.state().compute_classes or {})["mig"]
    assert (facts.enables_mig, facts.enables_gpu_sharing, facts.machine_families) == (
        True,
        False,
        frozenset({"a3"}),
    )
    assert served_metric(metrics)["computeclasses"] == 1.0
    assert read_compute_classes(reader.transport, 100, notes) == {"mig": facts} and not notes
    reader.close()

    # 3. The PodSnapshotPolicy CRD is deleted (its policies with it): "not served", empty,
    #    still synced (admission goes on: nothing is selected).
    extensions.delete_custom_resource_definition(POLICY_CRD)
    wait_for("policies not served", lambda: cluster.status("podsnapshotpolicies") == "not served")
    state = cluster.state()
    assert (len(state.policies), state.synced) == (0, True)
    assert state.policies.select("snap", {"app": "llm"}) == ()
    assert served_metric(metrics)["podsnapshotpolicies"] == 0.0

    # 4. Re-created (same v1): synced again; a policy created afterwards appears.
    install_crds(admin)
    wait_for("policies served again", lambda: cluster.status("podsnapshotpolicies") == "synced")
    create_policy(admin, policy("second", "snap", {"app": "llm"}))
    wait_for(
        "the new policy", lambda: [p.name for p in cluster.state().policies.all()] == ["second"]
    )
    assert served_metric(metrics)["podsnapshotpolicies"] == 1.0

    # 5. Re-created serving only v1alpha1 (older GKE): the cache falls back to it.
    extensions.delete_custom_resource_definition(POLICY_CRD)
    wait_for("policies not served", lambda: cluster.status("podsnapshotpolicies") == "not served")
    install_crds(admin, policy_crd_v1alpha1_only(tmp_path / "v1alpha1.yaml"))
    wait_for(
        "the v1alpha1 fallback",
        lambda: cluster.status("podsnapshotpolicies") == "synced (v1alpha1)",
    )
    create_policy(admin, policy("third", "snap", {"app": "llm"}, version="v1alpha1"))
    wait_for(
        "the v1alpha1 policy", lambda: [p.name for p in cluster.state().policies.all()] == ["third"]
    )
    assert any(w.path == POLICIES_V1ALPHA1 for w in cluster.spy.watches), "watched, not polled"
    admin.close()  # type: ignore[no-untyped-call]
