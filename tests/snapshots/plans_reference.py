"""The lifecycle decisions as one walk over every snapshot: the reference the per-policy
digests (``snapshots.per_policy``, ``prune.prune_plan``, ``refresh.refresh_plan``) must agree
with.

This is how ``snapshots.prune`` and ``snapshots.refresh`` decided before the digests (commit
``e475042``), the module table read snapshot by snapshot: first reason wins, the newest Ready
snapshot of each used key kept, stale and busy groups gathered over every snapshot. It shares
the per-snapshot facts (``unrunnable``, ``stale_reason``), the output
types, rotated configuration of a set of snapshots (``refresh.config_stale``, given every
tracked snapshot at once) and the step from stale and busy groups to refreshes
(``refresh.refreshes``) with the code under test, not the way the snapshots are gathered into
decisions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta

from webhook.base.tracking import LifecycleSettings
from webhook.snapshots.outcomes import stale_reason
from webhook.snapshots.prune import Prunable, Usage, last_used, unrunnable
from webhook.snapshots.refresh import Refresh, config_stale, refreshes
from webhook.snapshots.state import ClusterState
from webhook.snapshots.usage import LISTED_KINDS, snapshot_use
from webhook.snapshots.views import Group, SnapshotView, parse_time


def protected(views: Iterable[SnapshotView], usage: Usage) -> set[tuple[str, str]]:
    newest: dict[object, SnapshotView] = {}
    for view in views:
        key = snapshot_use(view)
        if key is None or not view.ready or not usage.used(key):
            continue
        best = newest.get(key)
        if best is None or (view.created, view.name) > (best.created, best.name):
            newest[key] = view
    return {(v.namespace, v.name) for v in newest.values()}


def kind_listed(view: SnapshotView) -> bool:
    workload = view.origin.workload if view.origin is not None else None
    return workload is None or workload.kind in LISTED_KINDS


def unused_candidates(
    state: ClusterState, now: datetime, settings: LifecycleSettings, pods: frozenset[object]
) -> set[str]:
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
            and kind_listed(view)
        ):
            out.add(view.namespace)
    return out


def prune_plan(
    state: ClusterState,
    now: datetime,
    settings: LifecycleSettings,
    *,
    usage: Usage,
    unrunnable_since: Mapping[tuple[str, str], datetime],
    mine: Callable[[str], bool],
) -> list[Prunable]:
    if not (state.synced and state.snapshots_known and state.pods_known):
        return []
    by_name = state.snapshots.by_name
    keep = protected(by_name.values(), usage)
    out = []
    for key in sorted(by_name):
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
    if key is None or used_at is None or usage.used(key) or not kind_listed(view):
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


StaleKey = tuple[str, str, Group, str, str, str, str]


def refresh_plan(
    state: ClusterState, mine: Callable[[str], bool], *, source_label: str | None = None
) -> list[Refresh]:
    if not (state.synced and state.snapshots_known and state.pods_known):
        return []
    stale: dict[StaleKey, list[SnapshotView]] = {}
    busy: set[tuple[str, str, Group | None]] = set()
    for view in state.snapshots.by_name.values():
        group = view.group
        if view.deleting_since or not mine(view.namespace):
            continue
        reason = stale_reason(view, state.node_pools)
        if view.checkpoint == "awaiting" or (view.ready and reason is None):
            busy.add((view.namespace, view.policy, group))
        if reason is not None and view.origin is not None and group is not None:
            pool = view.origin.node.get("pool") or ""
            stale.setdefault((view.namespace, view.policy, group, pool, *reason), []).append(view)
    tracked = tuple(v for v in state.snapshots.by_name.values() if mine(v.namespace))
    config_stale(tracked, state, stale, busy)  # all tracked snapshots at once, not per policy
    return refreshes(state, stale, busy, source_label=source_label)
