"""The notes of snapready's restore Events: what GKE said first, snapready's diagnosis second.

``SnapshotRestoreMissed`` (a pod predicted to restore that started cold) quotes GKE's own reason
when its ``GKEPodSnapshotting`` Warning gave one (docs/gke-facts.md#section-9: the only API-level
sign of a skipped restore) and adds the differences snapready knows between the node the pod landed
on and the snapshot's origin. ``SnapshotRestoreFailed`` (gVisor's restore crashed: no cold-start
fallback, the pod never serves) names the container's error and the two fixes. Pure module.
"""

from __future__ import annotations

from webhook.kube.gke import MACHINE_FAMILY
from webhook.snapshots.outcomes import Verdict
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.state import ClusterState, NodeView
from webhook.snapshots.views import OriginRecord


def node_causes(record: PodRecord, node: NodeView | None, origin: OriginRecord) -> list[str]:
    """Differences between the node the pod landed on and the snapshot's origin node."""
    if node is None:
        return []
    causes = []
    old_version, old_family = origin.node.get("version"), origin.node.get("family")
    family = node.label(MACHINE_FAMILY)
    if old_version and node.version and node.version != old_version:
        causes.append(
            f"landed on {record.node_name} (pool {node.pool}, {node.version}); snapshot taken "
            f"on {origin.node.get('pool')} running {old_version}"
        )
    if old_family and family and family != old_family:
        causes.append(f"landed on machine family {family}, snapshot on {old_family}")
    return causes


def diagnosis(record: PodRecord, state: ClusterState) -> list[str]:
    """What snapready sees between the pod and its predicted snapshot (may be empty)."""
    snapshot = state.snapshots.named(record.namespace, record.predicted_snapshot or "")
    if snapshot is None or snapshot.origin is None:
        return ["the snapshot is gone (deleted or expired by retention)"]
    origin = snapshot.origin
    causes = node_causes(record, state.nodes.get(record.node_name or ""), origin)
    if record.spec_hash and origin.spec_hash and record.spec_hash != origin.spec_hash:
        causes.append("the pod's spec fingerprint differs from the snapshot's")
    if not snapshot.ready:
        causes.append(f"the snapshot is no longer Ready ({snapshot.reason or 'no reason'})")
    return causes


def missed_note(
    record: PodRecord, state: ClusterState, verdict: Verdict, *, settle_seconds: float
) -> str:
    """The ``SnapshotRestoreMissed`` note."""
    causes = diagnosis(record, state)
    node = state.nodes.get(record.node_name or "")
    where = f"node {record.node_name} (pool {node.pool}, {node.version})" if node else "its node"
    if verdict.gke_reason:
        head = f"GKE skipped the restore from {record.predicted_snapshot}: {verdict.gke_reason}"
        return f"{head}. snapready: {'; '.join(causes)}" if causes else head
    head = (
        f"predicted restore from {record.predicted_snapshot} but the pod started cold: no "
        f"PodRestored and no GKE restore event {settle_seconds:.0f} s after Ready"
    )
    cause = "; ".join(causes) or (
        f"no difference known to snapready on {where}: check the GKE snapshot agent"
    )
    return f"{head}; {cause}"


def failed_note(record: PodRecord, verdict: Verdict) -> str:
    """The ``SnapshotRestoreFailed`` note: the error, that there is no fallback, the fixes."""
    policy = record.policy or "its PodSnapshotPolicy"
    return (
        f"restore crashed ({verdict.failure}); GKE does not fall back to a cold start, so the pod "
        f"will not serve: delete it to cold-start it (--force may be needed). Workloads that "
        f"write files after the checkpoint (databases) need postCheckpoint: stop or "
        f"snapshotScope: rootfs-only on {policy}; a pod rule init-emptydir warns about, or "
        f"taken from one, never restores: fix it and delete that PodSnapshot"
    )
