"""``SnapshotDeletionStuck``: the leader reports a PodSnapshot left ``Deleting`` (issue 23).

Driven by hand (``reconcile``) over a hand-built ``ClusterState`` and a recording stand-in for the
Events writer; the Event shape itself is tested with the writer (``test_restores``).
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from tests.snapshots.test_prune_refresh import snap
from tests.snapshots.test_prune_refresh import state as prune_state
from webhook.cluster.api.events import Event, EventRecorder
from webhook.cluster.controllers.snapshot_warnings import SnapshotWarnings
from webhook.snapshots.index import SnapshotIndex
from webhook.snapshots.state import ClusterState, NodeView
from webhook.snapshots.views import SnapshotView

DELETED_AT = "2026-12-01T10:00:00Z"
T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC).timestamp()


class Recorded:
    """The Events writer: records each emit; ``drop`` first ones are dropped (rate limit)."""

    def __init__(self, drop: int = 0) -> None:
        self.events: list[Event] = []
        self.drop = drop

    def emit(self, event: Event) -> bool:
        self.events.append(event)
        self.drop -= 1
        return self.drop < 0


def tracker(
    views: list[SnapshotView],
    now: float,
    leader: bool = True,
    nodes: dict[str, NodeView] | None = None,
    drop: int = 0,
) -> tuple[Any, Recorded]:
    state = ClusterState(
        snapshots=SnapshotIndex.build(views),
        snapshots_known=True,
        synced=True,
        nodes=nodes or {},
    )
    events = Recorded(drop)
    found = SnapshotWarnings(
        cast("EventRecorder", events),
        state=lambda: state,
        is_leader=lambda: leader,
        lock=threading.Lock(),
        on_change=lambda: None,
        clock=lambda: now,
        deletion_stuck_seconds=600,
    )
    return found, events


def view(name: str, deleting: str | None) -> SnapshotView:
    return SnapshotView(
        "ns", name, "p", None, True, "", "2026-12-01T09:00:00Z", deleting_since=deleting
    )


def test_a_snapshot_deleting_longer_than_the_setting_gets_one_warning() -> None:
    found, events = tracker([view("stuck", DELETED_AT), view("fine", None)], T0 + 601)
    found.reconcile()
    found.reconcile()  # reported once
    [event] = events.events
    assert (event.type, event.reason, event.regarding.kind, event.regarding.name) == (
        "Warning",
        "SnapshotDeletionStuck",
        "PodSnapshot",
        "stuck",
    )
    assert "roles/storage.objectUser" in event.note and "10 min" in event.note


def test_a_dropped_warning_is_sent_again_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    # An Event over its namespace's rate limit is dropped (emit: False): the one Warning of a
    # stuck deletion is tried again on the next passes until written, then never again.
    found, events = tracker([view("stuck", DELETED_AT)], T0 + 601, drop=2)
    with caplog.at_level(logging.WARNING, logger="snapready.restores"):
        for _ in range(4):
            found.reconcile()
    assert [e.reason for e in events.events] == ["SnapshotDeletionStuck"] * 3
    assert len([r for r in caplog.records if "deletion stuck" in r.getMessage()]) == 1


def test_a_recent_deletion_is_not_reported() -> None:
    found, events = tracker([view("deleting", DELETED_AT)], T0 + 599)
    found.reconcile()
    assert events.events == []


def test_followers_do_not_report() -> None:
    found, events = tracker([view("stuck", DELETED_AT)], T0 + 3600, leader=False)
    found.reconcile()
    assert events.events == []


def test_the_warning_names_the_node_whose_agent_holds_the_finalizer() -> None:
    """Issue 31 deliverable 5: GKE's node agent on the origin node releases the finalizer
    (docs/gke-facts.md#section-10); the note names that node (GKE's origin-node annotation) and says
    when it is gone from the cluster (scaled down), and the deletion is reported once."""
    stuck = SnapshotView(
        "ns", "stuck", "p", None, True, "", "2026-12-01T09:00:00Z",
        deleting_since=DELETED_AT, origin_node="gke-pool-a-1",
    )  # fmt: skip
    # 16m44s, as observed on GKE; only another pool's node is left in the cluster.
    found, events = tracker([stuck], T0 + 1004, nodes={"gke-pool-b-7": NodeView("pool-b")})
    found.reconcile()
    found.reconcile()
    [event] = events.events
    assert "node gke-pool-a-1" in event.note and "is gone" in event.note
    assert "16 min" in event.note and "lifecycle rule" in event.note


def test_a_dropped_stale_warning_is_sent_again() -> None:
    # The same for SnapshotsStale: a snapshot taken on a version no pool runs any more
    # (``tests/snapshots/test_prune_refresh``'s cluster).
    current = prune_state([snap("old")])
    events = Recorded(drop=1)
    warnings = SnapshotWarnings(
        cast("EventRecorder", events), state=lambda: current, is_leader=lambda: True,
        lock=threading.Lock(), on_change=lambda: None, clock=lambda: T0,
        deletion_stuck_seconds=600,
    )  # fmt: skip
    for _ in range(3):
        warnings.reconcile()
    assert [e.reason for e in events.events] == ["SnapshotsStale"] * 2
