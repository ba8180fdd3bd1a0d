"""Cluster facts from raw API objects: node labels, node pools, ComputeClasses, namespaces, version.

Turns Node, Namespace and ComputeClass JSON (as listed or watched from the API server) into the
small frozen values ``ClusterState`` holds, keeping only the labels and fields the rules read so a
large cluster costs little memory. Label keys are GKE's (docs/gke-facts.md#section-5), shared with
``hardware``. Pure module: the cluster caches (``cluster.api.caches``) call it; tests call it
directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webhook.base.types import shared
from webhook.kube.gke import (
    ACCELERATOR,
    ACCELERATOR_COUNT,
    ACCELERATOR_FAMILIES,
    ARCHITECTURE,
    GPU_DRIVER_VERSION,
    INSTANCE_TYPE,
    MACHINE_FAMILY,
    NODE_POOL,
    PARTITION_SIZE,
    SANDBOX_RUNTIME,
    SHARING_STRATEGY,
    instance_family,
)
from webhook.snapshots.state import ComputeClassFacts, NodePoolFacts, NodeView, Taint

NODE_FACT_LABELS: tuple[str, ...] = (
    MACHINE_FAMILY,
    INSTANCE_TYPE,
    ACCELERATOR,
    ACCELERATOR_COUNT,
    PARTITION_SIZE,
    SHARING_STRATEGY,
    ARCHITECTURE,
    GPU_DRIVER_VERSION,
    SANDBOX_RUNTIME,
)
"""The only Node labels kept (besides the pool name): what the machine and GPU rules and the
restore prediction read."""
TRANSIENT_TAINTS = (
    "node.kubernetes.io/",
    "node.cloudprovider.kubernetes.io/",
    "ToBeDeletedByClusterAutoscaler",
    "DeletionCandidateOfClusterAutoscaler",
    "cloud.google.com/impending-node-termination",
)
"""Taint key prefixes left out of ``NodeView.taints``: the node lifecycle controller's
conditions (``not-ready``, ``unschedulable``...: pkg/controller/nodelifecycle), the cloud node
controller's (``uninitialized``, ``shutdown``), the cluster autoscaler's scale-down marks and
GKE's mark on a Spot or preemptible node about to be reclaimed come and go on single nodes; a
pool's own taints stay on all of them."""


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = obj.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    return labels if isinstance(labels, dict) else {}


def machine_family(instance_type: str) -> str | None:
    """Machine family of a Compute Engine machine type, as ``kube.gke.instance_family`` reads
    it (``g2-standard-48`` -> ``g2``, ``custom-4-8192`` -> ``n1``: a node and a pod pinned to
    its type must agree); None for an empty or dash-less value (Compute Engine machine types
    are always ``<family>-<shape>``)."""
    family, dash, _ = instance_type.partition("-")
    return instance_family(instance_type) if dash and family else None


def node_view(obj: Mapping[str, Any]) -> NodeView | None:
    """Compact view of a Node; None when it carries no ``cloud.google.com/gke-nodepool`` label.

    A node without the family label gets one derived from its instance type (GKE sets both on
    current versions; older nodes and some node images only carry the instance type).
    """
    labels = _labels(obj)
    pool = labels.get(NODE_POOL)
    if not isinstance(pool, str) or not pool:
        return None
    # Nodes of a pool repeat every kept value: one copy for all (``shared``), and no string of
    # each decoded page outlives it just to hold the same value again.
    kept = {
        key: shared(labels[key]) for key in NODE_FACT_LABELS if isinstance(labels.get(key), str)
    }
    if MACHINE_FAMILY not in kept and INSTANCE_TYPE in kept:
        family = machine_family(kept[INSTANCE_TYPE])
        if family is not None:
            kept[MACHINE_FAMILY] = shared(family)
    return NodeView(
        shared(pool), tuple(sorted(kept.items())), shared(node_version(obj)), _taints(obj)
    )


def _taints(obj: Mapping[str, Any]) -> tuple[Taint, ...]:
    """The node's lasting ``NoSchedule``/``NoExecute`` taints (``TRANSIENT_TAINTS`` left out)."""
    spec = obj.get("spec")
    raw = spec.get("taints") if isinstance(spec, dict) else None
    if not isinstance(raw, list) or not raw:
        return ()
    out = set()
    for taint in raw:
        if not isinstance(taint, dict):
            continue
        key, value, effect = taint.get("key"), taint.get("value") or "", taint.get("effect")
        if not isinstance(key, str) or not isinstance(value, str) or not isinstance(effect, str):
            continue
        if effect in ("NoSchedule", "NoExecute") and not key.startswith(TRANSIENT_TAINTS):
            out.add(Taint(shared(key), shared(value), shared(effect)))
    return tuple(sorted(out))


def node_version(obj: Mapping[str, Any]) -> str | None:
    """``status.nodeInfo.kubeletVersion`` without a leading ``v`` (``1.35.3-gke.1234000``)."""
    status = obj.get("status")
    info = status.get("nodeInfo") if isinstance(status, dict) else None
    version = info.get("kubeletVersion") if isinstance(info, dict) else None
    if not isinstance(version, str) or not version:
        return None
    return version[1:] if version.startswith("v") else version


