"""What the lifecycle pass derives from each policy's snapshots, kept between passes. Pure module.

The leader's lifecycle pass (``cluster.controllers.snapshot_lifecycle``) judges every
PodSnapshot every 5 s at most, and at 5,000 snapshots a pass that walked them all held the
interpreter for ~50-60 ms beside the event loop that answers the API server
(``make bench-lifecycle``; ``make bench-scale``'s busy rounds). Most of what it reads does not
change between two passes: a policy's snapshots (``SnapshotIndex.by_policy``: one tuple per
namespace and policy, replaced, never edited, and only for the policy a change touched), the
node pools, and the Secret/ConfigMap metadata of the policy's namespace. So the prune and refresh
decisions are split in two: a digest per policy of what those alone decide
(``prune.PruneDigest``, ``refresh.RefreshDigest``), and a per-pass step that adds the clock, the
settings, the live pods' and templates' use keys and the tracked namespaces, per use key rather
than per snapshot. ``PerPolicy`` keeps each policy's digest while its tuple is the same object
and its other inputs are equal; the one-shot callers (``snapready status``, tests) pass none and
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
and, if it says so, its namespace's configuration (``Inputs``); must read nothing else."""
Inputs = Callable[[ClusterState, PolicyKey], object]
"""What a digest reads of the state beyond the node pools, for one policy (compared by
equality: ``None`` when it reads nothing more)."""


def no_inputs(state: ClusterState, key: PolicyKey) -> object:
    """``Inputs`` of a digest that reads only the node pools."""
    return None


class PerPolicy(Generic[T]):
    """Digests of each policy's snapshots, kept between calls (one caller thread).

    ``of(state)`` computes a policy's digest again when its snapshots tuple is another object
    than last time or its ``inputs`` differ, and every digest when the node pools differ (each
    compared by identity first, then by equality: the caches rebuild an equal object on some
    changes, e.g. an empty configuration index per state); a policy without snapshots any more
    is dropped. Between two calls it holds the digests and the last state's tuples (one
    generation of snapshot views at most). ``computed`` counts the digests computed (tests,
    benchmarks).
    """

    def __init__(self, digest: Digest[T], inputs: Inputs = no_inputs) -> None:
        self.digest, self.inputs = digest, inputs
        self.computed = 0
        self._seen: tuple[object, object, object] | None = None
        self._entries: dict[PolicyKey, tuple[tuple[SnapshotView, ...], object, T]] = {}
        self._values: dict[PolicyKey, T] = {}

    def of(self, state: ClusterState) -> Mapping[PolicyKey, T]:
        """Every policy's digest on ``state`` (treat as read-only)."""
        by_policy, pools = state.snapshots.by_policy, state.node_pools
        seen = (by_policy, pools, state.configs)
        if self._seen is not None and all(a is b for a, b in zip(seen, self._seen, strict=True)):
            return self._values
        before = self._seen[1] if self._seen is not None else None
        same_pools = before is not None and (pools is before or pools == before)
        entries: dict[PolicyKey, tuple[tuple[SnapshotView, ...], object, T]] = {}
        for key, views in by_policy.items():
            inputs = self.inputs(state, key)
            kept = self._entries.get(key) if same_pools else None
            if kept is None or kept[0] is not views or kept[1] != inputs:
                kept = (views, inputs, self.digest(views, state))
                self.computed += 1
            entries[key] = kept
        self._seen, self._entries = seen, entries
        self._values = {key: value for key, (_, _, value) in entries.items()}
        return self._values


def digests(
    state: ClusterState, digest: Digest[T], memo: PerPolicy[T] | None
) -> Iterable[tuple[PolicyKey, T]]:
    """``(policy key, digest)`` of every policy with snapshots: from ``memo`` (kept between
    passes), or each computed now when it is None."""
    if memo is not None:
        return memo.of(state).items()
    return ((key, digest(views, state)) for key, views in state.snapshots.by_policy.items())
