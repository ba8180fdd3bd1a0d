"""Closing the loop (leader only): restore outcomes, missed-restore events, stale snapshots.

Every stamped pod's outcome is decided when the pod cache first sees it Ready
(``kube.outcomes.outcome_of``) and handed to the listeners (metrics: restores by outcome, start-up
time). A ``missed`` pod (predicted a restore, started cold: GKE's silent fallback) gets a Warning
Event ``SnapshotRestoreMissed`` naming the likely cause: the node it landed on (pool, GKE version,
machine) against the snapshot's origin. A ``restored_unexpected`` pod is logged with both
fingerprints (our model was wrong). When a node-pool upgrade leaves Ready snapshots behind
(``kube.outcomes.stale_groups``), the PodSnapshotPolicy gets one Warning Event ``SnapshotsStale``
per upgrade. Pods already Ready when this replica became leader are not re-reported (a grace of
``GRACE_SECONDS`` covers the hand-over).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from webhook.cluster.events import Event, EventRecorder, Regarding
from webhook.cluster.syncing import Worker
from webhook.kube.gke import MACHINE_FAMILY
from webhook.kube.outcomes import Outcome, outcome_of, parse_time, stale_groups, startup_seconds
from webhook.kube.snapshots import OriginRecord, PodRecord
from webhook.kube.state import ClusterState, NodeView

log = logging.getLogger("snapready.restores")
GRACE_SECONDS = 120.0
MAX_SEEN = 200_000
OutcomeListener = Callable[[PodRecord, Outcome, float | None], None]


def _node_causes(record: PodRecord, node: NodeView | None, origin: OriginRecord) -> list[str]:
    """Differences between the node the pod landed on and the snapshot's origin node."""
    if node is None:
        return []
    causes = []
    old_version, old_family = origin.node.get("version"), origin.node.get("family")
    family = node.label(MACHINE_FAMILY)
    if old_version and node.version and node.version != old_version:
        causes.append(
            f"landed on {record.node_name} (pool {node.pool}, {node.version}); snapshot taken "
            f"on {origin.node.get('pool')} running {old_version}"
        )
    if old_family and family and family != old_family:
        causes.append(f"landed on machine family {family}, snapshot on {old_family}")
    return causes


def missed_note(record: PodRecord, state: ClusterState) -> str:
    """Why a pod predicted to restore probably started cold: its node against the origin."""
    snapshot = state.snapshots.named(record.namespace, record.predicted_snapshot or "")
    head = f"predicted restore from {record.predicted_snapshot} but the pod started cold"
    if snapshot is None or snapshot.origin is None:
        return f"{head}: the snapshot is gone (deleted or expired by retention)"
    origin = snapshot.origin
    node = state.nodes.get(record.node_name or "")
    causes = _node_causes(record, node, origin)
    if record.spec_hash and origin.spec_hash and record.spec_hash != origin.spec_hash:
        causes.append("the pod's spec fingerprint differs from the snapshot's")
    if not snapshot.ready:
        causes.append(f"the snapshot is no longer Ready ({snapshot.reason or 'no reason'})")
    where = f"node {record.node_name} (pool {node.pool}, {node.version})" if node else "its node"
    cause = "; ".join(causes) or (
        f"no difference known to snapready on {where}: check the pod's PodRestored condition and "
        "the GKE snapshot agent"
    )
    return f"{head}: {cause}"


