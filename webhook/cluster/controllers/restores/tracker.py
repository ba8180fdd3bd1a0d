"""Closing the loop (leader only): restore outcomes from GKE's evidence, their Events and the
readiness gate.

Every stamped pod stays pending until ``snapshots.outcomes.decide`` finds evidence (``PodRestored``,
GKE's ``GKEPodSnapshotting`` Events, a restore crash, or ``outcomes.settle_seconds`` of Ready
without any); never at the Ready transition, which on GKE comes before a restore is done
(docs/gke-facts.md#section-9). A decided outcome goes to the listeners (metrics), gets its Event,
and is recorded on the pod as ``<prefix>restore-outcome``, so a later leader neither repeats it nor
misses one decided while nobody led: on taking over, the leader re-derives every pod without that
annotation from the pods' conditions and GKE's events, skipping evidence older than
``outcomes.catch_up_seconds`` before it took over.

Events: ``SnapshotRestoreMissed`` (Warning, pod predicted ``hit`` that started cold), quoting
GKE's reason first when GKE gave one and adding snapready's node/fingerprint diagnosis second;
``SnapshotRestoreFailed`` (Warning) for a crashed restore. ``restored_unexpected`` is logged with
both fingerprints (our model was wrong). Stale snapshots and checkpoints are controllers of their
own (``controllers.snapshot_warnings``, ``controllers.checkpoints``); this one only reads which
origin pods are uploading a checkpoint, for their readiness gate (``gate.uploading_origins``).
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol
from urllib.parse import quote

from webhook.base.config import Settings
from webhook.base.keys import RESTORE_OUTCOME, RESTORE_SETTLED
from webhook.base.types import RawObject
from webhook.cluster.api.events import Event, EventRecorder, Regarding, micro_time
from webhook.cluster.api.syncing import NotServed, TransportError, describe
from webhook.cluster.controllers.base import Reconciler
from webhook.cluster.controllers.restores.gate import (
    awaiting_checkpoint,
    gate_status,
    needs_write,
    uploading_origins,
    write_gate,
)
from webhook.cluster.controllers.restores.labels import LabelGuard
from webhook.snapshots.evidence import events_of
from webhook.snapshots.outcomes import Verdict, decide
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.restore_notes import failed_note, missed_note
from webhook.snapshots.selection import believed
from webhook.snapshots.state import ClusterState
from webhook.snapshots.views import parse_time

log = logging.getLogger("snapready.restores")
MAX_SEEN = 200_000
OutcomeListener = Callable[[PodRecord, Verdict], object]
"""``(pod, verdict)`` for each decided outcome (metrics); what it returns is ignored."""


class PodTransport(Protocol):
    """GET a pod, merge-patch its metadata, strategic-merge-patch its status."""

    def get(self, path: str) -> RawObject: ...

    def merge_patch(self, path: str, patch: RawObject, *, field_manager: str) -> RawObject: ...

    def strategic_patch(
        self, path: str, patch: RawObject, *, field_manager: str = "snapready"
    ) -> RawObject: ...


class RestoreTracker(Reconciler):
    """Decides outcomes from evidence and reports them; sets the readiness gate.

    ``observe(record)`` is called for every pod event once the pod cache holds it, ``gone`` for
    a pod that left it, and ``notify()`` on new GKE events, snapshots or nodes (O(1): a set and
    a wake-up); ``reconcile`` evaluates the pending pods on every wake-up, every ``recheck``
    seconds, and when a Ready pod's settle time ends (the delay it returns), at most once per
    ``min_interval``.
    """

    min_interval = 0.1
    """Seconds between passes: the pod events of a scale-out (hundreds per second) are taken in
    batches instead of one pass, and one hand-off of the interpreter, per pod (outcomes wait
    ``outcomes.settle_seconds`` anyway)."""

    def __init__(
        self,
        events: EventRecorder,
        *,
        state: Callable[[], ClusterState],
        is_leader: Callable[[], bool],
        lock: threading.Lock,
        on_change: Callable[[], None],
        settings: Settings | None = None,
        pods: PodTransport | None = None,
        recheck_seconds: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__("restoreOutcomes", lock, on_change, period=recheck_seconds)
        settings = settings or Settings()
        self.events, self.state, self.is_leader, self.pods = events, state, is_leader, pods
        self.prefix = settings.prefix
        self.settle = settings.outcomes.settle_seconds
        self.catch_up = settings.outcomes.catch_up_seconds
        self.gate_timeout = settings.restore.readiness_gate_timeout_seconds
        self.stall = settings.checkpoint.stall_seconds
        self.tracks = settings.outcomes.tracks
        self.recheck, self.clock = recheck_seconds, clock
        self.listeners: list[OutcomeListener] = []
        self.guard = LabelGuard(pods, self.prefix)
        self.counts: dict[str, int] = {}
        self._pending: dict[str, str] = {}
        """``namespace/name`` -> uid of every stamped pod whose outcome is not decided yet."""
        self._decided: OrderedDict[str, None] = OrderedDict()
        self._gates: dict[str, None] = {}
        self._fresh: set[str] = set()
        self._gone: set[str] = set()
        """Keys observed since the last pass (a pass that finds one missing from the state it
        read looks again soon rather than taking it for a deletion)."""
        self._leading_since: datetime | None = None
        self._due: list[tuple[float, str]] = []
        """Heap of (settle deadline, key) of Ready pods waiting for evidence."""
        self._full_at: datetime | None = None
        self._events_seen: object = None
        self._scanned_at: datetime | None = None
        self._snapshots_seen: object = None

    def mine(self, namespace: str) -> bool:
        """Whether this replica tracks ``namespace`` (``outcomes.namespaces``; empty: all)."""
        return self.tracks(namespace)

    def observe(self, record: PodRecord) -> None:
        """Note a pod record the pod cache now holds (called after the store update; O(1))."""
        if self.mine(record.namespace):
            key = f"{record.namespace}/{record.name}"
            self._fresh.add(key)  # first: a pass that sees the key pending sees it fresh too
            if record.outcome is None and key not in self._decided:
                self._pending[key] = record.uid
            if record.gated:
                self._gates[key] = None
            self.notify()

    def gone(self, record: PodRecord) -> None:
        """A stamped pod left the pod cache (deleted, or its label removed): look at it in the
        next pass (called after the store update; O(1))."""
        self._gone.add(f"{record.namespace}/{record.name}")
        self.notify()

    def reconcile(self) -> float:
        """One pass (leader only; woken by GKE events, snapshots, nodes, pod events and
        leadership); returns seconds until the next pass is due."""
        if not self.is_leader():
            if self._leading_since is not None:
                self._decided.clear()
            self._leading_since = self._scanned_at = self._full_at = None
            self._due.clear()
            self._pending.clear()
            self._gates.clear()
            return self.recheck
        now = datetime.fromtimestamp(self.clock(), UTC)
        state = self.state()
        fresh, self._fresh = self._fresh, set()
        if self._leading_since is None:  # taking over: every undecided pod is pending again
            self._leading_since = now
            for key, record in tuple(state.pods.items()):  # live dict: a copy
                if not self.mine(record.namespace):
                    continue
                if record.outcome is None:
                    self._pending[key] = record.uid
                if record.gated:
                    self._gates[key] = None
        # A pass looks at the pods that changed, whose settle time ended, and (on GKE events,
        # a take-over and every ``recheck`` seconds) at every pending pod: not O(pending) per
        # pod event (bench-cluster: 600 pending pods, several watch events each).
        full = (
            self._full_at is None
            or (now - self._full_at).total_seconds() >= self.recheck
            or state.gke_events is not self._events_seen
        )
        if full:
            self._full_at, self._events_seen = now, state.gke_events
            self._gone.clear()
            keys = list(self._pending)
        else:
            gone, self._gone = self._gone, set()
            keys = [k for k in (*fresh, *gone) if k in self._pending]
            while self._due and self._due[0][0] <= now.timestamp():
                _, key = heapq.heappop(self._due)
                if key in self._pending:
                    keys.append(key)
        next_due = self._decide_pending(state, now, fresh, dict.fromkeys(keys))
        if self._due:
            next_due = min(next_due, self._due[0][0] - now.timestamp() + 0.05)
        due = self._scanned_at is None or (now - self._scanned_at).total_seconds() >= self.recheck
        facts = (state.snapshots, state.node_pools)
        scanned = due or facts != self._snapshots_seen
        if scanned:
            self._scanned_at, self._snapshots_seen = now, facts
            for key in uploading_origins(state, self.mine):
                origin = state.pods.get(key)
                if origin is not None and origin.gated:
                    self._gates[key] = None
                    fresh.add(key)  # its gate is looked at in this pass
        self._settle_gates(state, now, fresh, full or scanned)  # snapshots move origins' gates
        return min(self.recheck, max(0.2, next_due))

    def _decide_pending(
        self, state: ClusterState, now: datetime, fresh: set[str], keys: dict[str, None]
    ) -> float:
        """Decide what the evidence allows for ``keys`` (pending pods); seconds until this pass
        wants to run again (settle deadlines go to ``_due``)."""
        next_due = self.recheck
        assert self._leading_since is not None
        horizon = self._leading_since - timedelta(seconds=self.catch_up)
        for key in keys:
            if key not in self._pending:
                continue
            record = state.pods.get(key)
            if record is None and (key in fresh or key in self._fresh):
                # Not in the cache yet, or it left it within this pass's batch (created, then
                # its label removed): the next pass looks at it again, soon.
                self._gone.add(key)
                next_due = min(next_due, 0.2)
                continue
            if record is None:  # deleted, or it lost its label (``labels.LabelGuard``)
                if self.guard.lost(key, self._pending[key], state.policies):
                    next_due = min(next_due, 1.0)  # relabelled, or the cache is behind
                else:
                    self._pending.pop(key, None)
                continue
            self.guard.forget(key)
            if record.outcome is not None:  # an earlier leader's
                self._pending.pop(key, None)
                continue
            record = believed(record, state.policies)
            if record is None:  # no live policy selects it: not snapready's to report
                self._pending.pop(key, None)
                continue
            events = events_of(state.gke_events, record.namespace, record.name, record.uid)
            verdict = decide(record, events, now=now, settle_seconds=self.settle)
            if verdict is None:
                ready = parse_time(record.ready_at)
                if ready is not None:
                    heapq.heappush(self._due, (ready.timestamp() + self.settle, key))
                continue
            self._pending.pop(key, None)
            self._remember(key)
            if verdict.at is not None and verdict.at < horizon:
                continue  # before this leader's catch-up window: not re-reported
            if self._reported_meanwhile(record):
                continue  # an earlier leader's, and this cache had not seen its annotation yet
            self._report(record, verdict, state)
        return next_due

    def _remember(self, key: str) -> None:
        self._decided[key] = None
        while len(self._decided) > MAX_SEEN:
            self._decided.popitem(last=False)

    def _report(self, record: PodRecord, verdict: Verdict, state: ClusterState) -> None:
        outcome = verdict.outcome
        self.counts[outcome] = self.counts.get(outcome, 0) + 1
        for listener in self.listeners:
            listener(record, verdict)
        regarding = Regarding("v1", "Pod", record.namespace, record.name, record.uid)
        if outcome == "missed":
            note = missed_note(record, state, verdict, settle_seconds=self.settle)
            self.events.emit(Event(regarding, "Warning", "SnapshotRestoreMissed", "Restore", note))
        elif outcome == "restore_failed":
            note = failed_note(record, verdict)
            self.events.emit(Event(regarding, "Warning", "SnapshotRestoreFailed", "Restore", note))
        elif outcome == "restored_unexpected":
            snapshot = state.snapshots.named(record.namespace, record.predicted_snapshot or "")
            origin = snapshot.origin.spec_hash if snapshot and snapshot.origin else None
            log.warning(
                "pod %s/%s restored (%s) although predicted %s: pod fingerprint %s, closest "
                "snapshot %s fingerprint %s: snapready's model was wrong",
                record.namespace,
                record.name,
                verdict.snapshot or record.restored_message,
                record.prediction,
                record.spec_hash,
                record.predicted_snapshot,
                origin,
            )
        self._record_outcome(record, outcome)

    def _reported_meanwhile(self, record: PodRecord) -> bool:
        """Compare before write: whether the live pod already carries an outcome (or is gone).
        Right after a hand-over the cache can be behind the old leader's last writes; one GET
        per decided pod keeps a new leader from reporting (Event, metrics) what it did."""
        if self.pods is None:
            return False
        namespace, name = quote(record.namespace, safe=""), quote(record.name, safe="")
        try:
            live = self.pods.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
        except NotServed:
            return True  # deleted meanwhile
        except TransportError:
            return False  # unknown: report (the Event's deterministic name still dedupes it)
        metadata = live.get("metadata")
        meta = metadata if isinstance(metadata, dict) else {}
        if record.uid and meta.get("uid") != record.uid:
            return True
        annotations = meta.get("annotations")
        return isinstance(annotations, dict) and self.prefix + RESTORE_OUTCOME in annotations

    def _record_outcome(self, record: PodRecord, outcome: str) -> None:
        """``<prefix>restore-outcome`` on the pod (the uid is a precondition)."""
        if self.pods is None or not self.is_leader():
            return
        metadata: dict[str, Any] = {"annotations": {self.prefix + RESTORE_OUTCOME: outcome}}
        if record.uid:
            metadata["uid"] = record.uid
        namespace, name = quote(record.namespace, safe=""), quote(record.name, safe="")
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        try:
            self.pods.merge_patch(path, {"metadata": metadata}, field_manager="snapready")
        except (TransportError, NotServed) as exc:
            log.warning(
                "outcome of %s/%s not recorded: %s", record.namespace, record.name, describe(exc)
            )

    def _settle_gates(
        self, state: ClusterState, now: datetime, fresh: set[str], full: bool
    ) -> None:
        """Set the readiness gate's condition where it should change (gated pods only): the
        pods that changed, and every gated pod on a full pass (timeouts, snapshot changes)."""
        if self.pods is None:
            return
        condition = self.prefix + RESTORE_SETTLED
        stamp = micro_time(now.timestamp())[:19] + "Z"
        keys = list(self._gates) if full else [k for k in fresh if k in self._gates]
        for key in keys:
            record = state.pods.get(key)
            if record is None:
                if key not in fresh and key not in self._fresh:  # deleted, not just arriving
                    self._gates.pop(key, None)
                continue
            record = believed(record, state.policies)
            if record is None:  # no live policy selects it (any more): not ours to gate
                self._gates.pop(key, None)
                continue
            events = events_of(state.gke_events, record.namespace, record.name, record.uid)
            uploading = awaiting_checkpoint(
                record, state.snapshots.of_policy(record.namespace, record.policy or "")
            )
            want = gate_status(
                record,
                events,
                uploading,
                now=now,
                timeout_seconds=self.gate_timeout,
                stall_seconds=self.stall,
            )
            written = not needs_write(record, want)
            if not want.waiting and uploading is None and written:
                self._gates.pop(key, None)  # settled: woken again by its next pod event
                continue
            if not written and self.is_leader():
                write_gate(self.pods, record, condition, want, stamp)
