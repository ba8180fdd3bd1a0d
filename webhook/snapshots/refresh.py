"""Snapshot lifecycle decisions, part two: which groups to refresh. Pure module.

Refresh (``refresh_plan``): per manual-trigger policy, per group whose Ready snapshots are stale
after an upgrade of their origin pool, one PodSnapshotManualTrigger named from policy, group and
upgrade (``trigger_name``) on a Ready pod of the group that started cold on the upgraded pool;
none while the group has a usable Ready snapshot or a checkpoint uploading. The same for a group
whose Ready snapshots are all ``stale-config`` (a Secret or ConfigMap their origin pod read
changed since, ``snapshots.config_refs``): the trigger goes on a pod of the group created after that
change, never on a restored copy (its memory holds the old value too).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace

import orjson

from webhook.kube.gke import GPU_DRIVER_VERSION
from webhook.kube.matching import Policy
from webhook.snapshots.config_refs import config_changes
from webhook.snapshots.outcomes import stale_reason
from webhook.snapshots.per_policy import PerPolicy, digests
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.state import ClusterState
from webhook.snapshots.usage import ReadyPods, group_of, ready_pods
from webhook.snapshots.views import Group, SnapshotView, parse_time


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


StaleKey = tuple[str, str, Group, str, str, str, str]
"""``(namespace, policy, group, pool, what, old, new)``: one refresh (``Refresh``)."""
BusyKey = tuple[str, str, Group | None]
"""``(namespace, policy, group)`` with a usable Ready snapshot or a checkpoint uploading (group
None: a snapshot without a record yet)."""


@dataclass(frozen=True)
class RefreshDigest:
    """One policy's stale groups and busy groups (``refresh_digest``; ``refresh_memo`` keeps it
    while the policy's snapshots are the same objects and the node pools and its namespace's
    configuration are equal).

    Attributes:
        stale: the stale snapshots of each refresh, in no particular order.
        busy: the groups not to refresh.
    """

    stale: Mapping[StaleKey, tuple[SnapshotView, ...]]
    busy: frozenset[BusyKey]


def refresh_digest(views: tuple[SnapshotView, ...], state: ClusterState) -> RefreshDigest:
    """The ``RefreshDigest`` of one policy's ``views`` (snapshots being deleted left out) on
    ``state``'s node pools and the configuration of the policy's namespace (reads nothing else
    of ``state``: ``refresh_memo``)."""
    stale: dict[StaleKey, list[SnapshotView]] = {}
    busy: set[BusyKey] = set()
    for view in views:
        group = view.group
        if view.deleting_since:
            continue
        reason = stale_reason(view, state.node_pools)
        if view.checkpoint == "awaiting" or (view.ready and reason is None):
            busy.add((view.namespace, view.policy, group))
        if reason is not None and view.origin is not None and group is not None:
            pool = view.origin.node.get("pool") or ""
            stale.setdefault((view.namespace, view.policy, group, pool, *reason), []).append(view)
    config_stale(views, state, stale, busy)
    return RefreshDigest({k: tuple(v) for k, v in stale.items()}, frozenset(busy))


def refresh_memo() -> PerPolicy[RefreshDigest]:
    """Refresh digests kept between passes (``snapshots.per_policy``): they read the policy's
    snapshots, the node pools and its namespace's Secret/ConfigMap metadata."""
    return PerPolicy(refresh_digest, _namespace_configs)


def _namespace_configs(state: ClusterState, key: tuple[str, str]) -> object:
    """What ``refresh_digest`` reads of ``state.configs`` for the policy ``key``."""
    return state.configs.get(key[0])


