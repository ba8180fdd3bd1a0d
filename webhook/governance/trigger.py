"""``manual-trigger``: a PodSnapshotManualTrigger decides whose memory every later replica restores.

Source: docs/gke-facts.md#section-9 (agent-sandbox PR 1522 review): a trigger on the wrong pod (a
typo, or anyone with create rights on triggers in the namespace) makes that pod's memory the
snapshot every later replica of the policy restores. GKE accepts any ``spec.targetPod``. On CREATE
the target must be (default deny, ``rules.modes`` may relax it):

1. a pod snapready stamped (label ``<prefix>selected``; the cluster mode pod cache holds exactly
   these): a pod missing from the cache does not exist, or no PodSnapshotPolicy selected it when
   it was created, so it cannot be a snapshot source;
2. ``Running`` (``status.phase``): a pending or finished pod has no state to checkpoint;
3. selected by a PodSnapshotPolicy of its namespace with ``triggerConfig.type: manual`` (by its
   current labels), the only policies a manual trigger serves;
4. with ``rules.manual_trigger.require_source_label``: labelled ``<prefix>snapshot-source:
   "true"`` (an opt-in marker of intended snapshot sources).

Without a pod cache (file source, ``snapready check``) the target cannot be looked up: one
warning says so. Reads the in-memory ``ClusterState`` only: no I/O. Pure module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.base.config import Settings
from webhook.base.keys import SNAPSHOT_SOURCE
from webhook.base.text import clip
from webhook.base.types import Finding, mapping
from webhook.snapshots.state import ClusterState

RULE = "manual-trigger"
TARGET_PATH = "spec.targetPod"
_WHY = "its memory becomes what every later replica restores"


def trigger_findings(
    obj: Mapping[str, Any], state: ClusterState, settings: Settings, *, namespace: str
) -> list[Finding]:
    """Findings for one PodSnapshotManualTrigger CREATE in ``namespace`` (empty: acceptable)."""
    target = mapping(obj.get("spec")).get("targetPod")
    if not isinstance(target, str) or not target:
        return [Finding(TARGET_PATH, RULE, "spec.targetPod is required: name the source pod")]
    pod = clip(target)
    if not state.pods_known:
        text = (
            f"pod {pod} was not verified: pods are only known in cluster mode; make sure a "
            "manual PodSnapshotPolicy selects it, since " + _WHY
        )
        return [Finding(TARGET_PATH, RULE, text, "warn")]
    record = state.pods.get(f"{namespace}/{target}")
    if record is None:
        text = (
            f"pod {pod} is not a snapshot pod of {clip(namespace)}: it does not exist or no "
            f"PodSnapshotPolicy selected it; name a Running pod of a manual policy ({_WHY})"
        )
        return [Finding(TARGET_PATH, RULE, text)]
    if record.phase != "Running":
        phase = clip(record.phase) or "not started"
        text = f"pod {pod} is {phase}, not Running: nothing to checkpoint; wait or name another"
        return [Finding(TARGET_PATH, RULE, text)]
    selecting = state.policies.select(namespace, record.labels)
    if not any(p.trigger_type == "manual" for p in selecting):
        names = ", ".join(f"{clip(p.name)} ({p.trigger_type or 'no'} trigger)" for p in selecting)
        text = (
            f"pod {pod} is selected by no manual PodSnapshotPolicy"
            f"{': only ' + names if names else ''}; a trigger serves triggerConfig.type manual"
        )
        return [Finding(TARGET_PATH, RULE, text)]
    label = settings.prefix + SNAPSHOT_SOURCE
    if settings.rules.manual_trigger.require_source_label and record.labels.get(label) != "true":
        text = f'pod {pod} lacks label {label}: "true" (required for trigger targets; {_WHY})'
        return [Finding(TARGET_PATH, RULE, text)]
    return []
