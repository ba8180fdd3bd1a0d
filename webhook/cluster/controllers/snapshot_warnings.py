"""Warnings about PodSnapshots that no pod event raises (leader only): stale and stuck snapshots.

``SnapshotsStale`` (Warning, on the PodSnapshotPolicy, once per node-pool upgrade): the pool a
Ready snapshot was taken on now runs only another GKE version or GPU driver, so GKE will not
restore it there (``snapshots.outcomes.stale_groups``; docs/gke-facts.md#section-3).
``SnapshotDeletionStuck`` (Warning, on the PodSnapshot, once per deletion): ``Deleting`` for longer
than ``restore.deletion_stuck_seconds``. GKE's finalizer is released by the node agent
(``pod-snapshot-agent``) on the node the snapshot was taken on, after it found the files through
``spec.policyName`` -> PodSnapshotPolicy -> PodSnapshotStorageConfig (docs/gke-facts.md#section-10):
a deletion hangs when that node scaled down (16m44s observed) or GKE's service agent lacks object
rights on the bucket (section 9). The note names the node (GKE's ``origin-node``, else the
record's) and whether it is still there; snapready never deletes the snapshot again (a second
DELETE changes nothing while the finalizer stays). A controller of its own (leader only): woken
when snapshots or node pools change and when leadership is gained; else every ``recheck``
seconds (a deletion turns stuck with time alone).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from webhook.cluster.api.events import Event, EventRecorder, Regarding
from webhook.cluster.controllers.base import Reconciler
from webhook.snapshots.outcomes import stale_groups
from webhook.snapshots.state import ClusterState
from webhook.snapshots.views import SnapshotView, parse_time

log = logging.getLogger("snapready.restores")
SNAPSHOT_API = "podsnapshot.gke.io/v1"


class SnapshotWarnings(Reconciler):
    """Reports each stale group and each stuck deletion once per process (leader only): logged
    when first seen, and its Event again on each pass until one is written (an Event over its
    namespace's rate limit is dropped, ``cluster.api.events``; this one Warning per upgrade or
    deletion must not be lost with it).

    Args:
        events: the leader's recorder; ``state``: the caches; ``is_leader``: whether this
            replica leads now; ``lock``/``on_change``: the caches' (``/readyz`` status).
        deletion_stuck_seconds: seconds in ``Deleting`` before the warning
            (``restore.deletion_stuck_seconds``).
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
        deletion_stuck_seconds: float,
        mine: Callable[[str], bool] = lambda namespace: True,
        recheck_seconds: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__("snapshotWarnings", lock, on_change, period=recheck_seconds)
        self.events, self.state, self.is_leader, self.mine = events, state, is_leader, mine
        self.deletion_stuck, self.clock = deletion_stuck_seconds, clock
        self._stale_sent: dict[tuple[str, ...], bool] = {}
        self._stuck_sent: dict[tuple[str, str, str], bool] = {}
        """Each key seen (logged), and whether its Event was written."""

    def reconcile(self) -> None:
        """One pass on the leader (followers report nothing)."""
        if self.is_leader():
            self.report(self.state(), datetime.fromtimestamp(self.clock(), UTC))

    def report(self, state: ClusterState, now: datetime) -> None:
        """One pass over the snapshots (caller: the leader); nothing before they were listed."""
        if not state.snapshots_known:
            return
        self._stale(state)
        self._stuck(state, now)

    def _stuck(self, state: ClusterState, now: datetime) -> None:
        for view in state.snapshots.by_name.values():
            since = parse_time(view.deleting_since) if view.deleting_since else None
            key = (view.namespace, view.name, view.deleting_since or "")
            if (
                since is None
                or not self.mine(view.namespace)
                or (now - since).total_seconds() < self.deletion_stuck
                or self._stuck_sent.get(key)
            ):
                continue
            minutes = int((now - since).total_seconds() // 60)
            note = f"PodSnapshot {view.name} has been Deleting for {minutes} min: " + _stuck_cause(
                view, state
            )
            if key not in self._stuck_sent:
                log.warning("snapshot deletion stuck: %s/%s: %s", view.namespace, view.name, note)
            regarding = Regarding(SNAPSHOT_API, "PodSnapshot", view.namespace, view.name)
            self._stuck_sent[key] = self.events.emit(
                Event(regarding, "Warning", "SnapshotDeletionStuck", "Delete", note)
            )

    def _stale(self, state: ClusterState) -> None:
        for group in stale_groups(state.snapshots.by_name.values(), state.node_pools):
            if self._stale_sent.get(group.key) or not self.mine(group.namespace):
                continue
            if group.key not in self._stale_sent:
                log.warning("stale snapshots: %s", group.note())
            regarding = Regarding(SNAPSHOT_API, "PodSnapshotPolicy", group.namespace, group.policy)
            self._stale_sent[group.key] = self.events.emit(
                Event(regarding, "Warning", "SnapshotsStale", "Upgrade", group.note())
            )


def _stuck_cause(view: SnapshotView, state: ClusterState) -> str:
    """Why a deletion may hang, naming the node whose agent must release GKE's finalizer."""
    node = view.origin_node or (view.origin.node_name if view.origin is not None else None)
    agent = (
        "GKE's node agent releases its finalizer"
        if node is None
        else f"GKE's node agent on node {node} (where it was taken) releases its finalizer"
    )
    if node is not None and state.nodes and node not in state.nodes:
        agent += f", and node {node} is gone (scaled down?)"
    return (
        f"{agent}; or GKE's service agent (service-<project number>@container-engine-robot."
        "iam.gserviceaccount.com) lacks roles/storage.objectUser on the bucket. snapready does "
        "not delete it again; keep its PodSnapshotPolicy until it is gone (deleting the policy "
        "first releases it with its files left in the bucket) and keep a bucket lifecycle rule"
    )
