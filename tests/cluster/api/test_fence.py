"""Lease fencing and hand-over-safe Events, without a cluster (fake transports, fake clocks).

``LeaderElector.is_leader`` is true only below ``renew_deadline_seconds`` of monotonic time since
the last successful renew began; ``FencedTransport`` refuses every write otherwise; the
``EventRecorder`` leaves an earlier leader's event alone and never reuses a name someone else
took. The same on a real API server: ``test_failover.py`` (SIGSTOP) and ``test_trust.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from webhook.base.config import LeaderSettings
from webhook.base.types import RawObject
from webhook.cluster.api.events import REPORTING_CONTROLLER, Event, EventRecorder, Regarding, is_own
from webhook.cluster.api.fence import FencedTransport, NotLeader
from webhook.cluster.api.leader import LeaderElector
from webhook.cluster.api.syncing import Conflict


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def elector(clock: Clock) -> LeaderElector:
    return LeaderElector(
        None, LeaderSettings(), lock=threading.Lock(), on_change=lambda: None, clock=clock
    )


def test_the_lease_is_held_only_below_the_renew_deadline_since_the_last_renew() -> None:
    clock = Clock()
    leader = elector(clock)
    assert not leader.is_leader, "never renewed"
    leader._leader.set()  # elected by the library
    assert not leader.is_leader, "elected, but no renew measured"
    leader.renewed(clock.now)
    clock.now += 9.9
    assert leader.is_leader
    clock.now += 0.2  # 10.1 s: past renew_deadline_seconds (10), e.g. woken from SIGSTOP
    assert not leader.is_leader, "a frozen process holds nothing until it renewed"
    leader.renewed(clock.now)
    assert leader.is_leader
    leader._stopped()
    assert not leader.is_leader


class Recording:
    """A transport that records calls; ``create`` may answer 409 with a stored object."""

    def __init__(self, existing: RawObject | None = None) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.existing = existing

    def get(self, path: str) -> RawObject:
        self.calls.append(("get", path, None))
        return self.existing or {}

    def create(self, path: str, body: RawObject) -> RawObject:
        self.calls.append(("create", path, body))
        if self.existing is not None and "name" in body["metadata"]:
            raise Conflict("409")
        return {"metadata": {"name": body["metadata"].get("generateName", "") + "x7k2p"}}

    def patch(self, path: str, ops: Sequence[RawObject], *, field_manager: str = "") -> RawObject:
        self.calls.append(("patch", path, ops))
        return {}

    def merge_patch(self, path: str, patch: RawObject, *, field_manager: str = "") -> RawObject:
        self.calls.append(("merge_patch", path, patch))
        return {}

    def strategic_patch(self, path: str, patch: RawObject, *, field_manager: str = "") -> RawObject:
        self.calls.append(("strategic_patch", path, patch))
        return {}


def test_the_fence_refuses_every_write_and_lets_reads_through() -> None:
    inner, held = Recording(), [False]
    fenced = FencedTransport(inner, lambda: held[0])
    fenced.get("/api/v1/pods/p")
    writes: list[Callable[[], RawObject]] = [
        lambda: fenced.create("/c", {"metadata": {}}),
        lambda: fenced.patch("/p", []),
        lambda: fenced.merge_patch("/p", {}),
        lambda: fenced.strategic_patch("/p", {}),
    ]
    for write in writes:
        with pytest.raises(NotLeader):
            write()
    assert [c[0] for c in inner.calls] == ["get"] and fenced.refused == 4
    held[0] = True
    fenced.merge_patch("/p", {"a": 1})
    assert inner.calls[-1] == ("merge_patch", "/p", {"a": 1})


def test_a_recorder_behind_the_fence_writes_no_event() -> None:
    inner = Recording()
    recorder = EventRecorder(FencedTransport(inner, lambda: False), "me")
    assert not recorder.emit(EVENT)
    assert inner.calls == [] and recorder.written == 0


REGARDING = Regarding("v1", "Pod", "ns", "pod-1", "uid-1")
EVENT = Event(REGARDING, "Warning", "SnapshotRestoreMissed", "Restore", "predicted a restore")


def test_an_earlier_leaders_event_is_left_alone() -> None:
    existing = EVENT.body("pod-1.x", "2026-12-01T10:00:00.000000Z", "old-leader")
    inner = Recording(existing)
    recorder = EventRecorder(inner, "new-leader")
    assert recorder.emit(EVENT)
    assert [c[0] for c in inner.calls] == ["create", "get"], "no series bump, no second event"
    assert recorder.already == 1 and recorder.written == 0


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"reportingController": "someone/else"}, id="another-controller"),
        pytest.param({"type": "Normal"}, id="a-harmless-normal-event"),
        pytest.param({"note": "all good"}, id="another-note"),
        pytest.param({"regarding": {"kind": "Pod", "name": "other"}}, id="about-another-object"),
    ],
)
def test_a_name_taken_by_someone_else_is_never_reused(change: RawObject) -> None:
    existing = EVENT.body("pod-1.x", "2026-12-01T10:00:00.000000Z", "x") | change
    assert not is_own(existing, EVENT)
    inner = Recording(existing)
    recorder = EventRecorder(inner, "me")
    assert recorder.emit(EVENT)
    create = [c for c in inner.calls if c[0] == "create"]
    assert len(create) == 2 and create[1][2]["metadata"]["generateName"].startswith("pod-1.")
    assert create[1][2]["type"] == "Warning"
    assert create[1][2]["reportingController"] == REPORTING_CONTROLLER
    assert not [c for c in inner.calls if c[0] == "merge_patch"], "its count is never bumped"
    assert recorder.renamed == 1 and recorder.written == 1
    recorder.emit(EVENT)  # a repeat in this process counts in the generated event's series
    assert inner.calls[-1][0] == "merge_patch" and inner.calls[-1][1].endswith("-x7k2p")
