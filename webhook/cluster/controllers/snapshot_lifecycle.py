"""Snapshot lifecycle (docs/concepts/lifecycle.md): refresh triggers after an upgrade, prunable
snapshots, prunes.

Every replica runs the pass read-only, so each one's ``snapready_snapshots{state="prunable"}``
agrees (``prunable``, read at scrape time); only the leader writes, every write through the
lease-fenced transport (``cluster.api.fence``), each with an Event, none on an admission request:

- ``lifecycle.refresh: on``: one PodSnapshotManualTrigger per stale group of a manual policy
  (``snapshots.refresh.refresh_plan``), named ``trigger_name`` (policy, group, upgrade): a GET
  first (compare before write), a 409 on the POST is the other leader's trigger and counts as
  done, so a restart or a second replica never makes two. Normal Event
  ``SnapshotRefreshTriggered`` on the policy, its note built from the live trigger's target, so
  the Event's deterministic name (``EventRecorder``) makes a repeat after a restart a no-op.
- ``lifecycle.prune: dry-run``: one Normal Event ``SnapshotsPrunable`` per policy and set of
  prunable snapshots (a new set, a new Event). ``on``: DELETE each, token bucket
  (``prune_per_minute``, ``prune_burst``), ``preconditions.uid`` from the cache and a GET first
  (gone, another uid or already deleting: skipped); Normal Event ``SnapshotPruned`` on the
  policy (the snapshot itself is gone a moment later, its Events with it from ``kubectl
  describe``; the policy's stay where an admin looks).

Templates (the ``unused`` rule): no watch of workloads (webhook CPU and memory at bench scale
must not grow). Only namespaces with a snapshot that no live pod uses and whose unused clock ran
out (``unused_candidates``) are listed, one paginated list per kind of ``LISTED_KINDS``, reused
for ``lifecycle.template_recheck_seconds``; each template is fingerprinted as ``snapready
hash`` does (``as_admitted`` then ``fingerprint``: injection as configured). A list that fails
(403, 5xx) leaves the namespace unlisted: nothing in it is ``unused``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from operator import attrgetter
from typing import Any, Protocol

from webhook.base.bucket import Bucket
from webhook.base.config import Settings
from webhook.base.keys import REFRESH, REFRESH_OF, SNAPSHOT_SOURCE
from webhook.base.types import RawObject, mapping
from webhook.cluster.api.events import Event, EventRecorder, Regarding
from webhook.cluster.api.syncing import Conflict, NotServed, TransportError, describe
from webhook.cluster.api.template_lists import TEMPLATE_LISTS
from webhook.cluster.controllers.base import Reconciler
from webhook.kube.custom_views import matching_labels, workload_views
from webhook.mutation import as_admitted
from webhook.pod.distill import fingerprint
from webhook.snapshots.prune import Prunable, Usage, prune_memo, prune_plan, unused_candidates
from webhook.snapshots.refresh import Refresh, refresh_memo, refresh_plan
from webhook.snapshots.selection import bounded_labels
from webhook.snapshots.state import ClusterState
from webhook.snapshots.usage import PodUses, ReadyPods, use_keys
from webhook.snapshots.views import UseKey

log = logging.getLogger("snapready.lifecycle")
POLICY_API = "podsnapshot.gke.io/v1"
MIN_INTERVAL = 5.0
"""Seconds between two passes at least, however often the caches change: the first pass over
20,000 pods and 5,000 snapshots holds the interpreter for ~200 ms and a pass after an upgrade
for ~50 ms (later ones read only the policies and pods that changed: ``make bench-lifecycle``),
and nothing here needs to be sooner (prune waits an hour, a refresh trigger a few seconds
more); at 1 s it raised the admission p99 at bench-scale."""
Listener = Callable[[str, str, str], None]


class LifecycleTransport(Protocol):
    """Reads (GET, list) and the leader's writes (POST, DELETE with a uid precondition)."""

    def get(self, path: str) -> RawObject: ...

    def list(self, path: str, **options: Any) -> Any: ...

    def create(self, path: str, body: RawObject) -> RawObject: ...

    def delete(self, path: str, *, uid: str = "") -> RawObject: ...


