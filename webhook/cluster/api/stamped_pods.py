"""Compact records of the pods snapready stamped, from raw Pod JSON (cluster mode).

The pod cache watches only pods with the label ``<prefix>selected: "true"`` (written by the
mutating webhook on every selected pod), and keeps per pod only what the snapshot features read:
labels (snapshot groups), the ``<prefix>`` annotations written at admission (fingerprint, policy,
prediction, recorded outcome), the node it runs on, and its start-up evidence: the
``PodScheduled``, ``Ready`` and ``PodRestored`` transitions, a restore crash in its container
statuses (``snapshots.evidence.restore_failure``) and the readiness gate's condition.
"""

from __future__ import annotations

from webhook.base.keys import (
    POLICY,
    RESTORE_OUTCOME,
    RESTORE_PREDICTION,
    RESTORE_REASON,
    RESTORE_SETTLED,
    RESTORE_SNAPSHOT,
    SPEC_HASH,
)
from webhook.base.types import RawObject, mapping, shared
from webhook.kube.gke import POD_RESTORED
from webhook.pod.emptydirs import REFUSED
from webhook.snapshots.evidence import restore_failure
from webhook.snapshots.pod_records import PodRecord, condition
from webhook.snapshots.views import WorkloadRef, workload_of


def pod_record(obj: RawObject, prefix: str) -> PodRecord | None:
    """The compact record of a stamped pod; None without namespace or name."""
    metadata, spec = mapping(obj.get("metadata")), mapping(obj.get("spec"))
    namespace, name = metadata.get("namespace"), metadata.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str):
        return None
    labels = {
        shared(k): shared(v)
        for k, v in mapping(metadata.get("labels")).items()
        if isinstance(v, str)
    }
    annotations = mapping(metadata.get("annotations"))

    def ours(key: str) -> str | None:
        value = annotations.get(prefix + key)
        return shared(value) if isinstance(value, str) else None

    ready = condition(obj, "Ready")
    restored = condition(obj, POD_RESTORED)
    scheduled = condition(obj, "PodScheduled")
    settled = condition(obj, prefix + RESTORE_SETTLED)
    gates = spec.get("readinessGates")
    gated = isinstance(gates, list) and any(
        isinstance(g, dict) and g.get("conditionType") == prefix + RESTORE_SETTLED for g in gates
    )
    node = spec.get("nodeName")
    return PodRecord(
        namespace=shared(namespace),
        name=name,
        uid=str(metadata.get("uid") or ""),
        labels=labels,
        spec_hash=ours(SPEC_HASH),
        node_name=shared(node) if isinstance(node, str) else None,
        prediction=ours(RESTORE_PREDICTION),
        predicted_snapshot=ours(RESTORE_SNAPSHOT),
        refused=str(annotations.get(prefix + RESTORE_REASON, "")).startswith(REFUSED),
        created=str(metadata.get("creationTimestamp") or ""),
        ready_at=str(ready.get("lastTransitionTime") or "")
        if ready is not None and ready.get("status") == "True"
        else None,
        restored=restored is not None and restored.get("status") == "True",
        restored_message=str(restored.get("message") or "") if restored is not None else "",
        policy=ours(POLICY),
        scheduled_at=_true_since(scheduled),
        restored_at=_true_since(restored),
        restore_failure=restore_failure(obj.get("status")),
        outcome=ours(RESTORE_OUTCOME),
        gated=gated,
        settled=str(settled.get("status")) if settled is not None else None,
        settled_reason=shared(str(settled.get("reason") or "")) if settled is not None else None,
        phase=shared(str(mapping(obj.get("status")).get("phase") or "")),
        owner=_shared_owner(workload_of(metadata)),
    )


def _true_since(entry: object) -> str | None:
    """``lastTransitionTime`` of a condition that is True, else None."""
    if not isinstance(entry, dict) or entry.get("status") != "True":
        return None
    value = entry.get("lastTransitionTime")
    return value if isinstance(value, str) and value else None


def _shared_owner(owner: WorkloadRef | None) -> WorkloadRef | None:
    """``owner`` with its strings ``shared`` (a Deployment's name is cut out of each pod's
    ReplicaSet name: a new string per pod otherwise)."""
    if owner is None:
        return None
    return WorkloadRef(shared(owner.kind), shared(owner.name), shared(owner.uid))
