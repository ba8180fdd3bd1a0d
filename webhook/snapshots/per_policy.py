"""What the lifecycle pass derives from each policy's snapshots, kept between passes. Pure module.

The leader's lifecycle pass (``cluster.controllers.snapshot_lifecycle``) judges every
PodSnapshot every 5 s at most, and at 5,000 snapshots a pass that walked them all held the
interpreter for ~50-60 ms beside the event loop that answers the API server
(``make bench-lifecycle``; ``make bench-scale``'s busy rounds). Most of what it reads does not
change between two passes: a policy's snapshots (``SnapshotIndex.by_policy``: one tuple per
namespace and policy, replaced, never edited, and only for the policy a change touched), the
node pools and the Secret/ConfigMap index (both replaced on any change). So the prune and refresh
decisions are split in two: a digest per policy of what those objects alone decide
(``prune.PruneDigest``, ``refresh.RefreshDigest``), and a per-pass step that adds the clock, the
settings, the live pods' and templates' use keys and the tracked namespaces, per use key rather
than per snapshot. ``PerPolicy`` keeps each policy's digest while its tuple, the pools and the
index are the same objects; the one-shot callers (``snapready status``, tests) pass none and
compute every digest afresh, the same code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Generic, TypeVar

from webhook.snapshots.state import ClusterState
from webhook.snapshots.views import SnapshotView

T = TypeVar("T")
PolicyKey = tuple[str, str]
"""``(namespace, policy)``, as ``SnapshotIndex.by_policy`` keys them."""
Digest = Callable[[tuple[SnapshotView, ...], ClusterState], T]
"""Computes one policy's digest from its snapshots (newest first) and the state's node pools
and configuration index; must read nothing else of the state."""


class PerPolicy(Generic[T]):
    """Digests of each policy's snapshots, kept between calls (one caller thread).

    ``of(state)`` computes a policy's digest again only when its snapshots tuple is another
    object than last time, and every digest when the node pools or the configuration index
    are (they are replaced on any change: ``ClusterState``); a policy without snapshots any more
    is dropped. ``computed`` counts the digests computed (tests, benchmarks).
    """

    def __init__(self, digest: Digest[T]) -> None:
        self.digest = digest
        self.computed = 0
        self._seen: tuple[object, object, object] | None = None
        self._entries: dict[PolicyKey, tuple[tuple[SnapshotView, ...], T]] = {}
        self._values: dict[PolicyKey, T] = {}

    def of(self, state: ClusterState) -> Mapping[PolicyKey, T]:
        """Every policy's digest on ``state`` (treat as read-only)."""
        by_policy = state.snapshots.by_policy
        seen = (by_policy, state.node_pools, state.configs)
        if self._seen is not None and all(a is b for a, b in zip(seen, self._seen, strict=True)):
            return self._values
        same_facts = self._seen is not None and all(
            a is b for a, b in zip(seen[1:], self._seen[1:], strict=True)
        )
        entries: dict[PolicyKey, tuple[tuple[SnapshotView, ...], T]] = {}
        for key, views in by_policy.items():
            kept = self._entries.get(key) if same_facts else None
            if kept is None or kept[0] is not views:
                kept = (views, self.digest(views, state))
                self.computed += 1
            entries[key] = kept
        self._seen, self._entries = seen, entries
        self._values = {key: value for key, (_, value) in entries.items()}
        return self._values


def digests(
    state: ClusterState, digest: Digest[T], memo: PerPolicy[T] | None
) -> Iterable[tuple[PolicyKey, T]]:
    """``(policy key, digest)`` of every policy with snapshots: from ``memo`` (kept between
    passes), or each computed now when it is None."""
    if memo is not None:
        return memo.of(state).items()
    return ((key, digest(views, state)) for key, views in state.snapshots.by_policy.items())
