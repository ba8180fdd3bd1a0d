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
(``PruneDigest.newest``), and anything before the snapshot, pod and node caches are synced.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from operator import attrgetter

from webhook.base.tracking import LifecycleSettings
from webhook.snapshots.outcomes import stale_reason
from webhook.snapshots.per_policy import PerPolicy, digests
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


def _newest(newest: dict[UseKey, SnapshotView], view: SnapshotView) -> None:
    """Keep ``view`` in ``newest`` under its use key if it is Ready and the newest so far."""
    key = snapshot_use(view)
    if key is None or not view.ready:
        return
    best = newest.get(key)
    if best is None or (view.created, view.name) > (best.created, best.name):
        newest[key] = view


@dataclass(frozen=True)
class PruneDigest:
    """One policy's snapshots as the prune decisions read them apart from the clock, the
    settings, the live use keys and the tracked namespaces (``prune_digest``; ``prune_memo``
    keeps it while the policy's snapshots are the same objects and the node pools are equal).

    Attributes:
        newest: the newest Ready snapshot of each use key (never pruned while a live pod or
            template has the key).
        failed: each snapshot whose checkpoint failed, not Ready and not being deleted, with
            when it failed (None: neither time reads; the pass then uses its clock).
        unrunnable: the Ready ``unrunnable`` ones, being deleted or not (the caller's clock
            counts them all; ``prune_plan`` skips those being deleted).
        unused: per use key, the Ready snapshots only ``unused`` could prune (not being deleted,
            not unrunnable, a last use known, a kind whose templates are listed) with their
            last use.
        oldest: per use key, the oldest last use of its Ready snapshots of a listed kind
            (``unused_candidates``: being deleted or unrunnable ones count there).

    ``unused_prunables`` makes the ``unused`` ``Prunable`` of each once per digest: after an
    upgrade thousands are prunable pass after pass (``make bench-lifecycle``).
    """

    newest: Mapping[UseKey, SnapshotView]
    failed: tuple[tuple[SnapshotView, datetime | None], ...]
    unrunnable: tuple[SnapshotView, ...]
    unused: Mapping[UseKey, tuple[tuple[SnapshotView, datetime], ...]]
    oldest: Mapping[UseKey, datetime]
    _made: dict[float, Mapping[UseKey, tuple[Prunable, ...]]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def unused_prunables(self, days: float) -> Mapping[UseKey, tuple[Prunable, ...]]:
        """Per use key, the ``unused`` ``Prunable`` of each of its snapshots under
        ``lifecycle.unused_days`` ``days``, due or not (made on the first call for ``days``;
        any thread may call: two making the same value at once is harmless)."""
        made = self._made.get(days)
        if made is None:
            limit = timedelta(days=days)
            made = {
                key: tuple(
                    _prunable(
                        view, "unused",
                        f"no live pod or workload template of {view.policy} has its fingerprint, "
                        f"unused since {view.last_used_text} (lifecycle.unused_days {days:g})",
                        used_at + limit,
                    )
                    for view, used_at in views
                )
                for key, views in self.unused.items()
            }  # fmt: skip
            self._made.clear()  # the setting changed: only the current one is kept
            self._made[days] = made
        return made


def prune_digest(views: tuple[SnapshotView, ...], state: ClusterState) -> PruneDigest:
    """The ``PruneDigest`` of one policy's ``views`` on ``state``'s node pools (reads nothing
    else of ``state``: ``prune_memo``)."""
    newest: dict[UseKey, SnapshotView] = {}
    failed: list[tuple[SnapshotView, datetime | None]] = []
    stuck: list[SnapshotView] = []
    unused: dict[UseKey, list[tuple[SnapshotView, datetime]]] = {}
    oldest: dict[UseKey, datetime] = {}
    for view in views:
        _newest(newest, view)
        if not view.ready:
            if view.checkpoint == "failed" and not view.deleting_since:
                failed.append((view, parse_time(view.checkpoint_at) or parse_time(view.created)))
            continue
        runs = not unrunnable(view, state.node_pools)
        if not runs:
            stuck.append(view)
        key, used_at = snapshot_use(view), last_used(view)
        if key is None or used_at is None or not _kind_listed(view):
            continue
        before = oldest.get(key)
        oldest[key] = used_at if before is None else min(before, used_at)
        if runs and not view.deleting_since:
            unused.setdefault(key, []).append((view, used_at))
    return PruneDigest(
        newest, tuple(failed), tuple(stuck), {k: tuple(v) for k, v in unused.items()}, oldest
    )


def prune_memo() -> PerPolicy[PruneDigest]:
    """Prune digests kept between passes (``snapshots.per_policy``): they read the policy's
    snapshots and the node pools only."""
    return PerPolicy(prune_digest)


def unused_candidates(
    state: ClusterState,
    now: datetime,
    settings: LifecycleSettings,
    pods: frozenset[UseKey],
    *,
    memo: PerPolicy[PruneDigest] | None = None,
) -> set[str]:
    """Namespaces with a Ready snapshot that no live pod uses and whose unused clock ran out:
    only their templates need listing (``cluster.controllers.snapshot_lifecycle``).
    ``memo``: the caller's digests, kept between passes (None: computed now)."""
    limit = timedelta(days=settings.unused_days)
    out = set()
    for (namespace, _), digest in digests(state, prune_digest, memo):
        if namespace not in out and any(
            key not in pods and now - used_at >= limit for key, used_at in digest.oldest.items()
        ):
            out.add(namespace)
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
    memo: PerPolicy[PruneDigest] | None = None,
) -> list[Prunable]:
    """Every prune candidate (module table), sorted by namespace and name; ``due`` says when
    each becomes prunable. Empty while ``state`` is not synced (snapshots, pods, nodes).

    Args:
        state: the caches; ``now``: aware time; ``settings``: ``lifecycle``.
        usage: live pods' and listed templates' use keys.
        unrunnable_since: when the caller first saw each snapshot ``unrunnable`` (absent: now).
        mine: whether a namespace is tracked (``outcomes.namespaces``).
        memo: the caller's digests, kept between passes (None: computed now). Per pass, the
            work is per use key of each policy, plus per snapshot that is a candidate.
    """
    if not (state.synced and state.snapshots_known and state.pods_known):
        return []
    grace = timedelta(seconds=settings.prune_grace_seconds)
    out = []
    for (namespace, _), digest in digests(state, prune_digest, memo):
        if not mine(namespace):
            continue
        for view, failed in digest.failed:  # never Ready, so never kept
            message = view.checkpoint_message or "no message"
            detail = f"checkpoint failed ({message})"
            out.append(_prunable(view, "checkpoint-failed", detail, (failed or now) + grace))
        for view in digest.unrunnable:
            if view.deleting_since or _kept(digest, view, usage):
                continue
            node = view.origin.node if view.origin is not None else {}
            driver = f", driver {node.get('gpuDriver')}" if node.get("gpuDriver") else ""
            detail = f"no node pool runs its origin version {node.get('version')}{driver} any more"
            since = unrunnable_since.get((view.namespace, view.name), now)
            out.append(_prunable(view, "unrunnable", detail, since + grace))
        if namespace in usage.listed:
            out.extend(_unused(digest, usage, now, settings))
    out.sort(key=attrgetter("namespace", "name"))  # C-level keys: thousands per pass
    return out


def _kept(digest: PruneDigest, view: SnapshotView, usage: Usage) -> bool:
    """Whether ``view`` is the newest Ready snapshot of a use key a live pod or template has."""
    key = snapshot_use(view)
    return key is not None and digest.newest.get(key) is view and usage.used(key)


def _unused(
    digest: PruneDigest, usage: Usage, now: datetime, settings: LifecycleSettings
) -> list[Prunable]:
    """The ``unused`` prunes of one policy whose templates were listed: snapshots of a use key
    no live pod or template has (so none is kept as its newest), unused for ``unused_days``
    (not yet due: not a candidate)."""
    out: list[Prunable] = []
    for key, prunables in digest.unused_prunables(settings.unused_days).items():
        if not usage.used(key):
            out.extend(p for p in prunables if p.due <= now)
    return out


def _prunable(view: SnapshotView, reason: str, detail: str, due: datetime) -> Prunable:
    """``view`` as a ``Prunable`` for ``reason``."""
    return Prunable(view.namespace, view.name, view.policy, view.uid, reason, detail, due)
