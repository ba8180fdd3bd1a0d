"""Snapshot lifecycle decisions: which snapshots to prune, which groups to refresh. Pure module.

GKE restores a snapshot only into a pod of its policy and group (same grouping-label values)
whose distilled spec hashes the same, on a node of the origin node's GKE version and GPU driver
(domain.md sections 3 and 9). So a snapshot that no pod can ever restore from only costs
storage (20-70 GiB each, billed until deleted) and keeps a memory image with its secrets alive.

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

Refresh (``refresh_plan``): per manual-trigger policy, per group whose Ready snapshots are stale
after an upgrade of their origin pool, one PodSnapshotManualTrigger named from policy, group and
upgrade (``trigger_name``) on a Ready pod of the group that started cold on the upgraded pool;
none while the group has a usable Ready snapshot or a checkpoint uploading. The same for a group
whose Ready snapshots are all ``stale-config`` (a Secret or ConfigMap their origin pod read
changed since, ``kube.config_refs``): the trigger goes on a pod of the group created after that
change, never on a restored copy (its memory holds the old value too).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import orjson

from webhook.base.tracking import LifecycleSettings
from webhook.kube.config_refs import config_changes
from webhook.kube.gke import GPU_DRIVER_VERSION
from webhook.kube.matching import Policy
from webhook.kube.outcomes import RESTORED_OUTCOMES, parse_time, stale_reason
from webhook.kube.snapshots import PodRecord, SnapshotView
from webhook.kube.state import ClusterState, NodePoolFacts

PRUNE_REASONS = ("checkpoint-failed", "unrunnable", "unused")
LISTED_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob")
"""Workload kinds whose templates the leader lists on demand (``cluster.lifecycle``); a snapshot
whose origin workload is of another kind is never ``unused`` (its templates are unknown)."""
Group = tuple[tuple[str, str], ...]
UseKey = tuple[str, str, Group, str]
"""``(namespace, policy, group, fingerprint)``: what a pod or template could restore from."""
ENDED_PHASES = ("Succeeded", "Failed")


def group_key(group: Mapping[str, str]) -> Group:
    """A group's values (``OriginRecord.group``) as a sorted, hashable tuple."""
    return tuple(sorted(group.items()))


def group_of(policy: Policy, labels: Mapping[str, str]) -> Group:
    """The group of a pod or template with ``labels`` under ``policy`` (its grouping labels'
    values; a missing label is absent), as ``pod.restore.group_of`` records it."""
    return tuple(sorted((k, labels[k]) for k in policy.grouping_labels if k in labels))


def use_keys(
    namespace: str, labels: Mapping[str, str], spec_hash: str, policies: Iterable[Policy]
) -> list[UseKey]:
    """The keys a pod or template with ``labels`` and fingerprint ``spec_hash`` uses under
    the ``policies`` that select it (callers pass ``PolicyIndex.select``'s answer)."""
    return [(namespace, p.name, group_of(p, labels), spec_hash) for p in policies]


UseCache = dict[str, tuple[object, object, tuple[UseKey, ...]]]
"""pod key -> (its record, the policy index, its use keys): ``pod_uses`` of the last pass."""


def pod_uses(state: ClusterState, cache: UseCache | None = None) -> frozenset[UseKey]:
    """Use keys of the live stamped pods (not ``Succeeded``/``Failed``), each under the live
    policies that select it by its labels (never the pod's own ``<prefix>policy``).

    ``cache`` (the leader's, across passes): a pod whose record and the policy index are the
    same objects as last time reuses its keys (records and the index are replaced, never
    edited, on a change), so a pass over 20,000 unchanged pods selects none of them again."""
    keys: set[UseKey] = set()
    policies = state.policies
    for key, record in state.pods.items():
        if record.spec_hash is None or record.phase in ENDED_PHASES:
            continue
        hit = cache.get(key) if cache is not None else None
        if hit is not None and hit[0] is record and hit[1] is policies:
            keys.update(hit[2])
            continue
        selecting = policies.select(record.namespace, record.labels)
        found = tuple(use_keys(record.namespace, record.labels, record.spec_hash, selecting))
        if cache is not None:
            cache[key] = (record, policies, found)
        keys.update(found)
    if cache is not None and len(cache) > len(state.pods):
        for key in [k for k in cache if k not in state.pods]:
            del cache[key]
    return frozenset(keys)