def node_pools(views: Iterable[NodeView]) -> dict[str, NodePoolFacts]:
    """Union of label values per pool, with the number of nodes seen in it.

    A pool that has no node (scaled to zero, not yet created) is simply absent: callers report it
    as unknown instead of guessing.
    """
    values: dict[str, dict[str, set[str]]] = {}
    counts: dict[str, int] = {}
    versions: dict[str, set[str]] = {}
    taints: dict[str, frozenset[Taint]] = {}
    for view in views:
        per_label = values.setdefault(view.pool, {key: set() for key in NODE_FACT_LABELS})
        counts[view.pool] = counts.get(view.pool, 0) + 1
        for key, value in view.labels:
            per_label[key].add(value)
        if view.version:
            versions.setdefault(view.pool, set()).add(view.version)
        seen = taints.get(view.pool)
        taints[view.pool] = frozenset(view.taints) if seen is None else seen & set(view.taints)
    return {
        pool: _pool_facts(pool, counts[pool], per_label, versions.get(pool, set()), taints[pool])
        for pool, per_label in values.items()
    }


def _pool_facts(
    pool: str,
    count: int,
    per_label: Mapping[str, set[str]],
    versions: set[str],
    taints: frozenset[Taint] = frozenset(),
) -> NodePoolFacts:
    return NodePoolFacts(
        name=pool,
        node_count=count,
        instance_types=frozenset(per_label[INSTANCE_TYPE]),
        machine_families=frozenset(per_label[MACHINE_FAMILY]),
        accelerators=frozenset(per_label[ACCELERATOR]),
        accelerator_counts=frozenset(per_label[ACCELERATOR_COUNT]),
        partition_sizes=frozenset(per_label[PARTITION_SIZE]),
        sharing_strategies=frozenset(per_label[SHARING_STRATEGY]),
        architectures=frozenset(per_label[ARCHITECTURE]),
        versions=frozenset(versions),
        gpu_drivers=frozenset(per_label[GPU_DRIVER_VERSION]),
        sandboxes=frozenset(per_label[SANDBOX_RUNTIME]),
        taints=taints,
    )


def namespace_labels(obj: Mapping[str, Any], prefix: str) -> dict[str, str]:
    """The labels of a Namespace that start with ``prefix`` (``snapready.io/ignore`` ...).

    Only our own labels are kept: admission reads ``<prefix>ignore`` and ``<prefix>enforcement``.
    """
    return {
        key: value
        for key, value in _labels(obj).items()
        if isinstance(key, str) and key.startswith(prefix) and isinstance(value, str)
    }


def compute_class_facts(obj: Mapping[str, Any]) -> ComputeClassFacts | None:
    """What a ``cloud.google.com/v1`` ComputeClass enables, over all of ``spec.priorities``.

    Fields read (GKE "ComputeClass" CRD reference): ``machineFamily``, ``machineType`` (family
    from its prefix), ``gpu.type`` (the series that GPU model runs on, for a priority naming
    neither: ``kube.gke.ACCELERATOR_FAMILIES``), ``gpu.gpuSharing.gpuPartitionSize`` (MIG) and
    ``gpu.gpuSharing.sharingStrategy`` (``TIME_SHARING``/``MPS``, GKE 1.35.2-gke.1485000+) and
    ``gpu.driverVersion`` (``latest``/``default``; unset is GKE's default branch).
    Any priority may be the one GKE provisions, so one enabling priority marks the whole class.
    Returns None for an object without ``metadata.name``.
    """
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(name, str) or not name:
        return None
    spec = obj.get("spec")
    priorities = spec.get("priorities") if isinstance(spec, dict) else None
    families: set[str] = set()
    drivers: set[str] = set()
    types: set[str] | None = set()
    mig = sharing = False
    known = isinstance(priorities, list) and bool(priorities)
    for priority in priorities if isinstance(priorities, list) else []:
        named = _priority_families(priority) if isinstance(priority, dict) else set()
        known = known and bool(named)
        if isinstance(priority, dict):
            families |= named
            machine_type = priority.get("machineType")
            if types is not None and isinstance(machine_type, str) and machine_type:
                types.add(machine_type)
            else:
                types = None
            gpu = priority.get("gpu")
            if isinstance(gpu, dict):
                driver = gpu.get("driverVersion")
                drivers.add(driver if isinstance(driver, str) and driver else "default")
            gpu_sharing = gpu.get("gpuSharing") if isinstance(gpu, dict) else None
            if isinstance(gpu_sharing, dict):
                mig = mig or bool(gpu_sharing.get("gpuPartitionSize"))
                sharing = sharing or bool(gpu_sharing.get("sharingStrategy"))
    return ComputeClassFacts(
        name=name,
        machine_families=frozenset(families),
        enables_mig=mig,
        enables_gpu_sharing=sharing,
        machine_types=frozenset(types or ()),
        gpu_drivers=frozenset(drivers),
        families_known=known,
    )


def _priority_families(priority: Mapping[str, Any]) -> set[str]:
    families: set[str] = set()
    family = priority.get("machineFamily")
    if isinstance(family, str) and family:
        families.add(family.lower())
    machine_type = priority.get("machineType")
    derived = machine_family(machine_type) if isinstance(machine_type, str) else None
    if derived is not None:
        families.add(derived)
    gpu = priority.get("gpu")
    model = gpu.get("type") if isinstance(gpu, dict) and not families else None
    if isinstance(model, str) and model in ACCELERATOR_FAMILIES:
        families |= ACCELERATOR_FAMILIES[model]  # each GPU model runs on one series
    return families


def gke_version(version_info: Mapping[str, Any]) -> str | None:
    """Cluster version from a ``/version`` body: ``gitVersion`` without its leading ``v``.

    ``{"gitVersion": "v1.35.3-gke.1234000"}`` -> ``1.35.3-gke.1234000``; None when absent.
    """
    git_version = version_info.get("gitVersion")
    if not isinstance(git_version, str) or not git_version.strip():
        return None
    text = git_version.strip()
    return text[1:] if text[:1] in ("v", "V") else text