class LifecycleWorker(Reconciler):
    """Refresh triggers and prunes (module docstring); ``prunable`` for the gauge.

    Args:
        transport: the lease-fenced transport; ``events``: the leader's recorder.
        state, snapshot_api, is_leader: the caches, the served PodSnapshot API path prefix
            (None: not served), whether this replica leads now.
        settings: all settings (``lifecycle``, ``outcomes.namespaces``, injection for
            template fingerprints, ``rules.manual_trigger``).
        clock: seconds since the epoch (tests pass their own).
    """

    min_interval = MIN_INTERVAL  # a pass on every wake-up, at most one per ``MIN_INTERVAL``

    def __init__(
        self,
        transport: LifecycleTransport,
        events: EventRecorder,
        *,
        state: Callable[[], ClusterState],
        snapshot_api: Callable[[], str | None],
        is_leader: Callable[[], bool],
        lock: threading.Lock,
        on_change: Callable[[], None],
        settings: Settings,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__("lifecycle", lock, on_change, period=settings.lifecycle.recheck_seconds)
        self.transport, self.events, self.state = transport, events, state
        self.snapshot_api, self.is_leader, self.clock = snapshot_api, is_leader, clock
        self.settings, self.config = settings, settings.lifecycle
        per_second = self.config.prune_per_minute / 60.0
        self.bucket = Bucket(self.config.prune_burst, per_second, clock)
        self.prunable: dict[tuple[str, str], Prunable] = {}
        """Snapshots prunable now, by ``(namespace, name)`` (read by the gauge's collector)."""
        self.refreshes: list[Refresh] = []
        self.on_refresh: list[Listener] = []
        """Called ``(namespace, policy, trigger)`` for each trigger this leader created."""
        self.on_prune: list[Listener] = []
        """Called ``(namespace, policy, reason)`` for each snapshot this leader deleted."""
        self.created = self.pruned = 0
        self._since: dict[tuple[str, str], datetime] = {}
        self._templates: dict[str, tuple[float, frozenset[UseKey] | None]] = {}
        self._announced: set[tuple[str, str, str]] = set()
        self._triggered: set[str] = set()
        self.pod_uses = PodUses()
        """The live pods' use keys; the caches' pod hooks call its ``changed``."""
        self.prune_digests = prune_memo()
        self.refresh_digests = refresh_memo()
        """Each policy's snapshots digested for prunes and refreshes, kept between passes
        (``snapshots.per_policy``): a pass reads the policies whose snapshots changed."""

    def mine(self, namespace: str) -> bool:
        """Whether this replica tracks ``namespace`` (``outcomes.namespaces``; empty: all)."""
        return self.settings.outcomes.tracks(namespace)

    def reconcile(self) -> None:
        """One pass (woken by snapshot, node and evidence changes, leadership gained, and
        every ``lifecycle.recheck_seconds``): decide on every replica, write on the leader
        only."""
        state = self.state()
        if not (state.synced and state.snapshots_known and state.pods_known):
            self.pod_uses.forget()
            return  # nothing is judged, let alone written, before the caches are synced
        now = datetime.fromtimestamp(self.clock(), UTC)
        read = self.config.prune != "off"
        if read:
            self._decide_prunes(state, now, self.pod_uses.uses(state))

        def ready() -> ReadyPods:  # only asked while a group is stale
            nonlocal read
            if not read:
                self.pod_uses.uses(state)
                read = True
            return self.pod_uses.ready

        self.refreshes = refresh_plan(
            state, self.mine, source_label=self._source_label(), memo=self.refresh_digests,
            ready=ready,
        )  # fmt: skip
        if not read:
            self.pod_uses.forget()  # nothing asked: keep no marks, do no pod work
        if not self.is_leader():
            self._announced.clear()  # a later take-over announces again (deduplicated by name)
            self._triggered.clear()
            return
        if self.config.prune == "dry-run":
            self._announce(now)
        elif self.config.prune == "on":
            self._delete(state)
        if self.config.refresh == "on":
            self._trigger(state)

    def _source_label(self) -> str | None:
        required = self.settings.rules.manual_trigger.require_source_label
        return self.settings.prefix + SNAPSHOT_SOURCE if required else None

    def _decide_prunes(self, state: ClusterState, now: datetime, pods: frozenset[UseKey]) -> None:
        seen = {}
        for digest in self.prune_digests.of(state).values():
            for view in digest.unrunnable:
                key = (view.namespace, view.name)
                seen[key] = self._since.get(key, now)
        self._since = seen  # runnable again, or gone: the clock starts over
        listed: set[str] = set()
        templates: set[UseKey] = set()
        candidates = unused_candidates(state, now, self.config, pods, memo=self.prune_digests)
        for namespace in sorted(candidates):
            if not self.mine(namespace):
                continue
            keys = self._namespace_templates(namespace, state)
            if keys is not None:
                listed.add(namespace)
                templates |= keys
        usage = Usage(pods, frozenset(templates), frozenset(listed))
        plan = prune_plan(
            state, now, self.config, usage=usage, unrunnable_since=seen, mine=self.mine,
            memo=self.prune_digests,
        )  # fmt: skip
        self.prunable = {(p.namespace, p.name): p for p in plan if p.ready(now)}

    def _namespace_templates(self, namespace: str, state: ClusterState) -> frozenset[UseKey] | None:
        """Use keys of the namespace's workload templates (cached ``template_recheck_seconds``);
        None when a list failed (unknown)."""
        cached = self._templates.get(namespace)
        if cached is not None and self.clock() - cached[0] < self.config.template_recheck_seconds:
            return cached[1]
        keys: set[UseKey] = set()
        failed = False
        page = self.settings.source.list_page_size
        for api_version, kind, resource in TEMPLATE_LISTS:
            path = f"/apis/{api_version}/namespaces/{namespace}/{resource}"
            try:
                items, _ = self.transport.list(path, page_size=page)
            except (TransportError, NotServed) as exc:
                log.warning("templates of %s not listed (%s): %s", namespace, kind, describe(exc))
                failed = True
                break
            for item in items:
                obj = {**item, "apiVersion": api_version, "kind": kind}  # list items carry neither
                keys |= self._template_keys(obj, state)
        frozen = None if failed else frozenset(keys)
        self._templates[namespace] = (self.clock(), frozen)
        return frozen

    def _template_keys(self, obj: RawObject, state: ClusterState) -> set[UseKey]:
        namespace = str(mapping(obj.get("metadata")).get("namespace") or "")
        keys: set[UseKey] = set()
        for view in workload_views(obj):
            labels = matching_labels(view)
            selecting = state.policies.select(namespace, labels)
            if not selecting:
                continue
            try:
                spec_hash = fingerprint(as_admitted(view.pod, self.settings))
            except ValueError:
                continue
            keys.update(use_keys(namespace, labels, spec_hash, selecting))
        return keys

    def _announce(self, now: datetime) -> None:
        """``SnapshotsPrunable`` once per policy and set (dry-run): a set is announced again
        only after it stopped being the policy's prunable set (``_announced`` holds the sets of
        this pass, so it stays as small as they are)."""
        sets: dict[tuple[str, str], list[Prunable]] = {}
        for item in self.prunable.values():
            sets.setdefault((item.namespace, item.policy), []).append(item)
        announced: set[tuple[str, str, str]] = set()
        for (namespace, policy), items in sorted(sets.items()):
            items.sort(key=attrgetter("name"))
            shown = ", ".join(f"{p.name} ({p.reason})" for p in items[:10])
            more = f" and {len(items) - 10} more" if len(items) > 10 else ""
            note = (
                f"{len(items)} snapshot(s) of {policy} no pod can restore from: {shown}{more}; "
                "lifecycle.prune is dry-run, set it to on to delete them (snapready status "
                "lists the reasons)"
            )
            key = (namespace, policy, note)  # another namespace's policy may say the same
            if key in self._announced:
                announced.add(key)
                continue
            regarding = Regarding(POLICY_API, "PodSnapshotPolicy", namespace, policy)
            if self.events.emit(Event(regarding, "Normal", "SnapshotsPrunable", "Prune", note)):
                announced.add(key)
        self._announced = announced

    def _delete(self, state: ClusterState) -> None:
        """Delete the prunable snapshots (leader, ``prune: on``), rate-limited."""
        api = self.snapshot_api()
        if api is None:
            return
        for key, item in sorted(self.prunable.items()):
            if not self.is_leader() or not self.bucket.take():
                return  # the rest in a later pass
            if self._delete_one(api, item, state):
                self.prunable = {k: v for k, v in self.prunable.items() if k != key}

    def _delete_one(self, api: str, item: Prunable, state: ClusterState) -> bool:
        path = f"{api}/namespaces/{item.namespace}/podsnapshots/{item.name}"
        try:
            live = mapping(self.transport.get(path).get("metadata"))
            if live.get("deletionTimestamp") or (item.uid and live.get("uid") != item.uid):
                return False  # already deleting, or another object under the name now
            self.transport.delete(path, uid=item.uid)
        except NotServed:
            return False  # gone already
        except Conflict:
            log.info("prune of %s/%s skipped: uid changed", item.namespace, item.name)
            return False
        except TransportError as exc:
            log.warning("prune of %s/%s failed: %s", item.namespace, item.name, describe(exc))
            return False
        self.pruned += 1
        labels = bounded_labels(item.namespace, item.policy, state.policies)
        for listener in self.on_prune:
            listener(*labels, item.reason)
        note = f"pruned PodSnapshot {item.name} ({item.reason}): {item.detail}"
        regarding = Regarding(POLICY_API, "PodSnapshotPolicy", item.namespace, item.policy)
        self.events.emit(Event(regarding, "Normal", "SnapshotPruned", "Prune", note))
        log.info("pruned snapshot %s/%s: %s", item.namespace, item.name, note)
        return True

    def _trigger(self, state: ClusterState) -> None:
        api = self.snapshot_api()
        if api is None:
            return
        for refresh in self.refreshes:
            if not refresh.manual or refresh.pod is None or refresh.trigger in self._triggered:
                continue
            if not self.is_leader():
                return
            target = self._create_trigger(api, refresh)
            if target is None:
                continue
            self._triggered.add(refresh.trigger)
            regarding = Regarding(
                POLICY_API, "PodSnapshotPolicy", refresh.namespace, refresh.policy
            )
            note = refresh.note(target)
            self.events.emit(
                Event(regarding, "Normal", "SnapshotRefreshTriggered", "Refresh", note)
            )

    def _create_trigger(self, api: str, refresh: Refresh) -> str | None:
        """The trigger's target pod once it exists (created now or before); None on errors."""
        base = f"{api}/namespaces/{refresh.namespace}/podsnapshotmanualtriggers"
        try:
            return _target(self.transport.get(f"{base}/{refresh.trigger}"))  # an earlier leader's
        except NotServed:
            pass
        except TransportError as exc:
            log.warning("trigger %s not checked: %s", refresh.trigger, describe(exc))
            return None
        body: RawObject = {
            "apiVersion": POLICY_API,
            "kind": "PodSnapshotManualTrigger",
            "metadata": {
                "name": refresh.trigger,
                "namespace": refresh.namespace,
                "labels": {self.settings.prefix + REFRESH: "true"},
                "annotations": {
                    self.settings.prefix + REFRESH_OF: ",".join(refresh.snapshots)[:1024]
                },
            },
            "spec": {"targetPod": refresh.pod},
        }
        try:
            self.transport.create(base, body)
        except Conflict:  # another replica, a moment ago
            try:
                return _target(self.transport.get(f"{base}/{refresh.trigger}"))
            except (TransportError, NotServed) as exc:
                log.warning("trigger %s not read: %s", refresh.trigger, describe(exc))
                return None
        except (TransportError, NotServed) as exc:
            log.warning("trigger %s not created: %s", refresh.trigger, describe(exc))
            return None
        self.created += 1
        for listener in self.on_refresh:
            listener(refresh.namespace, refresh.policy, refresh.trigger)
        log.info(
            "refresh trigger %s created on %s/%s", refresh.trigger, refresh.namespace, refresh.pod
        )
        return refresh.pod


def _target(trigger: RawObject) -> str:
    return str(mapping(trigger.get("spec")).get("targetPod") or "?")
