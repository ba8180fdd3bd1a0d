"""Which (namespace, policy, group, fingerprint) the live pods and the snapshots use: the
keys that ``snapshots.prune`` and ``snapshots.refresh`` compare. Pure module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from webhook.kube.matching import Policy, PolicyIndex
from webhook.snapshots.outcomes import RESTORED_OUTCOMES
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.state import ClusterState
from webhook.snapshots.views import Group, SnapshotView, UseKey, group_key

LISTED_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob")
"""Workload kinds whose templates the leader lists on demand
(``cluster.controllers.snapshot_lifecycle``); a snapshot whose origin workload is of another
kind is never ``unused`` (its templates are unknown)."""
ENDED_PHASES = ("Succeeded", "Failed")
LABEL_SETS = 4096
"""Label sets ``PodUses`` remembers the use keys of (a template's replicas share one; a
StatefulSet's or a Job's pods each have their own)."""
LABEL_CHARS = 1 << 20
"""Characters of label keys and values ``PodUses`` remembers in all (a pod may carry
megabytes of labels: 400 such pods created and deleted had kept 623 MiB in a hostile trial;
the chart's memory limit is 256 MiB); a label set over 1/64 of it is not remembered."""


def group_of(policy: Policy, labels: Mapping[str, str]) -> Group:
    """The group of a pod or template with ``labels`` under ``policy`` (its grouping labels'
    values; a missing label is absent), as ``pod.restore.group_of`` records it: each label
    once, however often the policy names it (else a pod's key would never equal its snapshot's
    recorded group, and a snapshot in use would look unused)."""
    return group_key({k: labels[k] for k in policy.grouping_labels if k in labels})


def use_keys(
    namespace: str, labels: Mapping[str, str], spec_hash: str, policies: Iterable[Policy]
) -> list[UseKey]:
    """The keys a pod or template with ``labels`` and fingerprint ``spec_hash`` uses under
    the ``policies`` that select it (callers pass ``PolicyIndex.select``'s answer)."""
    return [(namespace, p.name, group_of(p, labels), spec_hash) for p in policies]


def pod_uses(state: ClusterState) -> frozenset[UseKey]:
    """Use keys of the live stamped pods (not ``Succeeded``/``Failed``), each under the live
    policies that select it by its labels (never the pod's own ``<prefix>policy``): one walk
    of ``state.pods`` (``snapready status``; the leader keeps ``PodUses`` instead)."""
    keys: set[UseKey] = set()
    for record in tuple(state.pods.values()):  # the live dict: a copy (ClusterState.pods)
        keys.update(_record_uses(record, state.policies))
    return frozenset(keys)


ReadyPods = Mapping[str, Mapping[str | None, Mapping[str, PodRecord]]]
"""The pods a refresh may checkpoint (``checkpointable``), by namespace, then fingerprint (None:
not stamped with one), then ``namespace/name``."""


def checkpointable(record: PodRecord) -> bool:
    """Whether a stamped pod could be checkpointed for a refresh: ``Running`` and Ready, not a
    restored copy (``PodRestored`` or a restored outcome: GKE checkpoints the pod's own run,
    and a restored copy holds the old snapshot's memory)."""
    return (
        record.ready_at is not None
        and record.phase == "Running"
        and not record.restored
        and record.outcome not in RESTORED_OUTCOMES
    )


def ready_pods(state: ClusterState) -> dict[str, dict[str | None, dict[str, PodRecord]]]:
    """``ReadyPods`` from one walk of ``state.pods`` (``snapready status``; the leader keeps
    ``PodUses.ready`` instead)."""
    out: dict[str, dict[str | None, dict[str, PodRecord]]] = {}
    for key, record in tuple(state.pods.items()):  # the live dict: a copy (ClusterState.pods)
        if checkpointable(record):
            _file(out, key, record)
    return out


def _file(
    ready: dict[str, dict[str | None, dict[str, PodRecord]]], key: str, record: PodRecord
) -> None:
    """Put ``record`` into ``ready`` under its namespace and fingerprint."""
    ready.setdefault(record.namespace, {}).setdefault(record.spec_hash, {})[key] = record


def _record_uses(record: PodRecord | None, policies: PolicyIndex) -> tuple[UseKey, ...]:
    if record is None or record.spec_hash is None or record.phase in ENDED_PHASES:
        return ()
    selecting = policies.select(record.namespace, record.labels)
    return tuple(use_keys(record.namespace, record.labels, record.spec_hash, selecting))


class PodUses:
    """``pod_uses`` kept up to date from the pod cache's events, for the leader's lifecycle
    pass: a pass over 20,000 unchanged pods reads only the pods that changed since the last.

    ``changed(record)`` (the caches' ``pods`` and ``pods_gone`` hooks, any thread, O(1)) marks
    the pod's key; ``uses(state)`` (one caller at a time) reads each marked pod again from
    ``state.pods`` and counts every use key by pod. Every pod is read again when ``state.pods``
    is another object than last time (a relist swaps in a new pod dict and calls no hook for
    pods gone meanwhile), and every pod's use keys when ``state.policies`` is (a policy change
    replaces the index; ``ready`` does not depend on it and stays). A mark
    made while a pass reads is kept for the next one, so no change is lost; a pod read twice
    costs one ``select``.

    An unchanged pod costs a pass nothing: walking 20,000 of them was ~12 ms of each pass
    (``make bench-scale``'s busy rounds, where the pass shares the interpreter with admission;
    docs/performance.md). ``ready`` keeps the pods a refresh may checkpoint the same way (the
    walk it replaces was most of a pass while groups are stale, ``make bench-lifecycle``'s
    upgrade)."""

    def __init__(self) -> None:
        self._marked: set[str] = set()
        self._by_pod: dict[str, tuple[UseKey, ...]] = {}
        self._counts: dict[UseKey, int] = {}
        self._pods: Mapping[str, PodRecord] | None = None
        self._policies: object = None
        self._frozen: frozenset[UseKey] = frozenset()
        self._ready: dict[str, dict[str | None, dict[str, PodRecord]]] = {}
        self._filed: dict[str, tuple[str, str | None]] = {}
        """Each pod in ``_ready`` by key: the namespace and fingerprint it is filed under."""
        self._by_labels: dict[tuple[str, tuple[tuple[str, str], ...], str], tuple[UseKey, ...]]
        self._by_labels = {}
        self._label_chars = 0
        self.full_reads = 0
        """How many calls read every pod (tests; the first call is one)."""

    @property
    def ready(self) -> ReadyPods:
        """``ready_pods(state)`` as of the last ``uses`` (one caller at a time, as ``uses``:
        the next call changes it)."""
        return self._ready

    @property
    def last(self) -> frozenset[UseKey]:
        """What the last ``uses`` returned (empty before it or after ``forget``); any thread."""
        return self._frozen

    def changed(self, record: PodRecord) -> None:
        """A stamped pod's record changed or left the cache (any thread; never blocks). Not
        kept before the first ``uses`` or after ``forget``: the next ``uses`` reads every pod
        (so the marks stay bounded where no pass asks)."""
        if self._pods is not None:
            self._marked.add(f"{record.namespace}/{record.name}")

    def forget(self) -> None:
        """Drop everything (a pass that does not ask for a while); the next ``uses`` reads
        every pod again."""
        self._pods = None
        self._marked.clear()
        self._by_pod, self._counts, self._frozen = {}, {}, frozenset()
        self._by_labels, self._label_chars, self._ready, self._filed = {}, 0, {}, {}

    def uses(self, state: ClusterState) -> frozenset[UseKey]:
        """``pod_uses(state)``, from the marks since the last call (or a full read). Should a
        read raise, everything is read again next time."""
        marked = self._marked
        pods, policies = state.pods, state.policies
        try:
            if pods is not self._pods:
                return self._read_all(pods, policies)
            if policies is not self._policies:
                self._read_uses(pods, policies)  # the marks are read below, for ``ready``
            before = len(self._counts)
            added = False
            while marked:
                key = marked.pop()  # one at a time: the watch thread may add meanwhile
                record = pods.get(key)
                added |= self._set(key, self._record_uses(record, policies))
                self._set_ready(key, record)
        except BaseException:
            self.forget()
            raise
        if added or len(self._counts) != before:
            self._frozen = frozenset(self._counts)
        return self._frozen

    def _read_all(self, pods: Mapping[str, PodRecord], policies: PolicyIndex) -> frozenset[UseKey]:
        """Read every pod of a new pod dict (the first call, a relist): its uses and ``ready``."""
        # Marks from here on are kept (``_pods`` is set first) and read again next time; the
        # hook runs after the cache holds a change, so the copy below has every earlier one.
        self._marked.clear()
        self._ready, self._filed, self._pods = {}, {}, pods
        for key, record in self._read_uses(pods, policies):
            self._set_ready(key, record)
        return self._frozen

    def _read_uses(
        self, pods: Mapping[str, PodRecord], policies: PolicyIndex
    ) -> tuple[tuple[str, PodRecord], ...]:
        """Every pod's uses read again under ``policies`` (a new policy index selects anew;
        ``ready`` does not depend on it); the pods read."""
        self._by_pod, self._counts = {}, {}
        self._policies, self._by_labels, self._label_chars = policies, {}, 0
        self.full_reads += 1
        items = tuple(pods.items())  # the live dict: a copy
        for key, record in items:
            self._set(key, self._record_uses(record, policies))
        self._frozen = frozenset(self._counts)
        return items

    def _record_uses(self, record: PodRecord | None, policies: PolicyIndex) -> tuple[UseKey, ...]:
        """``_record_uses``, remembered by namespace, labels and fingerprint for this policy
        index (``_read_uses`` starts afresh with each index): the replicas of one template share
        them, so a full read selects once per template instead of once per pod (20,000 pods:
        ~60% of the first pass, ``make bench-lifecycle``). At most ``LABEL_SETS`` label sets and
        ``LABEL_CHARS`` characters of them are kept."""
        if record is None or record.spec_hash is None or record.phase in ENDED_PHASES:
            return ()
        key = (record.namespace, tuple(record.labels.items()), record.spec_hash)
        found = self._by_labels.get(key)
        if found is None:
            found = _record_uses(record, policies)
            size = sum(len(k) + len(v) for k, v in key[1])
            if size > LABEL_CHARS // 64:
                return found  # a tenant's megabyte labels: answered, never kept
            if len(self._by_labels) >= LABEL_SETS or self._label_chars + size > LABEL_CHARS:
                self._by_labels.clear()  # pods with labels of their own: bounded, not kept
                self._label_chars = 0
            self._by_labels[key] = found
            self._label_chars += size
        return found

    def _set_ready(self, key: str, record: PodRecord | None) -> None:
        """File the pod under ``ready`` if it is ``checkpointable`` now, and only there (its
        earlier place, under another fingerprint or none, is emptied)."""
        if key in self._filed:
            namespace, filed = self._filed.pop(key)
            by_hash = self._ready[namespace]
            pods = by_hash[filed]
            del pods[key]
            if not pods:
                del by_hash[filed]
                if not by_hash:
                    del self._ready[namespace]
        if record is not None and checkpointable(record):
            _file(self._ready, key, record)
            self._filed[key] = (record.namespace, record.spec_hash)

    def _set(self, key: str, found: tuple[UseKey, ...]) -> bool:
        """The pod's keys are now ``found``; whether a key nobody had before appeared."""
        old = self._by_pod.pop(key, ())
        if old == found:  # relabelled or re-read without a change of its keys
            if found:
                self._by_pod[key] = found
            return False
        counts, added = self._counts, False
        for use in old:
            left = counts[use] - 1
            if left:
                counts[use] = left
            else:
                del counts[use]
        for use in found:
            had = counts.get(use, 0)
            added |= not had
            counts[use] = had + 1
        if found:
            self._by_pod[key] = found
        return added


def snapshot_use(view: SnapshotView) -> UseKey | None:
    """The use key of a snapshot from its origin record; None when its fingerprint is unknown
    (``SnapshotView.use_key``, computed once per view)."""
    return view.use_key
