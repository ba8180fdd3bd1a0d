"""The lifecycle part of ``snapready status``: prunable snapshots and what refresh would do.

Computed with the leader's own functions (``snapshots.prune.prune_plan``, ``refresh_plan``) on one
reading of the cluster, with two differences: templates are not listed (the leader lists them on
demand and an ``unused`` verdict needs them, so ``status`` leaves ``unused`` to the leader's
``SnapshotsPrunable`` Event and the gauge), and the ``unrunnable`` grace runs on the leader's
clock, so ``status`` lists such snapshots with ``afterGrace`` true unless
``lifecycle.prune_grace_seconds`` is 0.

For a policy with trigger ``workload`` nothing is written: the next cold pod checkpoints itself
(its app writes ``/proc/gvisor/checkpoint``), unless ``podsnapshot.gke.io/restore-from-policy``
is on its pods (docs/gke-facts.md#section-9: GKE then cold-starts the pod and disables its
checkpointing) or, with ``restore.readiness_gate`` on, the pod is predicted ``hit`` and held
NotReady (``AwaitingRestore``) for up to ``restore.readiness_gate_timeout_seconds`` (a trigger
that waits for Ready waits that long).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from webhook.base.config import Settings
from webhook.base.keys import SNAPSHOT_SOURCE
from webhook.cluster.api.snapshot_reader import Live
from webhook.cluster.api.stamped_pods import pod_record
from webhook.kube.gke import RESTORE_FROM_POLICY
from webhook.kube.matching import PolicyIndex
from webhook.snapshots.prune import Usage, prune_plan
from webhook.snapshots.refresh import Refresh, refresh_plan
from webhook.snapshots.state import ClusterState
from webhook.snapshots.usage import pod_uses


def live_state(live: Live, prefix: str) -> ClusterState:
    """The reading as a synced ``ClusterState`` (what the leader's functions take)."""
    records = [r for obj in live.pods if (r := pod_record(obj, prefix)) is not None]
    return ClusterState(
        policies=PolicyIndex.build(live.policies),
        node_pools=live.pools,
        nodes=live.nodes,
        snapshots=live.index,
        snapshots_known=True,
        pods={f"{r.namespace}/{r.name}": r for r in records},
        pods_known=True,
        synced=True,
        configs=live.configs,
    )


def lifecycle_report(live: Live, settings: Settings, now: datetime) -> dict[str, Any]:
    """``{"prune": ..., "prunable": [...], "refresh": ..., "refreshes": [...]}``."""
    config = settings.lifecycle
    state = live_state(live, settings.prefix)
    mine = settings.outcomes.tracks  # as the leader's ``controllers.snapshot_lifecycle`` decides
    source_label = (
        settings.prefix + SNAPSHOT_SOURCE
        if settings.rules.manual_trigger.require_source_label
        else None
    )
    prunable = []
    if config.prune != "off":
        usage = Usage(pod_uses(state))
        for item in prune_plan(state, now, config, usage=usage, unrunnable_since={}, mine=mine):
            prunable.append(
                {
                    "namespace": item.namespace,
                    "name": item.name,
                    "policy": item.policy,
                    "reason": item.reason,
                    "detail": item.detail,
                    "afterGrace": not item.ready(now),
                }
            )
    stoppers = _restore_from_policy(live)
    refreshes = [
        _refresh_entry(r, settings, stoppers)
        for r in refresh_plan(state, mine, source_label=source_label)
    ]
    return {
        "prune": config.prune,
        "prunable": prunable,
        "refresh": config.refresh,
        "refreshes": refreshes,
    }


def _restore_from_policy(live: Live) -> set[tuple[str, str]]:
    """``(namespace, pod)`` of the stamped pods carrying ``restore-from-policy``."""
    out = set()
    for obj in live.pods:
        metadata = obj.get("metadata") or {}
        if RESTORE_FROM_POLICY in (metadata.get("annotations") or {}):
            out.add((str(metadata.get("namespace")), str(metadata.get("name"))))
    return out


def _refresh_entry(
    refresh: Refresh, settings: Settings, stoppers: set[tuple[str, str]]
) -> dict[str, Any]:
    group = ",".join(f"{k}={v}" for k, v in refresh.group) or "(ungrouped)"
    upgrade = refresh.change()
    if refresh.manual:
        if refresh.pod is None and refresh.what == "config":
            action = "waiting for a Ready pod of the group created after that change"
        elif refresh.pod is None:
            action = "waiting for a Ready pod of the group that started cold on the upgraded pool"
        elif settings.lifecycle.refresh == "on":
            action = (
                f"snapready triggers {refresh.pod} (PodSnapshotManualTrigger {refresh.trigger})"
            )
        else:
            action = (
                f"lifecycle.refresh is off: create a PodSnapshotManualTrigger on {refresh.pod}, "
                "or turn refresh on"
            )
    else:
        action = "nothing is written: the next cold pod checkpoints itself (workload trigger)"
        stopped = sorted(p for ns, p in stoppers if ns == refresh.namespace)
        if stopped:
            action += (
                f"; but {', '.join(stopped[:5])} carry {RESTORE_FROM_POLICY}: GKE disables "
                "their checkpoint, remove it"
            )
        if settings.restore.readiness_gate:
            action += (
                "; the readiness gate holds a pod predicted hit NotReady for up to "
                f"{settings.restore.readiness_gate_timeout_seconds:g} s, delaying a checkpoint "
                "that waits for Ready"
            )
    return {
        "namespace": refresh.namespace,
        "policy": refresh.policy,
        "group": group,
        "upgrade": upgrade,
        "trigger": refresh.trigger if refresh.manual else None,
        "manual": refresh.manual,
        "pod": refresh.pod,
        "snapshots": list(refresh.snapshots),
        "action": action,
    }


def lifecycle_lines(block: dict[str, Any]) -> list[str]:
    """Text lines of ``lifecycle_report``'s document (nothing when there is nothing to say)."""
    lines: list[str] = []
    if block["prunable"]:
        lines += ["", f"prunable snapshots (lifecycle.prune {block['prune']})"]
        for item in block["prunable"]:
            grace = " [after the leader's grace]" if item["afterGrace"] else ""
            lines.append(
                f"  {item['namespace']}/{item['name']} ({item['policy']}): {item['reason']}: "
                f"{item['detail']}{grace}"
            )
    if block["refreshes"]:
        lines += [
            "",
            f"refresh after upgrades and rotated configuration (lifecycle.refresh "
            f"{block['refresh']})",
        ]
        for item in block["refreshes"]:
            lines.append(
                f"  {item['namespace']}/{item['policy']} group {item['group']}, {item['upgrade']}: "
                f"{item['action']}"
            )
    return lines
