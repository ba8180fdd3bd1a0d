"""``cross-workload`` (cluster mode, mutating): a pod predicted to ``hit`` a snapshot of another
workload. Pure module.

Source: docs/gke-facts.md#section-9 (grouping is isolation): GKE restores any Ready snapshot of the
pod's policy and group whose distilled spec matches, whoever it was taken from; agent-sandbox
issue 952 (one tenant restoring another's sandbox) and production-stack's prefill and decode
Deployments under one ungrouped policy (each restoring the other's memory). The pod's workload is
its top controller from its ownerReferences, the snapshot's the one its origin record names
(``snapshots.views.workload_of``). Severity ``restore.cross_workload`` (``warn``; ``deny``;
``allow`` says nothing), whatever the pod's enforcement mode; ``rules.modes`` overrides it. Fix:
group the policy by a label that differs per workload, or one policy per workload.
"""

from __future__ import annotations

from collections.abc import Iterable

from webhook.base.keys import RESTORE_SNAPSHOT
from webhook.base.text import clip
from webhook.base.types import Finding, Wording
from webhook.pod.context import PodContext
from webhook.pod.restore import PREDICTION_KEY, Prediction
from webhook.snapshots.views import workload_of

RULE = "cross-workload"
WORDING = Wording(
    warning="[cross-workload] {message}",
    denial="snapready: [cross-workload] {message}. Set restore.cross_workload=warn to admit it.",
)
"""The texts users saw before this was a finding (kept byte for byte)."""


class CrossWorkload:
    """``cross-workload``: reads the prediction the mutating webhook just made (``PodContext.memo``
    under ``pod.restore.PREDICTION_KEY``); nothing without one (file mode, validating webhook)."""

    rule_ids: tuple[str, ...] = (RULE,)

    def __call__(self, pod: PodContext) -> Iterable[Finding]:
        """One finding at ``<prefix>restore-snapshot`` when the hit's origin workload and the
        pod's own are both known and differ, else none."""
        setting = pod.settings.restore.cross_workload
        result: Prediction | None = pod.memo.get(PREDICTION_KEY)
        if setting == "allow" or result is None or result.outcome != "hit":
            return ()
        if result.snapshot is None:
            return ()
        view = pod.cluster.snapshots.named(pod.namespace, result.snapshot)
        origin = view.origin.workload if view is not None and view.origin is not None else None
        own = workload_of(pod.metadata)
        if origin is None or own is None or (origin.kind, origin.name) == (own.kind, own.name):
            return ()
        message = (
            f"will restore the memory of {clip(origin.kind)} {clip(origin.name)} "
            f"(snapshot {clip(result.snapshot, 63)}), not of {clip(own.kind)} {clip(own.name)}; "
            "group the policy by a label that differs per workload (snapshotGroupingRules)"
        )
        path = pod.metadata_field("annotations", pod.settings.annotation(RESTORE_SNAPSHOT))
        return (Finding(path, RULE, message, "deny" if setting == "deny" else "warn"),)
