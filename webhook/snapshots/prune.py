"""Snapshot lifecycle decisions, part one: which snapshots to prune. Pure module.

GKE restores a snapshot only into a pod of its policy and group (same grouping-label values)
whose distilled spec hashes the same, on a node of the origin node's GKE version and GPU driver
(docs/gke-facts.md#section-3 and #section-9). So a snapshot that no pod can ever restore from only
costs storage (20-70 GiB each, billed until deleted) and keeps a memory image with its secrets
alive.

Prune (``prune_plan``), first reason wins, each with a clock that survives restarts where the
cluster has one:

1. ``checkpoint-failed``: ``Checkpoint`` False ``Failed`` (GKE never restores it); due
   ``lifecycle.prune_grace_seconds`` after the condition's ``lastTransitionTime``.
2. ``unrunnable``: Ready, stale (``outcomes.stale_reason``: its origin pool runs another
   version or driver) and no node pool of the cluster runs its origin version and driver any
   more (``runs_origin``); due ``prune_grace_seconds`` after the caller first saw it so
   (``unrunnable_since``: the leader's memory; a restart starts it again, which only delays).
3. ``unused``: Ready, its recorded fingerprint matches no live stamped pod and no workload
   template (listed by the caller) of its policy and group, and neither GKE's
   ``status.lastAccessTime`` nor its creation is newer than ``lifecycle.unused_days``.
   Unknown means keep: no origin record or fingerprint, templates not listed for the
   namespace, or an origin workload of a kind whose templates are not listed
   (``LISTED_KINDS``: a custom resource such as an agent-sandbox template may create pods later).

Never pruned: a snapshot being deleted, one of a namespace not tracked, the newest Ready snapshot
of each (namespace, policy, group, fingerprint) that a live pod or template still has
(``protected``), and anything before the snapshot, pod and node caches are synced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from webhook.base.tracking import LifecycleSettings
from webhook.snapshots.outcomes import stale_reason
from webhook.snapshots.state import ClusterState, NodePoolFacts
from webhook.snapshots.usage import LISTED_KINDS, snapshot_use
from webhook.snapshots.views import SnapshotView, UseKey, parse_time

PRUNE_REASONS = ("checkpoint-failed", "unrunnable", "unused")


def runs_origin(view: SnapshotView, pools: Mapping[str, NodePoolFacts]) -> bool:
    """Whether some node pool with nodes runs the snapshot's origin GKE version and (when the
    record names one) GPU driver label; True when the origin version is unknown (keep)."""
    origin = view.origin.node if view.origin is not None else {}
    version, driver = origin.get("version"), origin.get("gpuDriver")
    if not version:
        return True
    return any(
        pool.node_count > 0
        and version in pool.versions
        and (not driver or driver in pool.gpu_drivers)
        for pool in pools.values()
    )


def unrunnable(view: SnapshotView, pools: Mapping[str, NodePoolFacts]) -> bool:
    """Ready, stale, and no pool of the cluster runs its origin version and driver."""
    return stale_reason(view, pools) is not None and not runs_origin(view, pools)


def last_used(view: SnapshotView) -> datetime | None:
    """GKE's ``status.lastAccessTime`` or the creation, whichever is newer (GKE's clock;
    ``SnapshotView.last_used``, computed once per view)."""
    return view.last_used


@dataclass(frozen=True)
class Prunable:
    """One snapshot that no pod can restore from (``prune_plan``).

    Attributes:
        namespace, name, policy, uid: the PodSnapshot (uid: the DELETE's precondition).
        reason: one of ``PRUNE_REASONS``; ``detail``: a sentence for ``status`` and Events.
        due: when it becomes prunable (grace or unused clock); ``due <= now``: prunable now.
    """

    namespace: str
    name: str
    policy: str
    uid: str
    reason: str
    detail: str
    due: datetime

    def ready(self, now: datetime) -> bool:
        """Whether it is prunable at ``now`` (its grace has passed)."""
        return self.due <= now


@dataclass(frozen=True)
class Usage:
    """What live pods and listed templates still have: ``pods`` and ``templates`` use keys;
    ``listed``: namespaces whose templates were listed (elsewhere ``unused`` is unknown)."""

    pods: frozenset[UseKey] = frozenset()
    templates: frozenset[UseKey] = frozenset()
    listed: frozenset[str] = frozenset()

    def used(self, key: UseKey) -> bool:
        """Whether a live pod or template has ``key``."""
        return key in self.pods or key in self.templates


def protected(views: Iterable[SnapshotView], usage: Usage) -> set[tuple[str, str]]:
    """``(namespace, name)`` of the newest Ready snapshot of every use key a live pod or
    template has: never pruned, whatever else holds."""
    newest: dict[UseKey, SnapshotView] = {}
    for view in views:
        key = snapshot_use(view)
        if key is None or not view.ready or not usage.used(key):
            continue
        best = newest.get(key)
        if best is None or (view.created, view.name) > (best.created, best.name):
            newest[key] = view
    return {(v.namespace, v.name) for v in newest.values()}


def unused_candidates(
    state: ClusterState, now: datetime, settings: LifecycleSettings, pods: frozenset[UseKey]
) -> set[str]:
    """Namespaces with a Ready snapshot that no live pod uses and whose unused clock ran out:
    only their templates need listing (``cluster.controllers.snapshot_lifecycle``)."""
    limit = timedelta(days=settings.unused_days)
    out = set()
    for view in state.snapshots.by_name.values():
        key, used_at = snapshot_use(view), last_used(view)
        if (
            view.ready
            and key is not None
            and key not in pods
            and used_at is not None
            and now - used_at >= limit
            and _kind_listed(view)
        ):
            out.add(view.namespace)
    return out


def _kind_listed(view: SnapshotView) -> bool:
    workload = view.origin.workload if view.origin is not None else None
    return workload is None or workload.kind in LISTED_KINDS


def prune_plan(
    state: ClusterState,
    now: datetime,
    settings: LifecycleSettings,
    *,
    usage: Usage,
    unrunnable_since: Mapping[tuple[str, str], datetime],
    mine: Callable[[str], bool] = lambda _: True,
) -> list[Prunable]:
    """Every prune candidate (module table), sorted by namespace and name; ``due`` says when
    each becomes prunable. Empty while ``state`` is not synced (snapshots, pods, nodes).

    Args:
        state: the caches; ``now``: aware time; ``settings``: ``lifecycle``.
        usage: live pods' and listed templates' use keys.
        unrunnable_since: when the caller first saw each snapshot ``unrunnable`` (absent: now).
        mine: whether a namespace is tracked (``outcomes.namespaces``).
    """
    if not (state.synced and state.snapshots_known and state.pods_known):
        return []
    by_name = state.snapshots.by_name
    keep = protected(by_name.values(), usage)
    out = []
    for key in sorted(by_name):  # (namespace, name): sorted as tuples of str, no key function
        view = by_name[key]
        if view.deleting_since or not mine(view.namespace) or (view.namespace, view.name) in keep:
            continue
        found = _reason(view, state, now, settings, usage=usage, since=unrunnable_since)
        if found is not None:
            reason, detail, due = found
            out.append(
                Prunable(view.namespace, view.name, view.policy, view.uid, reason, detail, due)
            )
    return out


def _reason(
    view: SnapshotView,
    state: ClusterState,
    now: datetime,
    settings: LifecycleSettings,
    *,
    usage: Usage,
    since: Mapping[tuple[str, str], datetime],
) -> tuple[str, str, datetime] | None:
    grace = timedelta(seconds=settings.prune_grace_seconds)
    if view.checkpoint == "failed" and not view.ready:
        failed = parse_time(view.checkpoint_at) or parse_time(view.created) or now
        message = view.checkpoint_message or "no message"
        return "checkpoint-failed", f"checkpoint failed ({message})", failed + grace
    if not view.ready:
        return None
    if unrunnable(view, state.node_pools):
        node = view.origin.node if view.origin is not None else {}
        driver = f", driver {node.get('gpuDriver')}" if node.get("gpuDriver") else ""
        detail = f"no node pool runs its origin version {node.get('version')}{driver} any more"
        return "unrunnable", detail, since.get((view.namespace, view.name), now) + grace
    key, used_at = snapshot_use(view), last_used(view)
    if key is None or used_at is None or usage.used(key) or not _kind_listed(view):
        return None
    if view.namespace not in usage.listed:
        return None
    due = used_at + timedelta(days=settings.unused_days)
    if due > now:
        return None
    detail = (
        f"no live pod or workload template of {view.policy} has its fingerprint, unused since "
        f"{view.last_used_text} (lifecycle.unused_days {settings.unused_days:g})"
    )
    return "unused", detail, due
