"""What the webhook knows about the cluster: one immutable snapshot swapped atomically.

Sources (``cluster.files`` for files, ``cluster.api.caches`` for the API server) build
``ClusterState`` values;
the admission path reads the current one without locks or I/O. Pure module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from webhook.base.errors import ConfigError
from webhook.base.keys import ENFORCEMENT
from webhook.kube.matching import LabelSelector, Policy, PolicyIndex, compile_selector
from webhook.snapshots.config_refs import ConfigIndex
from webhook.snapshots.evidence import PodEvents
from webhook.snapshots.index import SnapshotIndex
from webhook.snapshots.pod_records import PodRecord

POLICY_GROUP = "podsnapshot.gke.io"
POLICY_VERSIONS = ("v1", "v1alpha1")
SNAPSHOT_SCOPES = ("whole-pod", "rootfs-only")


@dataclass(frozen=True)
class StorageConfig:
    """The parts of a PodSnapshotStorageConfig the rules use (cluster-scoped)."""

    name: str
    bucket: str | None
    path: str | None = None
    token_source: str | None = None


class Taint(NamedTuple):
    """One node taint (``spec.taints``): ``key``, ``value`` (``""`` when unset), ``effect``."""

    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class NodeView:
    """The part of one Node the caches keep: its pool and the ``facts.NODE_FACT_LABELS`` it
    carries."""

    pool: str
    labels: tuple[tuple[str, str], ...] = ()
    version: str | None = None
    """GKE node version from ``status.nodeInfo.kubeletVersion`` without its ``v``
    (``1.35.3-gke.1234000``): it fixes the gVisor kernel and GPU driver
    (docs/gke-facts.md#section-3)."""
    taints: tuple[Taint, ...] = ()
    """Its ``NoSchedule``/``NoExecute`` taints but the ones Kubernetes and the autoscaler set
    for a while (``facts.TRANSIENT_TAINTS``): which pods may land on its pool."""

    def label(self, key: str) -> str | None:
        """The kept value of label ``key``, or None."""
        return next((value for name, value in self.labels if name == key), None)


@dataclass(frozen=True)
class NodePoolFacts:
    """Union of GKE labels over a node pool's nodes (``cluster.api.caches`` fills it in cluster
    mode).

    Every attribute is a set of label values seen on the pool's nodes; ``node_count`` 0 means the
    pool exists in no node yet (unknown, not guessed).
    """

    name: str
    node_count: int = 0
    instance_types: frozenset[str] = frozenset()
    machine_families: frozenset[str] = frozenset()
    accelerators: frozenset[str] = frozenset()
    accelerator_counts: frozenset[str] = frozenset()
    partition_sizes: frozenset[str] = frozenset()
    sharing_strategies: frozenset[str] = frozenset()
    architectures: frozenset[str] = frozenset()
    versions: frozenset[str] = frozenset()
    gpu_drivers: frozenset[str] = frozenset()
    sandboxes: frozenset[str] = frozenset()
    """``sandbox.gke.io/runtime`` values (``gvisor`` on a GKE Sandbox pool, none elsewhere)."""
    taints: frozenset[Taint] = frozenset()
    """The filtering taints every node of the pool carries (``NodeView.taints``): a pod that
    does not tolerate one never lands on the pool (``pod.tolerations``)."""


@dataclass(frozen=True)
class ComputeClassFacts:
    """What a ComputeClass (``cloud.google.com/v1``) enables, as far as the rules care."""

    name: str
    machine_families: frozenset[str] = frozenset()
    enables_mig: bool = False
    enables_gpu_sharing: bool = False
    machine_types: frozenset[str] = frozenset()
    """``machineType`` of the priorities, when every priority names one (else empty: a
    ``machineFamily`` priority may make any shape of its family)."""
    gpu_drivers: frozenset[str] = frozenset()
    """``gpu.driverVersion`` of every priority with a GPU (``default`` where unset, GKE's
    default); empty when no priority has a GPU. ``{"latest"}``: every GPU node it makes runs
    the latest driver branch (570+, what GPU checkpointing needs: docs/gke-facts.md#section-9)."""
    families_known: bool = False
    """Every priority names its machine family (``machineFamily`` or ``machineType``): only
    then are ``machine_families`` all it can make (a ``nodepools`` or ``gpu``-only priority
    can make any family)."""


@dataclass(frozen=True)
class DisruptionBudget:
    """The part of a ``policy/v1`` PodDisruptionBudget the ``checkpoint-window`` rule reads.

    Attributes:
        namespace, name: identity; ``selector``: its compiled ``spec.selector``.
        zero: it allows no voluntary disruption of its pods whatever their count
            (``maxUnavailable: 0`` or ``"0%"``, or ``minAvailable: "100%"``).
        budget: what it states, ``minAvailable: 1`` or ``maxUnavailable: 25%`` (clipped; ""
            when neither is set).
        min_available: an integer ``minAvailable``: the PDB then holds its pods at 0
            disruptions only while no more than that many run (the disruption controller's
            ``disruptionsAllowed`` is healthy pods minus it).
    """

    namespace: str
    name: str
    selector: LabelSelector
    zero: bool
    budget: str = ""
    min_available: int | None = None


def disruption_budget(obj: Mapping[str, Any]) -> DisruptionBudget | None:
    """A ``DisruptionBudget`` from a PodDisruptionBudget object; None when it has no name or
    no usable selector (a PDB with a null selector selects no pod)."""
    metadata, spec = obj.get("metadata"), obj.get("spec")
    if not isinstance(metadata, dict) or not isinstance(spec, dict):
        return None
    name, selector = metadata.get("name"), spec.get("selector")
    if not isinstance(name, str) or not isinstance(selector, dict):
        return None
    try:
        compiled = compile_selector(selector, where="spec.selector")
    except ConfigError:
        return None
    unavailable, available = spec.get("maxUnavailable"), spec.get("minAvailable")
    zero = unavailable in (0, "0", "0%") or available == "100%"
    stated = (
        ("minAvailable", available) if available is not None else ("maxUnavailable", unavailable)
    )
    budget = f"{stated[0]}: {str(stated[1])[:16]}" if stated[1] is not None else ""
    floor = available if type(available) is int else None
    namespace = str(metadata.get("namespace") or "default")
    return DisruptionBudget(namespace, name, compiled, zero, budget, floor)


@dataclass(frozen=True)
class ClusterState:
    """One consistent view: policies, storage configs and (cluster mode) facts about nodes.

    Attributes:
        policies: per-namespace PodSnapshotPolicy index.
        storage_configs: PodSnapshotStorageConfig by name.
        namespace_labels: labels of known namespaces (cluster mode; empty from files).
        node_pools: facts by ``cloud.google.com/gke-nodepool`` value (cluster mode).
        nodes: each known node's pool and kept labels by node name (cluster mode), for pods bound
            to named nodes (DaemonSet pods: ``matchFields`` ``metadata.name``).
        compute_classes: facts by ComputeClass name; None when the API is not served.
        gke_version: cluster version string, e.g. ``1.35.0-gke.1738000``, if known.
        synced: True once every source has delivered its first full list.
        details: per-source status for ``/readyz`` (e.g. ``{"computeclasses": "not served"}``)
            and facts (``"policies": 3``, the policies known, a number).
        snapshots: PodSnapshots by policy and name (cluster mode); ``snapshots_known`` is True
            once they were listed (restore predictions are made only then).
        pods: the stamped pods (label ``<prefix>selected``) by ``namespace/name``.
        gke_events: GKE's ``GKEPodSnapshotting`` Events by ``(namespace, pod)``
            (``snapshots.evidence``; cluster mode).
        pods: the stamped pods (label ``<prefix>selected``) by ``namespace/name``;
            ``pods_known`` once they were listed. In cluster mode this is the pods cache's own
            dict, which its watch thread edits in place (``syncing.Resource.in_place``): look
            keys up directly, but iterate over a copy (``tuple(state.pods.values())``, made
            without releasing the interpreter), never over the dict itself.
        scope_synced: whether the live webhook configurations carry the scope the policies
            imply (cluster mode, ``webhook.cluster.controllers.scope``); None where nothing is
            reconciled.
    """

    policies: PolicyIndex = field(default_factory=PolicyIndex)
    storage_configs: Mapping[str, StorageConfig] = field(default_factory=dict)
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    node_pools: Mapping[str, NodePoolFacts] = field(default_factory=dict)
    nodes: Mapping[str, NodeView] = field(default_factory=dict)
    compute_classes: Mapping[str, ComputeClassFacts] | None = None
    gke_version: str | None = None
    synced: bool = False
    details: Mapping[str, str | int] = field(default_factory=dict)
    scope_synced: bool | None = None
    snapshots: SnapshotIndex = field(default_factory=SnapshotIndex)
    snapshots_known: bool = False
    pods: Mapping[str, PodRecord] = field(default_factory=dict)
    gke_events: PodEvents = field(default_factory=dict)
    pods_known: bool = False
    """The stamped pods were listed (cluster mode): a pod absent from ``pods`` is not stamped."""
    configs: ConfigIndex = field(default_factory=dict)
    """The Secrets and ConfigMaps of namespaces with snapshots that read them, metadata only:
    namespace -> (kind, name) -> ``snapshots.config_refs.ConfigMeta`` (cluster mode; a namespace
    still listing is absent)."""
    disruption_budgets: Mapping[str, tuple[DisruptionBudget, ...]] | None = None
    """PodDisruptionBudgets by namespace (``snapready check``: those of its input); None where
    they are not known (``checkpoint-window`` is then not judged)."""


def _require_str(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: required, must be a non-empty string")
    return value


def is_snapshot_kind(obj: Any, kind: str) -> bool:
    """Whether ``obj`` is a ``podsnapshot.gke.io/{v1,v1alpha1}`` object of ``kind``."""
    if not isinstance(obj, dict) or obj.get("kind") != kind:
        return False
    group, _, version = str(obj.get("apiVersion", "")).partition("/")
    return group == POLICY_GROUP and version in POLICY_VERSIONS


def parse_policy(
    obj: Mapping[str, Any], *, prefix: str, where: str = "", namespace: str = "default"
) -> Policy:
    """Extract a ``Policy`` from a PodSnapshotPolicy object; ``namespace`` is where one without
    ``metadata.namespace`` lands (``kubectl apply -n``; the API server always sets it).

    Raises:
        ConfigError: a required field is missing or malformed; the message starts with ``where``
            (e.g. ``policies/llm.yaml#2: spec.selector...``).
    """
    at = f"{where}: " if where else ""
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec")
    if not isinstance(metadata, dict) or not isinstance(spec, dict):
        raise ConfigError(f"{at}metadata and spec must be objects")
    name = _require_str(metadata.get("name"), f"{at}metadata.name")
    namespace = metadata.get("namespace") or namespace
    if "selector" not in spec or spec["selector"] is None:
        raise ConfigError(f"{at}spec.selector: required (use {{}} to select every pod)")
    selector = compile_selector(spec["selector"], where=f"{at}spec.selector")
    storage = _require_str(spec.get("storageConfigName"), f"{at}spec.storageConfigName")
    scope = spec.get("snapshotScope") or "whole-pod"
    if scope not in SNAPSHOT_SCOPES:
        raise ConfigError(f"{at}spec.snapshotScope: {scope!r} is not whole-pod or rootfs-only")
    trigger = spec.get("triggerConfig") or {}
    grouping = ((spec.get("snapshotGroupingRules") or {}).get("groupByLabelValue") or {}).get(
        "labels"
    ) or []
    annotations = metadata.get("annotations") or {}
    return Policy(
        name=name,
        namespace=str(namespace),
        selector=selector,
        storage_config_name=storage,
        scope=scope,
        trigger_type=trigger.get("type") if isinstance(trigger, dict) else None,
        enforcement=annotations.get(prefix + ENFORCEMENT)
        if isinstance(annotations, dict)
        else None,
        # each label once: the CRD accepts [model, model], and a group is a mapping
        grouping_labels=tuple(dict.fromkeys(label for label in grouping if isinstance(label, str))),
        has_retention=bool(spec.get("retentionConfig")),
        post_checkpoint=str(trigger.get("postCheckpoint") or "resume")
        if isinstance(trigger, dict)
        else "resume",
        created=str(metadata.get("creationTimestamp") or ""),
    )


def parse_storage_config(obj: Mapping[str, Any], *, where: str = "") -> StorageConfig:
    """Extract a ``StorageConfig`` from a PodSnapshotStorageConfig object.

    Raises:
        ConfigError: ``metadata.name`` missing or ``spec`` not an object.
    """
    at = f"{where}: " if where else ""
    metadata = obj.get("metadata") or {}
    name = _require_str(
        metadata.get("name") if isinstance(metadata, dict) else None, f"{at}metadata.name"
    )
    spec = obj.get("spec") or {}
    if not isinstance(spec, dict):
        raise ConfigError(f"{at}spec: must be an object")
    gcs = (spec.get("snapshotStorageConfig") or {}).get("gcs") or {}
    return StorageConfig(
        name=name,
        bucket=gcs.get("bucket"),
        path=gcs.get("path"),
        token_source=gcs.get("tokenSource"),
    )
