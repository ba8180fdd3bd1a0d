"""Cluster facts from raw API objects (``webhook.snapshots.facts``): node pools, namespaces,
ComputeClasses.

Node and Namespace inputs are the captured API lists in ``tests/data/kube-api/``; expected values
are read off those files by hand (see ``../shared/data/README.md``: pools ``l4-sandbox-pool``,
``e2-pool``, ``a100-mig-pool``). ComputeClass inputs are hand-written in the shape of GKE's
"ComputeClass" CRD reference (no capture exists: the test cluster did not serve the API).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support.fake_apiserver import load
from webhook.snapshots.facts import (
    compute_class_facts,
    gke_version,
    machine_family,
    namespace_labels,
    node_pools,
    node_view,
)
from webhook.snapshots.state import ComputeClassFacts, NodePoolFacts, Taint

NODES = load("nodes-list.json")["items"]
NAMESPACES = load("namespaces-list.json")["items"]


def _node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name, "labels": labels}}


def test_captured_nodes_fold_into_their_three_pools() -> None:
    views = [view for view in map(node_view, NODES) if view is not None]
    pools = node_pools(views)
    assert pools == {
        "l4-sandbox-pool": NodePoolFacts(
            name="l4-sandbox-pool",
            node_count=1,
            instance_types=frozenset({"g2-standard-48"}),
            machine_families=frozenset({"g2"}),
            accelerators=frozenset({"nvidia-l4"}),
            accelerator_counts=frozenset({"4"}),
            architectures=frozenset({"amd64"}),
            sandboxes=frozenset({"gvisor"}),
            taints=frozenset({Taint("nvidia.com/gpu", "present", "NoSchedule")}),
        ),
        "e2-pool": NodePoolFacts(
            name="e2-pool",
            node_count=1,
            instance_types=frozenset({"e2-standard-8"}),
            machine_families=frozenset({"e2"}),
            architectures=frozenset({"amd64"}),
        ),
        "a100-mig-pool": NodePoolFacts(
            name="a100-mig-pool",
            node_count=1,
            instance_types=frozenset({"a2-highgpu-1g"}),
            machine_families=frozenset({"a2"}),
            accelerators=frozenset({"nvidia-tesla-a100"}),
            partition_sizes=frozenset({"1g.5gb"}),
            architectures=frozenset({"amd64"}),
            # its node's only taint, node.kubernetes.io/not-ready, comes and goes: not kept
            sandboxes=frozenset({"gvisor"}),
        ),
    }


def test_node_view_keeps_only_the_labels_rules_read() -> None:
    mig_node = next(n for n in NODES if n["metadata"]["name"] == "gke-snap-mig-pool-41aa")
    view = node_view(mig_node)
    assert view is not None
    kept = dict(view.labels)
    assert kept["sandbox.gke.io/runtime"] == "gvisor", "GKE Sandbox pools are where pods land"
    assert "kubernetes.io/os" not in kept
    assert kept["cloud.google.com/gke-gpu-partition-size"] == "1g.5gb"


def test_pool_facts_are_the_union_over_its_nodes() -> None:
    nodes = [
        _node(
            "a",
            {
                "cloud.google.com/gke-nodepool": "gpu",
                "node.kubernetes.io/instance-type": "g2-standard-4",
            },
        ),
        _node(
            "b",
            {
                "cloud.google.com/gke-nodepool": "gpu",
                "node.kubernetes.io/instance-type": "g2-standard-48",
                "cloud.google.com/gke-gpu-sharing-strategy": "time-sharing",
                "kubernetes.io/arch": "amd64",
            },
        ),
        _node("c", {"kubernetes.io/hostname": "c"}),
    ]
    pools = node_pools(v for v in map(node_view, nodes) if v is not None)
    assert list(pools) == ["gpu"]
    gpu = pools["gpu"]
    assert gpu.node_count == 2
    assert gpu.instance_types == {"g2-standard-4", "g2-standard-48"}
    assert gpu.machine_families == {"g2"}
    assert gpu.sharing_strategies == {"time-sharing"}


@pytest.mark.parametrize(
    ("labels", "family"),
    [
        pytest.param(
            {"node.kubernetes.io/instance-type": "n2-standard-8"},
            "n2",
            id="derives-n2-from-instance-type",
        ),
        pytest.param(
            {
                "node.kubernetes.io/instance-type": "e2-medium",
                "cloud.google.com/machine-family": "e2",
            },
            "e2",
            id="keeps-the-family-label",
        ),
        pytest.param(
            {
                "node.kubernetes.io/instance-type": "g2-standard-8",
                "cloud.google.com/machine-family": "n2",
            },
            "n2",
            id="label-wins-over-prefix",
        ),
        pytest.param({}, None, id="no-family-without-either-label"),
    ],
)
def test_family_derived_from_instance_type_only_when_label_missing(
    labels: dict[str, str], family: str | None
) -> None:
    view = node_view(_node("n", {"cloud.google.com/gke-nodepool": "p", **labels}))
    assert view is not None
    assert dict(view.labels).get("cloud.google.com/machine-family") == family


@pytest.mark.parametrize(
    ("machine_type", "family"),
    [
        pytest.param("g2-standard-48", "g2", id="g2-standard-48-is-g2"),
        pytest.param("a3-highgpu-1g", "a3", id="a3-highgpu-1g-is-a3"),
        pytest.param("custom", None, id="dashless-name-has-no-family"),
        pytest.param("", None, id="empty-has-no-family"),
    ],
)
def test_machine_family_from_machine_type(machine_type: str, family: str | None) -> None:
    assert machine_family(machine_type) == family


def test_namespace_keeps_only_prefixed_labels() -> None:
    snap = copy.deepcopy(next(n for n in NAMESPACES if n["metadata"]["name"] == "snap"))
    assert namespace_labels(snap, "snapready.io/") == {}
    snap["metadata"]["labels"]["snapready.io/enforcement"] = "warn"
    assert namespace_labels(snap, "snapready.io/") == {"snapready.io/enforcement": "warn"}


def _class(*priorities: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "cloud.google.com/v1",
        "kind": "ComputeClass",
        "metadata": {"name": "c"},
        "spec": {"priorities": list(priorities)},
    }


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(
            _class({"machineFamily": "n2"}, {"machineType": "e2-standard-8"}),
            ComputeClassFacts("c", frozenset({"n2", "e2"}), families_known=True),
            id="families-from-machine-family-and-machine-type",
        ),
        pytest.param(
            _class(
                {
                    "gpu": {
                        "type": "nvidia-h100-80gb",
                        "count": 1,
                        "gpuSharing": {"gpuPartitionSize": "1g.10gb"},
                    }
                }
            ),
            # H100s run only on A3 machines: the class makes A3 (Compute Engine GPU types)
            ComputeClassFacts(
                "c",
                frozenset({"a3"}),
                enables_mig=True,
                gpu_drivers=frozenset({"default"}),
                families_known=True,
            ),
            id="gpu-partition-size-enables-mig",
        ),
        pytest.param(
            _class(
                {"machineFamily": "g2"},
                {
                    "gpu": {
                        "type": "nvidia-l4",
                        "gpuSharing": {
                            "sharingStrategy": "TIME_SHARING",
                            "maxSharedClientsPerGPU": 2,
                        },
                    }
                },
            ),
            ComputeClassFacts(
                "c",
                frozenset({"g2"}),
                enables_gpu_sharing=True,
                gpu_drivers=frozenset({"default"}),
                families_known=True,
            ),
            id="sharing-strategy-in-any-priority-enables-sharing",
        ),
        pytest.param(
            _class({"nodepools": ["pool-a"]}, {"gpu": {"type": "nvidia-l4", "count": 1}}),
            ComputeClassFacts(
                "c", frozenset({"g2"}), gpu_drivers=frozenset({"default"})
            ),  # no driverVersion: GKE's default branch; a node pool may be of any family
            id="plain-gpu-and-nodepool-priorities-enable-nothing",
        ),
        pytest.param(
            _class(
                {
                    "machineType": "g4-standard-48",
                    "gpu": {"type": "nvidia-rtx-pro-6000", "driverVersion": "latest"},
                },
                {
                    "machineType": "g4-standard-48",
                    "spot": True,
                    "gpu": {"type": "nvidia-rtx-pro-6000", "driverVersion": "latest"},
                },
            ),
            ComputeClassFacts(
                "c",
                frozenset({"g4"}),
                machine_types=frozenset({"g4-standard-48"}),
                gpu_drivers=frozenset({"latest"}),
                families_known=True,
            ),
            id="machine-types-and-latest-driver-of-every-gpu-priority",
        ),
        pytest.param(
            _class({"machineType": "g2-standard-8"}, {"machineFamily": "g2"}),
            # a family priority: any shape
            ComputeClassFacts("c", frozenset({"g2"}), families_known=True),
            id="machine-types-only-when-every-priority-names-one",
        ),
        pytest.param(
            {"kind": "ComputeClass", "metadata": {"name": "c"}, "spec": None},
            ComputeClassFacts("c"),
            id="null-spec-enables-nothing",
        ),
        pytest.param(
            {"kind": "ComputeClass", "metadata": {}}, None, id="nameless-object-is-skipped"
        ),
    ],
)
def test_compute_class_facts(obj: dict[str, Any], expected: ComputeClassFacts | None) -> None:
    assert compute_class_facts(obj) == expected


@pytest.mark.parametrize(
    ("body", "version"),
    [
        pytest.param(
            load("version-gke.json"), "1.35.3-gke.1234000", id="captured-gke-version-loses-its-v"
        ),
        pytest.param({"gitVersion": "1.36.0"}, "1.36.0", id="version-without-v-kept"),
        pytest.param({"major": "1"}, None, id="no-git-version-is-unknown"),
        pytest.param({"gitVersion": ""}, None, id="empty-git-version-is-unknown"),
    ],
)
def test_gke_version_from_version_endpoint(body: dict[str, Any], version: str | None) -> None:
    assert gke_version(body) == version


def test_a_compute_class_knows_its_families_only_when_every_priority_names_one() -> None:
    """A ``nodepools`` priority, or a ``gpu`` one of a model no table knows, can make any
    machine family: the restore prediction must not read ``machine_families`` as all the class
    makes (a review found ``[{machineFamily: c3}, {nodepools: [sandbox-n2]}]`` predicted a miss
    for an n2 snapshot). A known GPU model runs on one series (a trial: an H100-only class was
    not judged)."""

    def facts(*priorities: dict[str, Any]) -> ComputeClassFacts:
        found = compute_class_facts(
            {"metadata": {"name": "c"}, "spec": {"priorities": list(priorities)}}
        )
        assert found is not None
        return found

    assert facts({"machineFamily": "n2"}, {"machineType": "c3-standard-8"}).families_known
    mixed = facts({"machineFamily": "c3"}, {"nodepools": ["sandbox-n2"]})
    assert mixed.machine_families == {"c3"} and not mixed.families_known
    assert not facts(
        {"gpu": {"type": "nvidia-next", "count": 1}}, {"machineFamily": "a2"}
    ).families_known, "a GPU model of no known series"
    by_gpu = facts({"gpu": {"type": "nvidia-l4", "count": 1}}, {"machineFamily": "a2"})
    assert by_gpu.families_known and by_gpu.machine_families == {"g2", "a2"}, (
        "an L4 runs only on G2 machines (Compute Engine GPU machine types)"
    )
    assert not facts().families_known


def test_a_pools_taints_are_the_lasting_ones_every_node_carries() -> None:
    """A pool's own taints (GPU, GKE Sandbox, a team's ``dedicated``) are on each of its nodes;
    Kubernetes' condition taints and the autoscaler's marks come and go on single nodes, and a
    ``PreferNoSchedule`` taint keeps no pod off."""

    def tainted(name: str, *taints: dict[str, str]) -> dict[str, Any]:
        node = _node(name, {"cloud.google.com/gke-nodepool": "p"})
        node["spec"] = {"taints": list(taints)}
        return node

    gpu = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    team = {"key": "dedicated", "value": "inference", "effect": "NoExecute"}
    nodes = [
        tainted(
            "a", gpu, team, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
        ),
        tainted("b", gpu, {"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}),
        tainted("c", gpu, team, {"key": "soft", "effect": "PreferNoSchedule"}),
        tainted("d", gpu, team, {"key": 7, "effect": "NoSchedule"}),  # type: ignore[dict-item]
    ]
    views = [view for view in map(node_view, nodes) if view is not None]
    assert views[0].taints == (
        Taint("dedicated", "inference", "NoExecute"),
        Taint("nvidia.com/gpu", "present", "NoSchedule"),
    )
    assert node_pools(views)["p"].taints == {Taint("nvidia.com/gpu", "present", "NoSchedule")}
    assert node_pools(views[2:])["p"].taints == {
        Taint("nvidia.com/gpu", "present", "NoSchedule"),
        Taint("dedicated", "inference", "NoExecute"),
    }