def refresh_plan(
    state: ClusterState,
    mine: Callable[[str], bool] = lambda _: True,
    *,
    source_label: str | None = None,
    memo: PerPolicy[RefreshDigest] | None = None,
    ready: Callable[[], ReadyPods] | None = None,
) -> list[Refresh]:
    """Every stale group of a live policy (manual and workload triggers), with the pod to
    trigger for manual ones; empty while the caches are not synced. ``source_label``: a label
    the pod must carry as ``"true"`` (``rules.manual_trigger.require_source_label``: snapready's
    own ``manual-trigger`` rule would deny a trigger on any other pod). ``memo``: the caller's
    digests, kept between passes (None: computed now). ``ready``: gives the pods a refresh may
    checkpoint, as of ``state``, called only when a group is stale (``PodUses.ready``; None:
    ``ready_pods(state)``, one walk).

    A group is skipped while it has a Ready snapshot that is not stale (already refreshed) or
    a checkpoint uploading (``awaiting``) in it or with an unknown group (no record yet).
    """
    if not (state.synced and state.snapshots_known and state.pods_known):
        return []
    stale: dict[StaleKey, tuple[SnapshotView, ...]] = {}
    busy: set[BusyKey] = set()
    for (namespace, _), digest in digests(state, refresh_digest, memo):
        if digest.stale and mine(namespace):
            stale.update(digest.stale)
            busy |= digest.busy
    return refreshes(state, stale, busy, source_label=source_label, ready=ready)


def refreshes(
    state: ClusterState,
    stale: Mapping[StaleKey, Iterable[SnapshotView]],
    busy: Collection[BusyKey],
    *,
    source_label: str | None = None,
    ready: Callable[[], ReadyPods] | None = None,
) -> list[Refresh]:
    """The ``Refresh`` of each ``stale`` group of a live policy that is not ``busy``, sorted by
    key, with the pod to trigger (``refresh_pod``; ``source_label`` and ``ready`` as
    ``refresh_plan``)."""
    if not stale:
        return []
    live = _policies(state)
    out = []
    by_namespace = ready_pods(state) if ready is None else ready()
    for key in sorted(stale):
        namespace, name, group, pool, what, old, new = key
        policy = live.get((namespace, name))
        if policy is None or (namespace, name, group) in busy or (namespace, name, None) in busy:
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
        pod = refresh_pod(state, policy, refresh, by_namespace.get(namespace, {}), source_label)
        if pod is not None:
            refresh = replace(refresh, pod=pod.name, pod_uid=pod.uid)
        out.append(refresh)
    return out


def config_stale(
    views: tuple[SnapshotView, ...],
    state: ClusterState,
    stale: dict[StaleKey, list[SnapshotView]],
    busy: set[BusyKey],
) -> None:
    """Add to ``stale`` the groups of ``views`` (one policy's snapshots, or any set of whole
    groups) whose usable Ready snapshots all hold rotated configuration, keyed ``(namespace,
    policy, group, "", "config", "<Kind>/<name>", <change time>)`` (the newest snapshot's
    first change), and drop them from ``busy``."""
    clean: set[tuple[str, str, Group]] = set()
    rotated: dict[tuple[str, str, Group], list[tuple[SnapshotView, str, str]]] = {}
    for view in views:
        group = view.group  # None: no record
        if group is None or view.deleting_since or not view.ready:
            continue
        if stale_reason(view, state.node_pools) is not None:
            continue
        key = (view.namespace, view.policy, group)
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
    state: ClusterState,
    policy: Policy,
    refresh: Refresh,
    ready: Mapping[str | None, Mapping[str, PodRecord]],
    source_label: str | None = None,
) -> PodRecord | None:
    """The pod to checkpoint among ``ready`` (``ReadyPods`` of ``refresh``'s namespace, by
    fingerprint): one of the stale snapshots' fingerprints when they have any (another template
    of the group: its checkpoint refreshes nothing stale), selected by ``policy`` by its labels
    now (the policy cache, not its annotations), of the group, on a node of the upgraded pool
    that runs the new version (or driver). The earliest Ready first, then by name (stable
    across passes)."""
    if refresh.fingerprints:
        candidates: Iterable[Mapping[str, PodRecord]] = [
            ready[spec_hash] for spec_hash in refresh.fingerprints if spec_hash in ready
        ]
    else:
        candidates = ready.values()
    found = []
    for record in (record for pods in candidates for record in pods.values()):
        if source_label is not None and record.labels.get(source_label) != "true":
            continue
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
