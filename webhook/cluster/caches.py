"""The cluster policy source: caches of every watched resource, folded into one ``ClusterState``.

``ClusterSource`` owns one ``Reflector`` per resource (policies, storage configs, namespaces,
nodes, ComputeClasses) and a ``/version`` ``Poller``. Whenever one of them changes it rebuilds an
immutable ``ClusterState`` under a lock and swaps it in with a single assignment; ``state()`` only
reads that attribute (no lock, no I/O), so admission answers from memory even while the API
server is slow or down. Transport-agnostic: ``kube.py`` supplies the ``kubernetes``-backed one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from webhook.base.config import SourceSettings
from webhook.base.keys import ORIGIN
from webhook.base.types import RawObject
from webhook.cluster import watched
from webhook.cluster.records import pod_record
from webhook.cluster.reflector import Reflector
from webhook.cluster.syncing import Poller, Resource, Timing, Transport, Worker
from webhook.kube.matching import PolicyIndex
from webhook.snapshots.evidence import gke_event, index_events, updated_events
from webhook.snapshots.facts import (
    compute_class_facts,
    gke_version,
    namespace_labels,
    node_pools,
    node_view,
)
from webhook.snapshots.index import SnapshotIndex
from webhook.snapshots.pods import PodRecord
from webhook.snapshots.records import RecordJoin, record_view
from webhook.snapshots.state import (
    ClusterState,
    DisruptionBudget,
    NodeView,
    disruption_budget,
    parse_policy,
    parse_storage_config,
)
from webhook.snapshots.views import snapshot_view

log = logging.getLogger("snapready.kube")


def _where(obj: RawObject) -> str:
    metadata = obj.get("metadata")
    meta = metadata if isinstance(metadata, dict) else {}
    return f"{obj.get('kind', 'object')} {meta.get('namespace') or ''}/{meta.get('name')}"


def resources(
    prefix: str,
    on_pod: Callable[[PodRecord | None], PodRecord | None] | None = None,
    on_pod_changed: Callable[[PodRecord | None], None] | None = None,
    join: RecordJoin | None = None,
) -> tuple[Resource, ...]:
    """The watched collections (``cluster.watched``, shared with the one-shot reader), in
    ``/readyz`` order; ``manifests/rbac.yaml`` grants exactly these.

    PodSnapshot CRDs are tried as ``v1`` first, then ``v1alpha1`` (older GKE clusters served only
    that). Namespaces keep only ``prefix`` labels; nodes only the GKE labels in ``facts``.
    PodSnapshots and snapready's SnapshotRecords tell ``join`` which ``namespace/name``
    changed, so the state's snapshot index carries each record (``snapshots.records``).
    """
    touched, pods = join or RecordJoin(), watched.stamped_pods(prefix)
    return (
        Resource(
            watched.POLICIES.name,
            watched.POLICIES.paths(),
            convert=lambda obj: parse_policy(obj, prefix=prefix, where=_where(obj)),
            build=lambda items: PolicyIndex.build(items.values()),
        ),
        Resource(
            watched.STORAGE_CONFIGS.name,
            watched.STORAGE_CONFIGS.paths(),
            convert=lambda obj: parse_storage_config(obj, where=_where(obj)),
            build=lambda items: {config.name: config for config in items.values()},
        ),
        Resource(
            watched.NAMESPACES.name,
            watched.NAMESPACES.paths(),
            convert=lambda obj: namespace_labels(obj, prefix) or None,
            build=lambda items: {name: dict(labels) for name, labels in items.items()},
        ),
        Resource(
            watched.NODES.name,
            watched.NODES.paths(),
            convert=node_view,
            build=lambda items: node_pools(items.values()),
        ),
        Resource(
            watched.SNAPSHOTS.name,
            watched.SNAPSHOTS.paths(),
            convert=lambda obj: snapshot_view(obj, origin_annotation=prefix + ORIGIN),
            build=lambda items: _all(touched, SnapshotIndex.build(items.values())),
            # One event re-sorts one policy's snapshots, not all of them (a leader catching up
            # on 5,000 origin records rebuilt the whole index per event: ~17 ms each).
            update=lambda index, old, new: _one(touched, old, new, index.updated(old, new)),
        ),
        Resource(
            # snapready's own records, one per PodSnapshot (GKE refuses writes to PodSnapshots).
            watched.RECORDS.name,
            watched.RECORDS.paths(),
            convert=record_view,
            build=lambda items: _all(touched, items),
            update=lambda view, old, new: _one(touched, old, new, view),
        ),
        Resource(
            pods.name,
            pods.paths(),
            convert=lambda obj: (on_pod or _same)(pod_record(obj, prefix)),
            # The cache's own dict, keyed ``namespace/name``: O(1) per event at 20,000 pods
            # (readers only look up; the reflector swaps in a new dict on a relist).
            build=lambda items: items,
            # Called once the changed record is in that dict (``convert`` runs before).
            update=lambda view, old, new: _after(view, on_pod_changed, None if new else old),
        ),
        Resource(
            # GKE's own restore evidence: only Events of reason GKEPodSnapshotting (a field
            # selector, never all Events of the cluster), kept as a few strings each.
            watched.GKE_EVENTS.name,
            watched.GKE_EVENTS.paths(),
            convert=gke_event,
            build=lambda items: index_events(items.values()),
            update=updated_events,
        ),
        Resource(
            watched.COMPUTE_CLASSES.name,
            watched.COMPUTE_CLASSES.paths(),
            convert=compute_class_facts,
            build=lambda items: {facts.name: facts for facts in items.values()},
        ),
        Resource(
            watched.DISRUPTION_BUDGETS.name,
            watched.DISRUPTION_BUDGETS.paths(),
            convert=disruption_budget,
            build=budgets_by_namespace,
        ),
    )


def budgets_by_namespace(items: Mapping[str, DisruptionBudget]) -> dict[str, tuple[Any, ...]]:
    """PodDisruptionBudgets by namespace (``checkpoint-window`` looks up one namespace)."""
    out: dict[str, list[DisruptionBudget]] = {}
    for budget in items.values():
        out.setdefault(budget.namespace, []).append(budget)
    return {namespace: tuple(found) for namespace, found in out.items()}


def _all(join: RecordJoin, view: Any) -> Any:
    """A relisted collection: every snapshot is joined again."""
    join.touch_all()
    return view


def _one(join: RecordJoin, old: Any, new: Any, view: Any) -> Any:
    """One changed PodSnapshot or record: only its ``namespace/name`` is joined again."""
    changed = new if new is not None else old
    if changed is not None:
        join.touch(f"{changed.namespace}/{changed.name}")
    return view


def _same(record: PodRecord | None) -> PodRecord | None:
    return record


def _after(
    view: Any,
    notify: Callable[[PodRecord | None], None] | None,
    gone: PodRecord | None,
) -> Any:
    """The pods view unchanged (the reflector edited it in place), after telling ``notify``
    (with the record that left the cache, on a deletion or a lost label; else None)."""
    if notify is not None:
        notify(gone)
    return view


def timing_from(source: SourceSettings) -> Timing:
    """Cache timing from ``settings.source`` (all in seconds)."""
    return Timing(
        backoff_initial=source.backoff_initial_seconds,
        backoff_max=source.backoff_max_seconds,
        watch_timeout=source.resync_seconds,
        recheck=source.resync_seconds,
        page_size=source.list_page_size,
    )


class ClusterSource:
    """Background caches of the cluster and the ``ClusterState`` they add up to.

    Lifecycle: ``start()`` once, ``state()`` any time from any thread, ``stop()`` at shutdown.
    ``state().synced`` turns True once every cache has listed once (a not-served API counts as
    listed); it is what ``/readyz`` and the ``snapready_policy_source_synced`` gauge report.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        prefix: str,
        timing: Timing,
        on_stop: Callable[[], None] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._join = RecordJoin()
        self._on_stop = on_stop
        self.pod_listeners: list[Callable[[PodRecord | None], PodRecord | None]] = []
        self.reflectors = {
            r.name: Reflector(r, transport, timing, self._lock, self._rebuild)
            for r in resources(prefix, self._observe_pod, self._pod_changed, self._join)
        }
        self.version = Poller(
            "version",
            watched.VERSION_PATH,
            gke_version,
            transport=transport,
            timing=timing,
            lock=self._lock,
            on_change=self._rebuild,
        )
        self.extra: list[Worker] = []
        self.scope: Any = None
        """The webhook-scope controller, when attached (its ``in_sync`` feeds the state)."""
        self.restores: Any = None
        """The restore tracker, when attached (its ``listeners`` take outcome callbacks)."""
        self.origins: Any = None
        """The origin recorder, when attached (its ``rejected`` counts feed a metric)."""
        self.configs: Any = None
        """The metadata-only Secret/ConfigMap watch (``cluster.config_watch``), when attached."""
        self.lifecycle: Any = None
        """The snapshot lifecycle worker, when attached (its ``prunable`` feeds the gauge)."""
        self.fence: Any = None
        """The lease-fenced transport every writer uses (``cluster.fence``), when attached."""
        self.audit: Any = None
        """The audit and its policy reports (``cluster.audit``), when attached."""
        self.on_policies: list[Callable[[], None]] = []
        self.on_synced: list[Callable[[], None]] = []
        """Called (lock held) each time every cache has listed after not having (the first
        sync, or after one was lost); ``heap.end_sync`` runs once."""
        self.on_snapshots: list[Callable[[], None]] = []
        """Woken when PodSnapshots or node pools change (origin records, stale snapshots)."""
        self.pods_gone: list[Callable[[PodRecord], None]] = []
        """Told about a stamped pod that left the pod cache (deleted, or its label removed)."""
        self.on_evidence: list[Callable[[], None]] = []
        """Woken when GKE's snapshot Events or a stamped pod changed (restore outcomes)."""
        self._events_seen: object = None
        self._nodes_seen: object = None
        self._nodes: Mapping[str, NodeView] = {}
        self._snapshots_seen: object = None
        self._policies_seen: object = None
        self._state = ClusterState()
        with self._lock:
            self._rebuild()

    def _pod_changed(self, gone: PodRecord | None) -> None:
        """A pod watch event is in the cache: tell the pod-gone listeners about a record that
        left it, then wake the evidence listeners (O(1) each)."""
        if gone is not None:
            for listener in self.pods_gone:
                listener(gone)
        for notify in self.on_evidence:
            notify()

    def _observe_pod(self, record: PodRecord | None) -> PodRecord | None:
        """Every pod record the pod cache converts, to the attached listeners (O(1) each)."""
        for listener in self.pod_listeners:
            listener(record)
        return record

    @property
    def lock(self) -> threading.Lock:
        """The lock every worker holds while it changes its part and the state is rebuilt."""
        return self._lock

    def attach(self, worker: Worker) -> None:
        """Add a worker (leader election, webhook scope) before ``start``; its ``synced`` gates
        readiness and its status shows in ``/readyz`` like a cache's."""
        self.extra.append(worker)

    def served_api(self, name: str) -> str | None:
        """The served API path of a watched resource (``/apis/podsnapshot.gke.io/v1``), or None
        while it is not served or not listed yet."""
        reflector = self.reflectors[name]
        if not (reflector.synced and reflector.served and reflector.path):
            return None
        return str(reflector.path).split("?", 1)[0].rsplit("/", 1)[0]

    def synced_policies(self) -> PolicyIndex | None:
        """The policy index once the policy cache has listed, else None (not yet known)."""
        policies = self.reflectors["podsnapshotpolicies"]
        return policies.view if policies.synced else None

    @property
    def workers(self) -> tuple[Worker, ...]:
        """Every cache thread: the reflectors, then the version poller."""
        return (*self.reflectors.values(), self.version, *self.extra)

    def state(self) -> ClusterState:
        """The current snapshot: one attribute read, safe from any thread, never blocks."""
        return self._state

    def synced(self) -> bool:
        """Whether every cache has synced once (for readiness and metrics)."""
        return self._state.synced

    def start(self) -> None:
        """Start every cache thread (returns at once; readiness follows ``synced``)."""
        for worker in self.workers:
            worker.start()

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop every cache, abort open watches, wait up to ``timeout`` s; True if all ended."""
        for worker in self.workers:
            worker.stop()
        ended = all([worker.join(timeout) for worker in self.workers])
        if self._on_stop is not None:
            self._on_stop()
        return ended

    def _nodes_copy(self) -> Mapping[str, NodeView]:
        """A copy of the node cache (watch events edit it), made only when nodes changed."""
        nodes = self.reflectors["nodes"]
        if nodes.view is not self._nodes_seen:
            self._nodes_seen, self._nodes = nodes.view, dict(nodes.items)
        return self._nodes

    def rebuild(self) -> None:
        """Publish a new state (caller holds ``lock``): the ``on_change`` of attached workers."""
        self._rebuild()

    def _rebuild(self) -> None:
        # Called with self._lock held by the worker that changed; builds, then swaps atomically.
        policies = self.reflectors["podsnapshotpolicies"]
        if policies.synced and policies.view is not self._policies_seen:
            self._policies_seen = policies.view
            for notify in self.on_policies:  # never blocks: listeners only set an event
                notify()
        classes = self.reflectors["computeclasses"]
        budgets = self.reflectors["poddisruptionbudgets"]
        snapshots, records = self.reflectors["podsnapshots"], self.reflectors["snapshotrecords"]
        joined = self._join.refresh(snapshots.view, records.view)
        details = {"source": "kube", **{w.name: w.status for w in self.workers}}
        details["policies"] = str(len(policies.view))
        details["gkeVersion"] = self.version.value or "unknown"
        synced = all(worker.synced for worker in self.workers)
        first = synced and not self._state.synced
        if first:
            log.info("cluster caches synced: %s", details)
        self._state = ClusterState(
            policies=policies.view,
            storage_configs=self.reflectors["podsnapshotstorageconfigs"].view,
            namespace_labels=self.reflectors["namespaces"].view,
            node_pools=self.reflectors["nodes"].view,
            nodes=self._nodes_copy(),
            compute_classes=classes.view if classes.served and classes.synced else None,
            gke_version=self.version.value,
            synced=synced,
            details=details,
            snapshots=joined,
            snapshots_known=snapshots.synced and snapshots.served and records.synced,
            pods=self.reflectors["pods"].view,
            gke_events=self.reflectors["gkeevents"].view,
            pods_known=self.reflectors["pods"].synced,
            disruption_budgets=budgets.view if budgets.served and budgets.synced else None,
            configs=self.configs.view() if self.configs is not None else {},
            scope_synced=None if self.scope is None else bool(self.scope.in_sync),
        )
        if first:
            for call in self.on_synced:
                call()
        # Snapshots or node pools changed (a node-pool upgrade makes snapshots stale).
        facts = (joined, self.reflectors["nodes"].view)
        if facts != self._snapshots_seen:
            self._snapshots_seen = facts
            for notify in self.on_snapshots:  # after the swap; listeners only set an event
                notify()
        events = self.reflectors["gkeevents"].view
        if events is not self._events_seen:
            self._events_seen = events
            for notify in self.on_evidence:
                notify()
