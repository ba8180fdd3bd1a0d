"""The leader's Events are rate-limited per namespace within a limit for the whole process.

One global token bucket let one namespace's flood (a tenant's pods failing to restore, each a
Warning) spend every token, so another namespace's Warnings were dropped until it refilled. Each
namespace now has its own bucket, asked first, inside the process's (``cluster.api.events``).
"""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from webhook.base.types import RawObject
from webhook.cluster.api.events import (
    DROP_LOG_SECONDS,
    EVENT_RESULTS,
    MAX_NAMESPACE_BUCKETS,
    Event,
    EventRecorder,
    Regarding,
    event_name,
)
from webhook.cluster.api.syncing import NotServed, TransportError
from webhook.server.collectors import EventCollector


class Api:
    """A transport that creates every event (or refuses every write with ``fail``)."""

    def __init__(self, *, fail: bool = False) -> None:
        self.created: list[RawObject] = []
        self.fail = fail

    def create(self, path: str, body: RawObject) -> RawObject:
        if self.fail:
            raise TransportError("503 from the API server")
        self.created.append(body)
        return body

    def get(self, path: str) -> RawObject:
        raise AssertionError("no conflict here")

    def merge_patch(self, path: str, patch: RawObject, *, field_manager: str) -> RawObject:
        raise AssertionError("every event here is new")


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def warning(namespace: str, pod: str) -> Event:
    """A distinct occurrence (its own pod), so none aggregates into another's series."""
    regarding = Regarding("v1", "Pod", namespace, pod, f"uid-{pod}")
    return Event(regarding, "Warning", "SnapshotRestoreMissed", "Restore", f"{pod} cold-started")


def namespaces_of(api: Api) -> dict[str, int]:
    counts: dict[str, int] = {}
    for body in api.created:
        namespace = body["metadata"]["namespace"]
        counts[namespace] = counts.get(namespace, 0) + 1
    return counts


def recorder(api: Any, clock: Clock) -> EventRecorder:
    return EventRecorder(api, "leader-0", clock=clock)  # the chart's defaults


def test_one_namespaces_flood_leaves_the_others_their_events() -> None:
    api, clock = Api(), Clock()
    events = recorder(api, clock)
    # "team-a" sorts first: a pass reporting namespaces in order reaches it first.
    flood = [events.emit(warning("team-a", f"pod-{n}")) for n in range(1000)]
    assert sum(flood) == events.burst == 25
    others = [events.emit(warning(f"team-{x}", f"pod-{n}")) for x in "bcd" for n in range(20)]
    assert all(others), "every other namespace's Warnings are written"
    assert namespaces_of(api) == {"team-a": 25, "team-b": 20, "team-c": 20, "team-d": 20}
    assert events.results == {"written": 85, "already": 0, "dropped": 975, "failed": 0}


def test_a_namespace_refills_at_its_own_rate() -> None:
    api, clock = Api(), Clock()
    events = recorder(api, clock)
    for n in range(100):
        events.emit(warning("team-a", f"pod-{n}"))
    clock.now += 10  # 0.5 a second: 5 more
    assert sum(events.emit(warning("team-a", f"later-{n}")) for n in range(100)) == 5


def test_the_process_bound_holds_across_namespaces() -> None:
    api, clock = Api(), Clock()
    events = recorder(api, clock)
    # 20 namespaces, each within its own burst: the process's 100 at once bound them together.
    written = sum(
        events.emit(warning(f"ns-{x:02d}", f"pod-{n}")) for x in range(20) for n in range(10)
    )
    assert written == 100 and events.dropped == 100
    clock.now += 2  # 5 a second for the process
    assert sum(events.emit(warning(f"ns-{x:02d}", "late")) for x in range(20)) == 10


def test_a_refused_namespace_does_not_drain_the_process_bucket() -> None:
    api, clock = Api(), Clock()
    events = recorder(api, clock)
    for n in range(10_000):
        events.emit(warning("team-a", f"pod-{n}"))
    # team-a took 25 of the process's 100; its 9,975 refused events took none.
    written = sum(events.emit(warning(f"ns-{x}", f"pod-{n}")) for x in range(10) for n in range(10))
    assert written == 75


def test_namespace_buckets_stay_bounded() -> None:
    api, clock = Api(), Clock()
    events = EventRecorder(api, "leader-0", clock=clock, total_burst=10**6)
    for x in range(MAX_NAMESPACE_BUCKETS + 50):
        events.emit(warning(f"ns-{x}", "pod"))
    assert len(events._buckets) == MAX_NAMESPACE_BUCKETS
    assert events.written == MAX_NAMESPACE_BUCKETS + 50


