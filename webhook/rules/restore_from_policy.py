"""``restore-from-policy``: the ``podsnapshot.gke.io/restore-from-policy`` annotation on a pod.

Source: docs/gke-facts.md#section-9 (field reports: Google's reference architecture and llm-d
guides). GKE does not need the annotation to restore; on a pod with no snapshot yet it cold-starts
the pod and disables checkpointing for it, so its workload trigger does nothing and the first
snapshot is never taken. Severity ``rules.restore_from_policy_severity`` (warn). Fix: remove the
annotation (the PodSnapshotPolicy's selector is what makes pods restore). Applies to every
scope (``rootfs-only`` snapshots are taken by the same trigger). Pure module.
"""

from __future__ import annotations

from collections.abc import Iterable

from webhook.base.types import Finding
from webhook.kube.gke import RESTORE_FROM_POLICY
from webhook.pod.context import PodContext


class RestoreFromPolicy:
    """Warns on pods and pod templates carrying ``podsnapshot.gke.io/restore-from-policy``."""

    rule_ids: tuple[str, ...] = ("restore-from-policy",)

    def __call__(self, pod: PodContext) -> Iterable[Finding]:
        """One finding at the annotation, or none."""
        if RESTORE_FROM_POLICY not in pod.annotations:
            return ()
        path = pod.metadata_field("annotations", RESTORE_FROM_POLICY)
        text = (
            "GKE disables checkpointing of a pod with this annotation while it has no snapshot, "
            "so the first snapshot is never taken; remove it (the policy's selector restores)"
        )
        return (
            Finding(
                path, "restore-from-policy", text, pod.settings.rules.restore_from_policy_severity
            ),
        )
