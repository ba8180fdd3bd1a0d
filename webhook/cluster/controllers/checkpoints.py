"""Checkpoint lifecycle (leader only): failed and stalled checkpoints as Warning Events, metrics.

Read from each PodSnapshot's ``Checkpoint`` condition (``snapshots.views.checkpoint_state``;
docs/gke-facts.md#section-9). A failed checkpoint gets one Warning ``SnapshotCheckpointFailed`` on
its PodSnapshotPolicy and on the origin pod while it exists, with GKE's message and the likely cause
(``snapshots.checkpoints.failure_hint``); a snapshot ``AwaitingCheckpoint`` longer than
``checkpoint.stall_seconds`` one Warning ``SnapshotCheckpointStalled``. Finished checkpoints are
handed to the listeners (metrics: checkpoints by outcome, seconds from creation to
``Succeeded``), with ``namespace``/``policy`` as ``snapshots.selection.bounded_labels`` allows.
Each snapshot is reported once per process; a new leader reports transitions no older than
``outcomes.catch_up_seconds`` before it took over (older ones were an earlier leader's), and a
replica that loses the Lease forgets what it reported (the next leader decides anew). Woken when
snapshots or node pools change and when leadership is gained; else when the first awaiting
snapshot's stall is due, or every ``recheck`` seconds, whichever comes first.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from webhook.cluster.api.events import Event, EventRecorder, Regarding
from webhook.cluster.controllers.base import Reconciler
from webhook.kube.gke import ACCELERATOR, GPU_DRIVER_VERSION
from webhook.snapshots.checkpoints import (
    OriginFacts,
    awaiting_seconds,
    checkpoint_seconds,
    failed_note,
    stalled_note,
)
from webhook.snapshots.selection import bounded_labels
from webhook.snapshots.state import ClusterState
from webhook.snapshots.views import SnapshotView, parse_time

log = logging.getLogger("snapready.checkpoints")
CheckpointListener = Callable[[SnapshotView, str, float | None], None]
"""``(snapshot, outcome succeeded|failed, seconds to Succeeded or None)``."""
MAX_REMEMBERED = 100_000
MIN_RECHECK = 1.0
"""Seconds a pass waits at least for a stall that is due sooner (creation times are whole
seconds; a pass reads every snapshot)."""


def origin_facts(view: SnapshotView, state: ClusterState, seen_alive: bool) -> OriginFacts:
    """What is known of ``view``'s origin: its node's GPU labels (origin record, else the live
    origin pod's node) and whether the pod still exists (False only if it was seen before)."""
    record = state.pods.get(f"{view.namespace}/{view.origin_pod}") if view.origin_pod else None
    accelerator = driver = None
    if view.origin is not None:
        accelerator, driver = view.origin.node.get("accelerator"), view.origin.node.get("gpuDriver")
    node = state.nodes.get(record.node_name or "") if record is not None else None
    if node is not None:
        accelerator = accelerator or node.label(ACCELERATOR)
        driver = driver or node.label(GPU_DRIVER_VERSION)
    alive = True if record is not None else (False if seen_alive else None)
    return OriginFacts(accelerator=accelerator, driver=driver, pod_alive=alive)


class CheckpointReporter(Reconciler):
    """Reports checkpoint failures, stalls and successes (leader only; module docstring).

    Args:
        events: the leader's recorder; ``state``: the caches; ``is_leader``: whether this
            replica leads now; ``lock``/``on_change``: the caches' (``/readyz`` status).
        stall_seconds: seconds ``AwaitingCheckpoint`` before ``SnapshotCheckpointStalled``
            (``checkpoint.stall_seconds``).
        catch_up_seconds: how far before taking over a new leader still reports
            (``outcomes.catch_up_seconds``).
        mine: whether a namespace is tracked (``outcomes.namespaces``).
        recheck_seconds: seconds between passes when nothing changes; ``clock``: epoch seconds.
    """

    def __init__(
        self,
        events: EventRecorder,
        *,
        state: Callable[[], ClusterState],
        is_leader: Callable[[], bool],
        lock: threading.Lock,
        on_change: Callable[[], None],
        stall_seconds: float,
        catch_up_seconds: float,
        mine: Callable[[str], bool] = lambda namespace: True,
        recheck_seconds: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__("checkpoints", lock, on_change, period=recheck_seconds)
        self.events, self.state, self.is_leader, self.mine = events, state, is_leader, mine
        self.stall_seconds, self.catch_up, self.clock = stall_seconds, catch_up_seconds, clock
        self.listeners: list[CheckpointListener] = []
        """Called ``(snapshot, outcome, seconds)`` for each finished checkpoint (metrics)."""
        self._done: set[tuple[str, str, str]] = set()
        self._origin_seen: set[tuple[str, str]] = set()
        self._leading_since: datetime | None = None

    def reconcile(self) -> float | None:
        """One pass: on the leader, report what changed since the last; else forget. Returns the
        seconds until the next awaiting snapshot passes ``stall_seconds`` (at least
        ``MIN_RECHECK``), None when none will before ``period``: a stall is reported when it
        happens, not up to a period later (controller-runtime's ``RequeueAfter``)."""
        if not self.is_leader():
            if self._leading_since is not None:
                self.reset()
            self._leading_since = None
            return None
        now = datetime.fromtimestamp(self.clock(), UTC)
        if self._leading_since is None:
            self._leading_since = now
        due = self.report(self.state(), now, self._leading_since)
        return None if due is None or due >= self.period else max(MIN_RECHECK, due)

    def reset(self) -> None:
        """Forget what was reported (leadership lost: the next leader decides anew)."""
        self._done.clear()

    def report(self, state: ClusterState, now: datetime, leading_since: datetime) -> float | None:
        """Report every snapshot's new failure, stall or success (caller: the leader). Returns
        the seconds until the first awaiting snapshot not yet reported stalls (None: none)."""
        if not state.snapshots_known:
            return None
        horizon = leading_since - timedelta(seconds=self.catch_up)
        due: float | None = None
        for view in state.snapshots.by_name.values():
            if not self.mine(view.namespace):
                continue
            if view.checkpoint == "awaiting":
                key = f"{view.namespace}/{view.origin_pod}"
                if view.origin_pod and key in state.pods:
                    self._origin_seen.add((view.namespace, view.name))
                left = self._stalled(view, state, now)
                if left is not None and (due is None or left < due):
                    due = left
            elif view.checkpoint in ("failed", "succeeded"):
                self._finished(view, state, horizon)
        if len(self._done) > MAX_REMEMBERED:
            self._done.clear()  # bounded; a repeat is aggregated by the EventRecorder
            self._origin_seen.clear()
        return due

    def _once(self, view: SnapshotView, what: str) -> bool:
        key = (view.namespace, view.name, what)
        if key in self._done:
            return False
        self._done.add(key)
        return True

    def _finished(self, view: SnapshotView, state: ClusterState, horizon: datetime) -> None:
        if not self._once(view, view.checkpoint):
            return
        at = parse_time(view.checkpoint_at) or parse_time(view.created)
        if at is not None and at < horizon:
            return  # an earlier leader's
        seconds = checkpoint_seconds(view)
        # ``spec.policyName`` is whatever the PodSnapshot says: labels only as the cache knows.
        namespace, policy = bounded_labels(view.namespace, view.policy, state.policies)
        labelled = replace(view, namespace=namespace, policy=policy)
        for listener in self.listeners:
            listener(labelled, view.checkpoint, seconds)
        if view.checkpoint != "failed":
            return
        seen = (view.namespace, view.name) in self._origin_seen
        note = failed_note(view, origin_facts(view, state, seen))
        log.warning("checkpoint failed: %s/%s: %s", view.namespace, view.name, note)
        self._emit(view, state, "SnapshotCheckpointFailed", note)

    def _stalled(self, view: SnapshotView, state: ClusterState, now: datetime) -> float | None:
        """Report ``view``'s stall once it is due; else the seconds until it is (None: no
        creation time, or reported already)."""
        seconds = awaiting_seconds(view, now)
        if seconds is None:
            return None
        if seconds < self.stall_seconds:
            return self.stall_seconds - seconds
        if not self._once(view, "stalled"):
            return None
        note = stalled_note(view, seconds, self.stall_seconds)
        log.warning("checkpoint stalled: %s/%s: %s", view.namespace, view.name, note)
        self._emit(view, state, "SnapshotCheckpointStalled", note)
        return None

    def _emit(self, view: SnapshotView, state: ClusterState, reason: str, note: str) -> None:
        kind = "PodSnapshotPolicy"
        policy = Regarding("podsnapshot.gke.io/v1", kind, view.namespace, view.policy)
        self.events.emit(Event(policy, "Warning", reason, "Checkpoint", note))
        record = state.pods.get(f"{view.namespace}/{view.origin_pod}") if view.origin_pod else None
        if record is not None:
            pod = Regarding("v1", "Pod", record.namespace, record.name, record.uid)
            self.events.emit(Event(pod, "Warning", reason, "Checkpoint", note))
