"""What snapready believes about a stamped pod comes from the cluster, never from the pod. Pure.

A pod carries the label ``<prefix>selected`` and the ``<prefix>policy`` annotation because
snapready's mutating webhook wrote them at admission, but any user allowed to create or patch the
pod can write them too (docs/security.md: a pod in a namespace without policies, with made-up
annotations, got Events and metric series under a policy that does not exist). So outcomes,
Events and metrics are only for pods that a live PodSnapshotPolicy of their namespace selects by
their labels, re-derived from the policy cache (``PolicyIndex.select``, the same call admission
makes), and the policy name comes from those policies (``,``-joined and sorted by name when
several select the pod, as ``mutation.annotations.stamp_policy`` writes it).

Metric label values are bounded the same way (``bounded_labels``): a ``namespace``/``policy``
pair that is not a live policy of the cache is counted under ``OTHER`` for both, so the number of
series never depends on what users write into objects snapready reads.
"""

from __future__ import annotations

from dataclasses import replace

from webhook.kube.matching import PolicyIndex
from webhook.snapshots.pod_records import PodRecord

OTHER = "(other)"
"""The one label value a namespace or policy takes when it is not a live policy of the cache
(a PodSnapshot of a deleted policy, a ``spec.policyName`` that names nothing)."""


def selecting_policies(record: PodRecord, policies: PolicyIndex) -> str | None:
    """The names of the live policies that select ``record`` by its labels (``a,b``), or None.

    Args:
        record: a pod from the pod cache (labels as the API server stores them).
        policies: the policy cache (``ClusterState.policies``).

    Returns:
        ``,``-joined policy names sorted by name (the admission annotation's form); None when no
        policy of the pod's namespace selects it: its outcome is not snapready's to report.
    """
    selected = policies.select(record.namespace, record.labels)
    return ",".join(policy.name for policy in selected) if selected else None


def believed(record: PodRecord, policies: PolicyIndex) -> PodRecord | None:
    """``record`` with ``policy`` taken from the live policies; None when none selects it.

    Everything downstream of the tracker (Events' notes, metric labels, the readiness gate's
    snapshot lookup) reads the record's ``policy``: replacing it here means none of them reads
    the pod's own annotation.
    """
    policy = selecting_policies(record, policies)
    if policy is None:
        return None
    return record if record.policy == policy else replace(record, policy=policy)


def bounded_labels(namespace: str, policy: str, policies: PolicyIndex) -> tuple[str, str]:
    """``(namespace, policy)`` when every named policy is live in ``namespace``, else
    ``(OTHER, OTHER)``: the series count is bounded by the policies an admin created."""
    live = {p.name for p in policies.by_namespace.get(namespace, ())}
    names = policy.split(",") if policy else []
    if names and all(name in live for name in names):
        return namespace, policy
    return OTHER, OTHER
