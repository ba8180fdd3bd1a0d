"""``SnapshotIndex.updated``: one event changes the index exactly as a rebuild would, the Ready
snapshots by group (what admission reads) included."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from webhook.snapshots.index import ReadyGroups, SnapshotIndex
from webhook.snapshots.views import OriginRecord, SnapshotView

EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["ns-a", "ns-b"]),  # namespace
        st.sampled_from(["s1", "s2", "s3", "s4"]),  # name
        st.one_of(st.none(), st.sampled_from(["p", "q"])),  # policy; None: deleted
        st.sampled_from(["2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"]),  # created
        st.booleans(),  # ready
        st.sampled_from([None, "m1", "m2"]),  # recorded group model=...; None: no record
    ),
    max_size=25,
)


def view(*event: Any) -> SnapshotView:
    """(namespace, name, policy, created, ready, model) -> a view (model None: no record)."""
    namespace, name, policy, created, ready, model = event
    origin = None if model is None else OriginRecord("o", "h", group={"model": model})
    return SnapshotView(namespace, name, policy, None, ready, "", created, None, origin)


@given(EVENTS)
def test_property_updated_equals_build_after_every_event(events: list[Any]) -> None:
    """As the reflector applies watch events: added, modified (policy, time, readiness may
    change) and deleted snapshots, including deleting one that is not there."""
    items: dict[tuple[str, str], SnapshotView] = {}
    index = SnapshotIndex.build([])
    for namespace, name, policy, created, ready, model in events:
        old = items.get((namespace, name))
        new = None if policy is None else view(namespace, name, policy, created, ready, model)
        if new is None:
            items.pop((namespace, name), None)
        else:
            items[(namespace, name)] = new
        before = (dict(index.by_policy), dict(index.by_name))
        updated = index.updated(old, new)
        assert (index.by_policy, index.by_name) == before  # the published index is untouched
        index = updated
        assert index == SnapshotIndex.build(items.values())


def test_ready_groups_hold_the_ready_snapshots_by_recorded_group() -> None:
    views = [
        view("ns", "s4", "p", "2026-04-01T00:00:00Z", True, None),
        view("ns", "s3", "p", "2026-03-01T00:00:00Z", True, "m2"),
        view("ns", "s2", "p", "2026-02-01T00:00:00Z", False, "m1"),
        view("ns", "s1", "p", "2026-01-01T00:00:00Z", True, "m1"),
    ]
    index = SnapshotIndex.build(views)
    groups = index.ready_of("ns", "p")
    assert groups.ready == 3  # s2 is not Ready
    assert [v.name for v in groups.by_group[(("model", "m1"),)]] == ["s1"]
    # an unrecorded snapshot (group unknown) is every group's candidate, newest first
    assert [v.name for v in groups.candidates({"model": "m1"})] == ["s4", "s1"]
    assert [v.name for v in groups.candidates({"model": "m3"})] == ["s4"]
    assert index.ready_of("ns", "other") == ReadyGroups()
