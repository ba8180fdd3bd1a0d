"""Checkpoint reports as a controller of their own, and the gate's view of uploading origins.

Driven by hand (``reconcile``) over a hand-built ``ClusterState`` and a recording stand-in for
the Events writer; the same reports on a real API server are in ``test_evidence``.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, datetime
from typing import cast

from webhook.cluster.api.events import Event, EventRecorder
from webhook.cluster.controllers.checkpoints import MIN_RECHECK, CheckpointReporter
from webhook.cluster.controllers.restores.gate import uploading_origins
from webhook.snapshots.checkpoints import stalled_note
from webhook.snapshots.index import SnapshotIndex
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.state import ClusterState
from webhook.snapshots.views import SnapshotView

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC).timestamp()
CREATED = "2026-12-01T09:00:00Z"


class Recorded:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)


def snapshot(name: str, checkpoint: str, origin: str | None = "origin") -> SnapshotView:
    return SnapshotView(
        "ns",
        name,
        "p",
        origin,
        checkpoint == "succeeded",
        "",
        CREATED,
        checkpoint=checkpoint,
        checkpoint_message="runsc error: exit status 1" if checkpoint == "failed" else "",
        checkpoint_at="2026-12-01T09:59:00Z",
    )


def state_of(*views: SnapshotView, pods: tuple[str, ...] = ("origin",)) -> ClusterState:
    return ClusterState(
        snapshots=SnapshotIndex.build(views),
        snapshots_known=True,
        synced=True,
        pods={f"ns/{name}": PodRecord("ns", name, uid=f"uid-{name}") for name in pods},
    )


def reporter(
    state: ClusterState, leader: list[bool], now: list[float] | None = None
) -> tuple[CheckpointReporter, Recorded]:
    events = Recorded()
    clock = now or [T0]
    found = CheckpointReporter(
        cast("EventRecorder", events),
        state=lambda: state,
        is_leader=lambda: leader[0],
        lock=threading.Lock(),
        on_change=lambda: None,
        stall_seconds=600,
        catch_up_seconds=3600,
        clock=lambda: clock[0],
    )
    return found, events


def test_a_failed_checkpoint_is_reported_once_on_the_policy_and_the_origin_pod() -> None:
    found, events = reporter(state_of(snapshot("s1", "failed")), [True])
    finished: list[tuple[str, str]] = []
    found.listeners.append(lambda view, outcome, _seconds: finished.append((view.name, outcome)))
    found.reconcile()
    found.reconcile()
    assert [(e.reason, e.regarding.kind) for e in events.events] == [
        ("SnapshotCheckpointFailed", "PodSnapshotPolicy"),
        ("SnapshotCheckpointFailed", "Pod"),
    ]
    assert finished == [("s1", "failed")]


def test_a_follower_reports_nothing_and_a_lost_lease_forgets_what_was_reported() -> None:
    leader = [False]
    found, events = reporter(state_of(snapshot("s1", "failed")), leader)
    found.reconcile()
    assert events.events == []
    leader[0] = True
    found.reconcile()
    assert len(events.events) == 2
    leader[0] = False
    found.reconcile()
    leader[0] = True
    found.reconcile()  # a new term decides anew (the Events' names dedupe it on the server)
    assert len(events.events) == 4


def test_a_stalled_upload_is_warned_about_after_the_stall_time() -> None:
    stalled = snapshot("s2", "awaiting")
    found, events = reporter(state_of(stalled), [True])
    found.reconcile()
    assert [e.reason for e in events.events] == [
        "SnapshotCheckpointStalled",
        "SnapshotCheckpointStalled",
    ]


def test_the_next_pass_comes_when_the_first_stall_is_due_not_a_period_later() -> None:
    # Created 09:00; stall_seconds 600: due at 09:10. The pass period is 30 s, so a stall was
    # reported up to 30 s late; the pass now asks to come back when the first one is due.
    created = datetime(2026, 12, 1, 9, 0, tzinfo=UTC).timestamp()
    now = [created + 590.0]
    later = replace(snapshot("s1", "awaiting"), created="2026-12-01T09:05:00Z")
    found, events = reporter(state_of(later, snapshot("s2", "awaiting")), [True], now)
    assert found.reconcile() == 10.0, "the first due of the two"
    assert events.events == []
    now[0] = created + 599.6
    assert found.reconcile() == MIN_RECHECK, "never a busy loop"
    now[0] = created + 600.0
    assert found.reconcile() is None, "s2 reported; s1 due in 300 s, past the period"
    assert [e.reason for e in events.events] == ["SnapshotCheckpointStalled"] * 2
    now[0] = created + 400.0  # a stall 200 s away is no sooner than the period: the period
    fresh, _ = reporter(state_of(snapshot("s3", "awaiting")), [True], now)
    assert fresh.reconcile() is None


def test_the_gate_sees_the_cached_origins_whose_checkpoint_is_uploading() -> None:
    views = (
        snapshot("up", "awaiting", origin="origin"),
        snapshot("gone", "awaiting", origin="not-cached"),
        snapshot("done", "succeeded", origin="other"),
        snapshot("anonymous", "awaiting", origin=None),
    )
    state = state_of(*views, pods=("origin", "other"))
    assert uploading_origins(state, lambda _namespace: True) == {"ns/origin"}
    assert uploading_origins(state, lambda namespace: namespace != "ns") == set()
    unknown = ClusterState(snapshots=state.snapshots, pods=state.pods)
    assert uploading_origins(unknown, lambda _namespace: True) == set(), "not listed yet"


def test_a_short_stall_says_seconds_not_zero_minutes() -> None:
    view = snapshot("s2", "awaiting")
    assert "AwaitingCheckpoint for 3 s (checkpoint.stall_seconds 3 s)" in stalled_note(view, 3, 3)
    assert "AwaitingCheckpoint for 31 min (checkpoint.stall_seconds 1800 s)" in stalled_note(
        view, 1860, 1800
    )