def test_failed_writes_are_counted_and_exported() -> None:
    clock = Clock()
    events = recorder(Api(fail=True), clock)
    assert not events.emit(warning("team-a", "pod-0"))
    assert events.results["failed"] == 1 and events.written == 0
    [family] = EventCollector(lambda: events.results).collect()
    assert family.name == "snapready_events"
    samples = {s.labels["result"]: s.value for s in family.samples}
    assert set(samples) == set(EVENT_RESULTS)
    assert samples["failed"] == 1.0 and samples["dropped"] == 0.0


def test_a_flood_is_one_log_line_not_one_per_event(caplog: pytest.LogCaptureFixture) -> None:
    api, clock = Api(), Clock()
    events = recorder(api, clock)
    with caplog.at_level(logging.WARNING, logger="snapready.events"):
        for n in range(1000):
            events.emit(warning("team-a", f"pod-{n}"))
        clock.now += DROP_LOG_SECONDS  # 5 tokens back: later-0 to later-4 are written
        for n in range(10):
            events.emit(warning("team-a", f"later-{n}"))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert lines[0].startswith("1 event(s) dropped") and "team-a/pod-25 (dropped)" in lines[0]
    # The next Event after 10 s, written or not, says how many were dropped since: the last
    # drops of a flood that stopped are not left unsaid.
    assert lines[1].startswith("974 event(s) dropped") and "team-a/later-0 (written)" in lines[1]
    assert events.dropped == 975 + 5


def test_a_quiet_namespace_keeps_its_tokens_while_the_process_refuses() -> None:
    api, clock = Api(), Clock()
    events = recorder(api, clock)
    for x in range(4):  # four namespaces spend the process's 100 at once
        for n in range(25):
            assert events.emit(warning(f"flood-{x}", f"pod-{n}"))
    # team-b asks 30 times while the process is empty: dropped, but its own 25 are still there.
    assert not any(events.emit(warning("team-b", f"early-{n}")) for n in range(30))
    clock.now += 5  # the process refills 25; team-b's bucket was full all along
    assert sum(events.emit(warning("team-b", f"pod-{n}")) for n in range(30)) == 25


def test_an_expired_event_is_created_again() -> None:
    # The API server deletes Events after --event-ttl (1 h by default): the next repeat's
    # series update gets a 404 and must create a new Event, not fail from then on.
    class Expiring(Api):
        def __init__(self) -> None:
            super().__init__()
            self.patches = 0

        def merge_patch(self, path: str, patch: RawObject, *, field_manager: str) -> RawObject:
            self.patches += 1
            if self.patches > 1:
                raise NotServed(path)
            return patch

    api, clock = Expiring(), Clock()
    events = recorder(api, clock)
    event = warning("team-a", "pod-0")
    assert events.emit(event) and events.emit(event)  # created, then counted in its series
    assert len(api.created) == 1
    clock.now += 3600
    assert events.emit(event)  # expired: created again under the same name
    assert [b["metadata"]["name"] for b in api.created] == [api.created[0]["metadata"]["name"]] * 2
    assert events.results["failed"] == 0


def test_a_full_bucket_is_forgotten_before_a_recent_one() -> None:
    api, clock = Api(), Clock()
    events = EventRecorder(api, "leader-0", clock=clock, total_burst=10**6, total_per_second=1e6)
    for n in range(25):
        events.emit(warning("ns-0", f"pod-{n}"))  # ns-0: empty, the least recently used
    clock.now += 10  # ns-0 back to 5 tokens
    for x in range(1, MAX_NAMESPACE_BUCKETS):
        events.emit(warning(f"ns-{x}", "pod"))  # 24 tokens left each
    clock.now += 3  # every other bucket is full again; ns-0 is not (6.5)
    events.emit(warning("ns-new", "pod"))
    assert "ns-0" in events._buckets, "forgetting ns-0 would hand it a full bucket"
    assert "ns-1" not in events._buckets and "ns-new" in events._buckets


DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@pytest.mark.parametrize("length", [5, 236, 237, 251, 252, 253])
def test_event_names_are_valid_and_distinct_for_long_pod_names(length: int) -> None:
    # A pod name may be 253 characters: cut to leave the key, never ending in "." or "-".
    name = ("a" * 234 + "-." + "b" * 17)[:length] if length > 5 else "pod-1"
    first = Event(Regarding("v1", "Pod", "ns", name), "Warning", "A", "Restore", "one")
    second = Event(Regarding("v1", "Pod", "ns", name), "Warning", "B", "Restore", "two")
    names = {event_name(first), event_name(second)}
    assert len(names) == 2, "two occurrences of one pod: two names"
    for found in names:
        assert len(found) <= 253 and DNS_SUBDOMAIN.match(found), found