def snapshot_use(view: SnapshotView) -> UseKey | None:
    """The use key of a snapshot from its origin record; None when its fingerprint is unknown."""
    if view.origin is None or view.origin.spec_hash is None:
        return None
    return (view.namespace, view.policy, group_key(view.origin.group), view.origin.spec_hash)


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
    """GKE's ``status.lastAccessTime`` or the creation, whichever is newer (GKE's clock)."""
    times = [t for t in (parse_time(view.last_access), parse_time(view.created)) if t]
    return max(times) if times else None


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
    only their templates need listing (``cluster.lifecycle``)."""
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
    views = list(state.snapshots.by_name.values())
    keep = protected(views, usage)
    out = []
    for view in sorted(views, key=lambda v: (v.namespace, v.name)):
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
        f"{used_at.strftime('%Y-%m-%dT%H:%M:%SZ')} (lifecycle.unused_days {settings.unused_days:g})"
    )
    return "unused", detail, due


def trigger_name(namespace: str, policy: str, group: Group, upgrade: tuple[str, ...]) -> str:
    """``snapready-refresh-<16 hex>``: sha256 of namespace, policy, group and the upgrade
    (pool, what, old, new), so every replica and every restart derives the same name for the
    same refresh (a DNS-1123 subdomain of 34 characters)."""
    text = orjson.dumps([namespace, policy, [list(p) for p in group], list(upgrade)])
    return "snapready-refresh-" + hashlib.sha256(text).hexdigest()[:16]


@dataclass(frozen=True)
class Refresh:
    """One group of a policy whose Ready snapshots an upgrade made stale.

    Attributes:
        namespace, policy, group: the group; ``pool``, ``what``, ``old``, ``new``: the upgrade
            (``outcomes.Staleness``); ``snapshots``: the stale ones, newest first.
        trigger: the trigger name (``trigger_name``); ``pod``/``pod_uid``: the Ready pod that
            started cold on the upgraded pool to checkpoint, None while there is none.
        manual: the policy's trigger is ``manual`` (only then does snapready write).
    """

    namespace: str
    policy: str
    group: Group
    pool: str
    what: str
    old: str
    new: str
    snapshots: tuple[str, ...]
    trigger: str
    manual: bool
    pod: str | None = None
    pod_uid: str = ""
    fingerprints: frozenset[str] = frozenset()
    """The stale snapshots' recorded fingerprints: the pod to trigger must have one of them."""

    def change(self) -> str:
        """What made the snapshots stale: ``node pool l4 upgraded version 1.35.3 -> 1.35.4``,
        or ``Secret/hf-token changed at 2026-12-02T08:00:00Z`` (``what`` ``config``)."""
        if self.what == "config":
            return f"{self.old} changed at {self.new}"
        return f"node pool {self.pool} upgraded {self.what} {self.old} -> {self.new}"

    def note(self, pod: str | None = None) -> str:
        """The ``SnapshotRefreshTriggered`` note (deterministic: Events are deduplicated)."""
        group = ",".join(f"{k}={v}" for k, v in self.group) or "(ungrouped)"
        return (
            f"{self.change()}: "
            f"PodSnapshotManualTrigger {self.trigger} on pod {pod or self.pod} (group {group}) "
            f"replaces {len(self.snapshots)} stale snapshot(s)"
        )


def _policies(state: ClusterState) -> dict[tuple[str, str], Policy]:
    return {(p.namespace, p.name): p for ps in state.policies.by_namespace.values() for p in ps}


