"""Governance rules for the snapshot CRDs (pure): which pods a PodSnapshotPolicy captures and where
a PodSnapshotStorageConfig stores them (docs/gke-facts.md#section-8).

``policy`` judges a PodSnapshotPolicy against the cluster state, ``storage`` a storage config
against bucket facts from an injected lookup; ``webhook.admission.governance`` turns their findings
into a decision, and ``webhook.cluster.gcs`` supplies the facts.
"""

from __future__ import annotations

from webhook.governance.policy import enforcement_annotation, policy_findings, selectors_overlap
from webhook.governance.storage import (
    BucketFacts,
    BucketLookup,
    bucket_findings,
    bucket_name_problem,
    storage_findings,
)

__all__ = [
    "BucketFacts",
    "BucketLookup",
    "bucket_findings",
    "bucket_name_problem",
    "enforcement_annotation",
    "policy_findings",
    "selectors_overlap",
    "storage_findings",
]
