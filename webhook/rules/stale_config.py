"""``stale-config`` (cluster mode, mutating): a pod predicted to ``hit`` a snapshot taken before a
Secret or ConfigMap its origin pod read changed. Pure module.

Source: GKE hashes no env and no Secret or ConfigMap content (docs/gke-facts.md#section-3), so the
restored memory holds the value from before the change, silently
(docs/concepts/snapshots.md#rotated-configuration-stale-config; ``snapshots.config_refs`` decides
what changed). The prediction stays ``hit`` (GKE will restore it). Advisory (``warn``), whatever the
pod's enforcement mode; ``rules.modes`` ``audit`` keeps it out of the warnings. Fix: take a new
snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable

from webhook.base.keys import RESTORE_SNAPSHOT
from webhook.base.text import clip
from webhook.base.types import Finding, Wording
from webhook.pod.context import PodContext
from webhook.pod.restore import PREDICTION_KEY, Prediction
from webhook.snapshots.config_refs import config_changes

RULE = "stale-config"
WORDING = Wording(warning="[stale-config] {message}", denial="snapready: [stale-config] {message}")
"""The warning users saw before this was a finding (kept byte for byte); it never denies."""


class StaleConfig:
    """``stale-config``: reads the prediction the mutating webhook just made (``PodContext.memo``
    under ``pod.restore.PREDICTION_KEY``); nothing without one."""

    rule_ids: tuple[str, ...] = (RULE,)

    def __call__(self, pod: PodContext) -> Iterable[Finding]:
        """One warn finding at ``<prefix>restore-snapshot`` naming the first changed object."""
        result: Prediction | None = pod.memo.get(PREDICTION_KEY)
        if result is None or result.outcome != "hit" or result.snapshot is None:
            return ()
        view = pod.cluster.snapshots.named(pod.namespace, result.snapshot)
        changes = config_changes(view, pod.cluster.configs) if view is not None else ()
        if not changes:
            return ()
        first = changes[0]
        if first.what == "changed":
            when = " from before its change" + (f" at {first.at}" if first.at else "")
        elif first.what == "deleted":
            when = ", deleted since"
        else:
            when = " as it was before it existed (created since)"
        more = f" (and {len(changes) - 1} more)" if len(changes) > 1 else ""
        message = (
            f"restores with the value of {first.kind} {clip(first.name, 253)}{when}"
            f"{more} (snapshot {clip(result.snapshot, 63)}); take a new snapshot to pick up the "
            "current configuration"
        )
        path = pod.metadata_field("annotations", pod.settings.annotation(RESTORE_SNAPSHOT))
        return (Finding(path, RULE, message, "warn"),)