def refresh_plan(
    state: ClusterState,
    mine: Callable[[str], bool] = lambda _: True,
    *,
    source_label: str | None = None,
) -> list[Refresh]:
    """Every stale group of a live policy (manual and workload triggers), with the pod to
    trigger for manual ones; empty while the caches are not synced. ``source_label``: a label
    the pod must carry as ``"true"`` (``rules.manual_trigger.require_source_label``: snapready's
    own ``manual-trigger`` rule would deny a trigger on any other pod).

    A group is skipped while it has a Ready snapshot that is not stale (already refreshed) or
    a checkpoint uploading (``awaiting``) in it or with an unknown group (no record yet).
    """
    if not (state.synced and state.snapshots_known and state.pods_known):
        return []
    live = _policies(state)
    stale: dict[tuple[str, str, Group, str, str, str, str], list[SnapshotView]] = {}
    busy: set[tuple[str, str, Group | None]] = set()
    for view in state.snapshots.by_name.values():
        group = group_key(view.origin.group) if view.origin is not None else None
        if view.deleting_since or not mine(view.namespace):
            continue
        reason = stale_reason(view, state.node_pools)
        if view.checkpoint == "awaiting" or (view.ready and reason is None):
            busy.add((view.namespace, view.policy, group))
        if reason is not None and view.origin is not None and group is not None:
            pool = view.origin.node.get("pool") or ""
            stale.setdefault((view.namespace, view.policy, group, pool, *reason), []).append(view)
    _config_stale(state, mine, stale, busy)
    out = []
    for key in sorted(stale):
        namespace, name, group, pool, what, old, new = key
        policy = live.get((namespace, name))
        if policy is None or {(namespace, name, group), (namespace, name, None)} & busy:
            continue
        views = sorted(stale[key], key=lambda v: (v.created, v.name), reverse=True)
        refresh = Refresh(
            namespace, name, group, pool, what, old, new,
            snapshots=tuple(v.name for v in views),
            trigger=trigger_name(namespace, name, group, (pool, what, old, new)),
            manual=policy.trigger_type == "manual",
            fingerprints=frozenset(
                v.origin.spec_hash for v in views if v.origin is not None and v.origin.spec_hash
            ),
        )  # fmt: skip
        pod = refresh_pod(state, policy, refresh, source_label)
        if pod is not None:
            refresh = replace(refresh, pod=pod.name, pod_uid=pod.uid)
        out.append(refresh)
    return out


def _config_stale(
    state: ClusterState,
    mine: Callable[[str], bool],
    stale: dict[tuple[str, str, Group, str, str, str, str], list[SnapshotView]],
    busy: set[tuple[str, str, Group | None]],
) -> None:
    """Add to ``stale`` the groups whose usable Ready snapshots all hold rotated configuration,
    keyed ``(namespace, policy, group, "", "config", "<Kind>/<name>", <change time>)`` (the
    newest snapshot's first change), and drop them from ``busy``."""
    clean: set[tuple[str, str, Group]] = set()
    rotated: dict[tuple[str, str, Group], list[tuple[SnapshotView, str, str]]] = {}
    for view in state.snapshots.by_name.values():
        if view.origin is None or view.deleting_since or not view.ready or not mine(view.namespace):
            continue
        if stale_reason(view, state.node_pools) is not None:
            continue
        key = (view.namespace, view.policy, group_key(view.origin.group))
        changes = config_changes(view, state.configs)
        if not changes:
            clean.add(key)
            continue
        first = changes[0]
        rotated.setdefault(key, []).append(
            (view, f"{first.kind}/{first.name}", first.at or first.what)
        )
    for key, items in rotated.items():
        if key in clean:
            continue
        items.sort(key=lambda item: (item[0].created, item[0].name), reverse=True)
        _, changed, at = items[0]
        busy.discard(key)
        stale[(*key, "", "config", changed, at)] = [view for view, _, _ in items]


def refresh_pod(
    state: ClusterState, policy: Policy, refresh: Refresh, source_label: str | None = None
) -> PodRecord | None:
    """The pod to checkpoint: stamped, selected by ``policy`` by its labels now (the policy
    cache, not its annotations), of the group, ``Running`` and Ready, not a restored copy
    (``PodRestored`` or a restored outcome), on a node of the upgraded pool that runs the new
    version (or driver). The earliest Ready first, then by name (stable across passes)."""
    found = []
    for record in state.pods.values():
        if record.namespace != refresh.namespace or record.ready_at is None:
            continue
        if record.phase != "Running" or record.restored or record.outcome in RESTORED_OUTCOMES:
            continue
        if source_label is not None and record.labels.get(source_label) != "true":
            continue
        if refresh.fingerprints and record.spec_hash not in refresh.fingerprints:
            continue  # another template of the group: its checkpoint refreshes nothing stale
        if group_of(policy, record.labels) != refresh.group:
            continue
        if policy not in state.policies.select(record.namespace, record.labels):
            continue
        if not _upgraded(state, record, refresh):
            continue
        found.append(record)
    found.sort(key=lambda r: (r.ready_at or "", r.name))
    return found[0] if found else None


def _upgraded(state: ClusterState, record: PodRecord, refresh: Refresh) -> bool:
    if refresh.what == "config":  # a pod that started after the change read the new value
        changed = parse_time(refresh.new)
        created = parse_time(record.created)
        return changed is not None and created is not None and created > changed
    node = state.nodes.get(record.node_name or "")
    if node is None or node.pool != refresh.pool:
        return False
    if refresh.what == "version":
        return node.version is not None and node.version != refresh.old
    driver = node.label(GPU_DRIVER_VERSION)
    return driver is not None and driver != refresh.old
