"""What a SnapshotRecord says of its PodSnapshot's origin, built from the live pod and the caches.

Pure functions of the origin recorder (``recorder``): ``build_record`` (the origin pod's
fingerprint, per-field digests, grouping labels and node facts), ``node_facts`` (the node cache's
labels of the origin node), and the small rules the recorder decides by: whether an old
annotation is snapready's own (``ours``), whether a pod existed when the snapshot was taken
(``created_before``) and whether an API refusal repeats until the object changes
(``permanent``).
"""

from __future__ import annotations

from datetime import datetime

from webhook.base.types import RawObject, mapping
from webhook.cluster.api.fence import NotLeader
from webhook.cluster.api.syncing import Conflict
from webhook.kube.gke import (
    ACCELERATOR,
    ARCHITECTURE,
    GPU_DRIVER_VERSION,
    INSTANCE_TYPE,
    MACHINE_FAMILY,
)
from webhook.pod.distill import fingerprint
from webhook.pod.emptydirs import blocker_of
from webhook.pod.fields import field_digests
from webhook.pod.restore import group_of
from webhook.snapshots.state import ClusterState
from webhook.snapshots.views import ConfigRef, OriginRecord, SnapshotView, parse_time, workload_of

LEGACY_FIELD_MANAGER = "snapready-origin"
"""The field manager older snapready versions patched the ``<prefix>origin`` annotation with."""


def node_facts(state: ClusterState, node_name: str | None) -> dict[str, str | None]:
    """The origin node's facts from the node cache; every key None when the node is unknown."""
    view = state.nodes.get(node_name) if node_name else None
    if view is None:
        return {}
    return {
        "pool": view.pool,
        "family": view.label(MACHINE_FAMILY),
        "instanceType": view.label(INSTANCE_TYPE),
        "arch": view.label(ARCHITECTURE),
        "version": view.version,
        "accelerator": view.label(ACCELERATOR),
        "gpuDriver": view.label(GPU_DRIVER_VERSION),
    }


def build_record(
    view: SnapshotView,
    pod: RawObject | None,
    state: ClusterState,
    config: tuple[ConfigRef, ...] | None = None,
) -> OriginRecord:
    """The record of ``view`` from its live origin pod (``None``: gone), the caches and the
    consumed configuration read for it (``config``; None: not known).

    The node is GKE's ``origin-node`` (``view.origin_node``) when GKE names one, else the
    origin pod's ``spec.nodeName`` (``node_from`` says which).
    """
    policy = next(
        (p for p in state.policies.by_namespace.get(view.namespace, ()) if p.name == view.policy),
        None,
    )
    cached = state.pods.get(f"{view.namespace}/{view.origin_pod}") if view.origin_pod else None
    if pod is not None:
        metadata, spec = mapping(pod.get("metadata")), mapping(pod.get("spec"))
        labels = {k: v for k, v in mapping(metadata.get("labels")).items() if isinstance(v, str)}
        node = spec.get("nodeName")
        spec_hash: str | None = fingerprint(pod)
        fields = field_digests(pod)
        workload = workload_of(metadata)
        blocker = blocker_of(pod)
    elif cached is not None:
        labels, node = dict(cached.labels), cached.node_name
        spec_hash, fields, workload, blocker = cached.spec_hash, {}, cached.owner, None
    else:
        labels, node, spec_hash, fields, workload, blocker = {}, None, None, {}, None, None
    pod_node = node if isinstance(node, str) and node else None
    node_name = view.origin_node or pod_node
    return OriginRecord(
        pod=view.origin_pod,
        spec_hash=spec_hash,
        fields=fields,
        node=node_facts(state, node_name),
        group=group_of(policy, labels) if policy is not None else {},
        workload=workload,
        config=config if pod is not None else None,
        node_name=node_name,
        node_from="gke" if view.origin_node else ("pod" if pod_node else None),
        triggered_by=view.triggered_by,
        blocker=blocker,
    )


def ours(metadata: RawObject, key: str) -> bool:
    """Whether ``managedFields`` says an older snapready's field manager last wrote annotation
    ``key`` (a cheap filter: anyone who could patch PodSnapshots then could claim the name)."""
    needle = "f:" + key
    for entry in metadata.get("managedFields") or ():
        if isinstance(entry, dict) and entry.get("manager") == LEGACY_FIELD_MANAGER:
            annotations = mapping(mapping(entry.get("fieldsV1")).get("f:metadata")).get(
                "f:annotations"
            )
            if isinstance(annotations, dict) and needle in annotations:
                return True
    return False


def created_before(created: object, taken: datetime | None) -> bool:
    """Whether a pod created at ``created`` (RFC 3339, whole seconds) existed when the snapshot
    was created (the same second counts: both times are truncated); unknown times are not
    before (the origin is then unknown, never guessed)."""
    moment = parse_time(created) if isinstance(created, str) else None
    return moment is not None and taken is not None and moment <= taken


def permanent(exc: Exception) -> bool:
    """A refusal that repeats until the object changes (HTTP 4xx but 409 Conflict and 429)."""
    if isinstance(exc, Conflict | NotLeader):
        return False
    text = str(exc)
    return text.startswith("HTTP 4") and not text.startswith("HTTP 429")
