"""``SnapshotIndex``: which Ready snapshots could this pod restore from, answered from memory.

Snapshots by namespace and policy (newest first), by name, and the Ready ones of each policy by
recorded snapshot group (``ReadyGroups``), maintained when the cache changes so that admission
reads only the pod's own group. Pure module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from webhook.snapshots.views import OriginRecord, SnapshotView


def _newest_first(view: SnapshotView) -> tuple[str, str]:
    """Sort key (with ``reverse=True``): newest ``created`` first, then by name."""
    return (view.created, view.name)


GroupKey = tuple[tuple[str, str], ...]
"""A snapshot group as a dict key: the grouping labels' values, sorted by label key."""
OriginKey = tuple[object, ...]
"""What a prediction compares of a record: its fingerprint, whether it has field digests, and
its node facts. Snapshots of one template on one node pool share it."""


def origin_key(origin: OriginRecord) -> OriginKey:
    """``origin``'s ``OriginKey``."""
    return (origin.spec_hash, bool(origin.fields), *sorted(origin.node.items()))


def distinct_origins(views: Iterable[SnapshotView]) -> tuple[tuple[OriginKey, SnapshotView], ...]:
    """The first (newest, given newest first) view of each distinct ``OriginKey`` among the
    ``views`` whose record knows the origin's fingerprint; the order is kept."""
    seen: dict[OriginKey, SnapshotView] = {}
    for view in views:
        origin = view.origin
        if origin is not None and origin.spec_hash:
            seen.setdefault(origin_key(origin), view)
    return tuple(seen.items())


def group_key(group: Mapping[str, str]) -> GroupKey:
    """``group`` (label key -> value) as a ``GroupKey``."""
    return tuple(sorted(group.items()))


@dataclass(frozen=True)
class ReadyGroups:
    """The Ready snapshots of one policy in one namespace, by recorded snapshot group.

    What a prediction reads, indexed when the cache changes so that admission looks at the
    pod's own group only (docs/performance.md, scale: nothing on the request path iterates the
    namespace's snapshots).

    Attributes:
        by_group: group -> its Ready snapshots with a record, newest first.
        unrecorded: Ready snapshots without a record (group unknown: every pod's candidate),
            newest first.
        ready: how many snapshots are Ready (recorded or not).
        origins: group -> ``distinct_origins`` of its snapshots (what a prediction compares:
            21 snapshots of one template on one pool are one comparison).
        comparable: group -> how many of its snapshots know their origin's fingerprint.
    """

    by_group: Mapping[GroupKey, tuple[SnapshotView, ...]] = field(default_factory=dict)
    unrecorded: tuple[SnapshotView, ...] = ()
    ready: int = 0
    origins: Mapping[GroupKey, tuple[tuple[OriginKey, SnapshotView], ...]] = field(
        default_factory=dict
    )
    comparable: Mapping[GroupKey, int] = field(default_factory=dict)

    @classmethod
    def of(cls, views: Iterable[SnapshotView]) -> ReadyGroups:
        """Group the Ready ones of ``views`` (given newest first; the order is kept)."""
        by_group: dict[GroupKey, list[SnapshotView]] = {}
        unrecorded: list[SnapshotView] = []
        ready = 0
        for view in views:
            if not view.ready:
                continue
            ready += 1
            if view.origin is None:
                unrecorded.append(view)
            else:
                by_group.setdefault(group_key(view.origin.group), []).append(view)
        return cls(
            {k: tuple(v) for k, v in by_group.items()},
            tuple(unrecorded),
            ready,
            {k: distinct_origins(v) for k, v in by_group.items()},
            {k: sum(1 for x in v if x.origin is not None and x.origin.spec_hash)
             for k, v in by_group.items()},
        )  # fmt: skip

    def candidates(self, group: Mapping[str, str]) -> list[SnapshotView]:
        """The Ready snapshots of ``group`` plus the unrecorded ones, newest first."""
        found = self.by_group.get(group_key(group), ())
        if not self.unrecorded:
            return list(found)
        return sorted((*found, *self.unrecorded), key=_newest_first, reverse=True)


NO_READY = ReadyGroups()


@dataclass
class SnapshotIndex:
    """Snapshots by namespace and policy, newest first; by namespace and name; and the Ready
    ones of each policy by snapshot group (``ReadyGroups``, what admission reads)."""

    by_policy: dict[tuple[str, str], tuple[SnapshotView, ...]] = field(default_factory=dict)
    by_name: dict[tuple[str, str], SnapshotView] = field(default_factory=dict)
    ready: dict[tuple[str, str], ReadyGroups] = field(default_factory=dict)

    @classmethod
    def build(cls, views: Iterable[SnapshotView]) -> SnapshotIndex:
        """Index ``views`` (newest ``created`` first, then by name for a stable order)."""
        grouped: dict[tuple[str, str], list[SnapshotView]] = {}
        by_name: dict[tuple[str, str], SnapshotView] = {}
        for view in views:
            grouped.setdefault((view.namespace, view.policy), []).append(view)
            by_name[(view.namespace, view.name)] = view
        ordered = {
            key: tuple(sorted(items, key=_newest_first, reverse=True))
            for key, items in grouped.items()
        }
        ready = {key: ReadyGroups.of(items) for key, items in ordered.items()}
        return cls(ordered, by_name, {k: v for k, v in ready.items() if v.ready})

    def updated(self, old: SnapshotView | None, new: SnapshotView | None) -> SnapshotIndex:
        """A new index with ``old`` replaced by ``new`` (None: absent), equal to ``build`` of
        the changed views; only the affected policies' snapshots are sorted and grouped
        again, and this index is left as it is (readers of the current cluster state may
        hold it)."""
        by_policy, by_name = dict(self.by_policy), dict(self.by_name)
        touched: set[tuple[str, str]] = set()
        if old is not None:
            by_name.pop((old.namespace, old.name), None)
            key = (old.namespace, old.policy)
            touched.add(key)
            rest = tuple(v for v in by_policy.get(key, ()) if v.name != old.name)
            if rest:
                by_policy[key] = rest
            else:
                by_policy.pop(key, None)
        if new is not None:
            by_name[(new.namespace, new.name)] = new
            key = (new.namespace, new.policy)
            touched.add(key)
            group = [v for v in by_policy.get(key, ()) if v.name != new.name]
            group.append(new)
            by_policy[key] = tuple(sorted(group, key=_newest_first, reverse=True))
        ready = dict(self.ready)
        for key in touched:
            groups = ReadyGroups.of(by_policy.get(key, ()))
            if groups.ready:
                ready[key] = groups
            else:
                ready.pop(key, None)
        return SnapshotIndex(by_policy, by_name, ready)

    def of_policy(self, namespace: str, policy: str) -> tuple[SnapshotView, ...]:
        """Every snapshot of ``policy`` in ``namespace``, newest first."""
        return self.by_policy.get((namespace, policy), ())

    def ready_of(self, namespace: str, policy: str) -> ReadyGroups:
        """The Ready snapshots of ``policy`` in ``namespace`` by group (``NO_READY``: none)."""
        return self.ready.get((namespace, policy), NO_READY)

    def named(self, namespace: str, name: str) -> SnapshotView | None:
        """The snapshot ``namespace/name``, if known."""
        return self.by_name.get((namespace, name))

    def __len__(self) -> int:
        return len(self.by_name)
