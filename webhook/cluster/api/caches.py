"""The cluster policy source: caches of every watched resource, folded into one ``ClusterState``.

``ClusterSource`` owns one ``Reflector`` per resource (policies, storage configs, namespaces,
nodes, ComputeClasses) and a ``/version`` ``Poller``. Whenever one of them changes it rebuilds an
immutable ``ClusterState`` under a lock and swaps it in with a single assignment; ``state()`` only
reads that attribute (no lock, no I/O), so admission answers from memory even while the API
server is slow or down. Transport-agnostic (``transport.KubeTransport`` is the real one). Who
hears about changes (the controllers) is the manager's ``hooks.CacheHooks``, set at ``start``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from webhook.base.config import SourceSettings
from webhook.base.keys import ORIGIN
from webhook.cluster.api import watched
from webhook.cluster.api.enforcement_values import EnforcementValues, where
from webhook.cluster.api.gke_events import gke_events_resource
from webhook.cluster.api.hooks import CacheHooks
from webhook.cluster.api.reflector import Reflector
from webhook.cluster.api.stamped_pods import pod_record
from webhook.cluster.api.syncing import Poller, Resource, Timing, Transport, Worker
from webhook.kube.matching import PolicyIndex
from webhook.snapshots.facts import (
    compute_class_facts,
    gke_version,
    node_pools,
    node_view,
)
from webhook.snapshots.index import SnapshotIndex
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.records import RecordJoin, record_view
from webhook.snapshots.state import (
    ClusterState,
    DisruptionBudget,
    NodeView,
    disruption_budget,
    parse_storage_config,
)
from webhook.snapshots.views import snapshot_view

log = logging.getLogger("snapready.kube")


def resources(
    prefix: str,
    join: RecordJoin | None = None,
    on_pod: Callable[[PodRecord | None, PodRecord | None], None] | None = None,
    stamped: Callable[[str], str | None] | None = None,
    pods_listed: Callable[[], bool] | None = None,
) -> tuple[Resource, ...]:
    """The watched collections (``cluster.api.watched``, shared with the one-shot reader), in
    ``/readyz`` order; ``manifests/rbac.yaml`` grants exactly these.

    PodSnapshot CRDs are tried as ``v1`` first, then ``v1alpha1`` (older GKE clusters served only
    that). Namespaces keep only ``prefix`` labels; nodes only the GKE labels in ``facts``.
    PodSnapshots and snapready's SnapshotRecords tell ``join`` which ``namespace/name``
    changed, so the state's snapshot index carries each record (``snapshots.records``).
    ``on_pod(old, new)`` hears every pod event once the pod cache holds it (``Resource.after``;
    never from ``convert``). ``stamped(namespace/name)``: the uid of that pod in the pod cache,
    else None (its GKE Events are kept first: ``MAX_EVENTS_PER_STAMPED_POD``);
    ``pods_listed()``: whether the pod cache has listed (the Events list waits for it).
    """
    touched, pods = join or RecordJoin(), watched.stamped_pods(prefix)
    enforcement = EnforcementValues(prefix)
    return (
        Resource(
            watched.POLICIES.name,
            watched.POLICIES.paths(),
            convert=enforcement.policy,
            build=lambda items: PolicyIndex.build(items.values()),
        ),
        Resource(
            watched.STORAGE_CONFIGS.name,
            watched.STORAGE_CONFIGS.paths(),
            convert=lambda obj: parse_storage_config(obj, where=where(obj)),
            build=lambda items: {config.name: config for config in items.values()},
        ),
        Resource(
            watched.NAMESPACES.name,
            watched.NAMESPACES.paths(),
            convert=enforcement.namespace_labels,
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
            convert=lambda obj: pod_record(obj, prefix),
            # The cache's own dict, keyed ``namespace/name``: O(1) per event at 20,000 pods
            # (readers only look up; the reflector swaps in a new dict on a relist).
            build=lambda items: items,
            update=_same_view,  # the reflector edited that dict in place
            after=on_pod,
            in_place=True,  # so a pod event publishes no new state
        ),
        gke_events_resource(stamped, pods_listed),
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


def _same_view(view: Any, old: Any, new: Any) -> Any:
    """The pods view unchanged: the reflector edits the cache's dict in place."""
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

    Lifecycle: ``attach`` the controllers, ``start(hooks)`` once, ``state()`` any time from any
    thread, ``stop()`` at shutdown. ``state().synced`` turns True once every cache (and every
    attached worker) has synced once (a not-served API counts as listed); it is what
    ``/readyz`` and the ``snapready_policy_source_synced`` gauge report.
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
        self._hooks = CacheHooks()
        self.reflectors = {
            r.name: Reflector(r, transport, timing, self._lock, self._rebuild)
            for r in resources(
                prefix, self._join, self._pod_event, self._stamped, self._pods_listed
            )
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
        self.attached: list[Worker] = []  # leader election, controllers (``attach``)
        self._events_seen: object = None
        self._nodes_seen: object = None
        self._nodes: Mapping[str, NodeView] = {}
        self._snapshots_seen: object = None
        self._policies_seen: object = None
        self._state = ClusterState()
        with self._lock:
            self._rebuild()

    def _stamped(self, key: str) -> str | None:
        """The uid of pod ``namespace/name`` in the pod cache, else None (one lookup)."""
        record = self.reflectors["pods"].items.get(key)
        return record.uid if record is not None else None

    def _pods_listed(self) -> bool:
        return self.reflectors["pods"].synced

    def _pod_event(self, old: PodRecord | None, new: PodRecord | None) -> None:
        """A pod event is in the cache (no lock held): to the pod (or pod-gone) listeners, then
        the evidence ones when it changed."""
        hooks = self._hooks
        if new is not None:
            for listener in hooks.pods:
                listener(new)
        elif old is not None:
            self.reflectors["gkeevents"].forget_owner(f"{old.namespace}/{old.name}/{old.uid}")
            for gone in hooks.pods_gone:
                gone(old)
        if old != new:
            for notify in hooks.evidence:
                notify()

    @property
    def lock(self) -> threading.Lock:
        """The lock every worker holds while it changes its part and the state is rebuilt."""
        return self._lock

    def attach(self, worker: Worker) -> None:
        """Add a worker (leader election, a controller) before ``start``; its ``synced`` gates
        readiness and its status shows in ``/readyz`` like a cache's."""
        self.attached.append(worker)

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
        """Every thread: the reflectors, the version poller, then the attached workers."""
        return (*self.reflectors.values(), self.version, *self.attached)

    def state(self) -> ClusterState:
        """The current snapshot: one attribute read, safe from any thread, never blocks."""
        return self._state

    def synced(self) -> bool:
        """Whether every cache has synced once (for readiness and metrics)."""
        return self._state.synced

    def start(self, hooks: CacheHooks | None = None) -> None:
        """Start every thread, ``hooks`` told about changes; returns at once."""
        if hooks is not None:
            with self._lock:
                self._hooks = hooks
                self._rebuild()  # the state inputs of ``hooks`` (configs, scope)
        for worker in self.workers:
            worker.start()

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop every thread, abort open watches, wait up to ``timeout`` s; True if all ended."""
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
        # Called with self._lock held by the worker that changed; builds, swaps atomically,
        # then wakes the listeners of what changed.
        hooks = self._hooks
        policies = self.reflectors["podsnapshotpolicies"]
        classes = self.reflectors["computeclasses"]
        budgets = self.reflectors["poddisruptionbudgets"]
        snapshots, records = self.reflectors["podsnapshots"], self.reflectors["snapshotrecords"]
        joined = self._join.refresh(snapshots.view, records.view)
        details: dict[str, str | int] = {"source": "kube"}
        details.update((w.name, w.status) for w in self.workers)
        details["policies"] = len(policies.view)
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
            configs=hooks.configs() if hooks.configs is not None else {},
            scope_synced=None if hooks.scope_in_sync is None else bool(hooks.scope_in_sync()),
        )
        self._wake(hooks, first)

    def _wake(self, hooks: CacheHooks, first: bool) -> None:
        """After the swap (lock held): the listeners of what changed since the last rebuild."""
        policies = self.reflectors["podsnapshotpolicies"]
        if policies.synced and policies.view is not self._policies_seen:
            self._policies_seen = policies.view
            for notify in hooks.policies:
                notify()
        if first:
            for call in hooks.synced:
                call()
        facts = (self._state.snapshots, self.reflectors["nodes"].view)
        if facts != self._snapshots_seen:
            self._snapshots_seen = facts
            for notify in hooks.snapshots:
                notify()
        events = self.reflectors["gkeevents"].view
        if events is not self._events_seen:
            self._events_seen = events
            for notify in hooks.evidence:
                notify()