class RestoreTracker(Worker):
    """Decides outcomes of pods turning Ready and reports them; reports stale snapshots.

    ``observe(record)`` is called by the pod cache for every pod event (O(1): queued); the loop
    drains the queue and checks staleness on every wake-up and every ``recheck`` seconds.
    """

    def __init__(
        self,
        events: EventRecorder,
        *,
        state: Callable[[], ClusterState],
        is_leader: Callable[[], bool],
        lock: threading.Lock,
        on_change: Callable[[], None],
        recheck_seconds: float = 30.0,
        clock: Callable[[], float] = time.time,
        deletion_stuck_seconds: float = 600.0,
    ) -> None:
        super().__init__("restoreOutcomes", lock, on_change)
        self.events, self.state, self.is_leader = events, state, is_leader
        self.recheck, self.clock = recheck_seconds, clock
        self.listeners: list[OutcomeListener] = []
        self.counts: dict[str, int] = {}
        self._queue: deque[PodRecord] = deque(maxlen=MAX_SEEN)
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._stale_sent: set[tuple[str, ...]] = set()
        self.deletion_stuck = deletion_stuck_seconds
        self._stuck_sent: set[tuple[str, str, str]] = set()
        self._leading_since: float | None = None
        self._wake = threading.Event()

    def observe(self, record: PodRecord | None) -> PodRecord | None:
        """Queue a pod record from the cache (the pods resource's convert hook); returns it."""
        if record is not None and record.ready_at is not None:
            self._queue.append(record)
            self._wake.set()
        return record

    def notify(self) -> None:
        """Check soon (snapshots or nodes changed, leadership gained)."""
        self._wake.set()

    def stop(self) -> None:
        """Stop, waking the loop."""
        super().stop()
        self._wake.set()

    def run(self) -> None:
        """Drain and check on every wake-up and every ``recheck`` seconds."""
        self.set_status("idle", synced=True)  # never gates readiness
        while not self.stopping:
            self._wake.wait(self.recheck)
            self._wake.clear()
            if not self.stopping:
                self.step()

    def step(self) -> None:
        """One pass: outcomes of queued pods, then stale snapshots (leader only)."""
        if not self.is_leader():
            self._leading_since = None
            self._queue.clear()
            return
        if self._leading_since is None:
            self._leading_since = self.clock()
        while self._queue:
            self._decide(self._queue.popleft())
        self._report_stale()
        self._report_stuck()

    def _decide(self, record: PodRecord) -> None:
        key = record.uid or f"{record.namespace}/{record.name}"
        outcome = outcome_of(record)
        if outcome is None or key in self._seen:
            return
        self._seen[key] = None
        while len(self._seen) > MAX_SEEN:
            self._seen.popitem(last=False)
        ready = parse_time(record.ready_at)
        since = self._leading_since or 0.0
        if ready is not None and ready.timestamp() < since - GRACE_SECONDS:
            return  # decided by an earlier leader
        self.counts[outcome] = self.counts.get(outcome, 0) + 1
        seconds = startup_seconds(record)
        for listener in self.listeners:
            listener(record, outcome, seconds)
        state = self.state()
        if outcome == "missed":
            regarding = Regarding("v1", "Pod", record.namespace, record.name, record.uid)
            note = missed_note(record, state)
            self.events.emit(Event(regarding, "Warning", "SnapshotRestoreMissed", "Restore", note))
        elif outcome == "restored_unexpected":
            snapshot = state.snapshots.named(record.namespace, record.predicted_snapshot or "")
            origin = snapshot.origin.spec_hash if snapshot and snapshot.origin else None
            log.warning(
                "pod %s/%s restored (%s) although predicted %s: pod fingerprint %s, closest "
                "snapshot %s fingerprint %s: snapready's model was wrong",
                record.namespace,
                record.name,
                record.restored_message,
                record.prediction,
                record.spec_hash,
                record.predicted_snapshot,
                origin,
            )

    def _report_stuck(self) -> None:
        """``SnapshotDeletionStuck``: one Warning Event per PodSnapshot ``Deleting`` for longer
        than ``deletion_stuck`` seconds (domain.md section 9: GKE's service agent lacks object
        rights on the bucket; the snapshot hangs and its data stays)."""
        state = self.state()
        if not state.snapshots_known:
            return
        now = self.clock()
        for view in state.snapshots.by_name.values():
            since = parse_time(view.deleting_since) if view.deleting_since else None
            key = (view.namespace, view.name, view.deleting_since or "")
            if (
                since is None
                or now - since.timestamp() < self.deletion_stuck
                or key in self._stuck_sent
            ):
                continue
            self._stuck_sent.add(key)
            minutes = int((now - since.timestamp()) // 60)
            note = (
                f"PodSnapshot {view.name} has been Deleting for {minutes} min: GKE's service agent "
                "(service-<project number>@container-engine-robot.iam.gserviceaccount.com) likely "
                "lacks roles/storage.objectUser on the bucket; grant it, or the data stays"
            )
            regarding = Regarding("podsnapshot.gke.io/v1", "PodSnapshot", view.namespace, view.name)
            self.events.emit(Event(regarding, "Warning", "SnapshotDeletionStuck", "Delete", note))
            log.warning("snapshot deletion stuck: %s/%s: %s", view.namespace, view.name, note)

    def _report_stale(self) -> None:
        state = self.state()
        if not state.snapshots_known:
            return
        for group in stale_groups(state.snapshots.by_name.values(), state.node_pools):
            if group.key in self._stale_sent:
                continue
            self._stale_sent.add(group.key)
            regarding = Regarding(
                "podsnapshot.gke.io/v1", "PodSnapshotPolicy", group.namespace, group.policy
            )
            self.events.emit(Event(regarding, "Warning", "SnapshotsStale", "Upgrade", group.note()))
            log.warning("stale snapshots: %s", group.note())
