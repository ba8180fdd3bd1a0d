"""``SnapshotIndex.updated``: one event changes the index exactly as a rebuild would."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from webhook.kube.snapshots import SnapshotIndex, SnapshotView

EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["ns-a", "ns-b"]),  # namespace
        st.sampled_from(["s1", "s2", "s3", "s4"]),  # name
        st.one_of(st.none(), st.sampled_from(["p", "q"])),  # policy; None: deleted
        st.sampled_from(["2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"]),  # created
        st.booleans(),  # ready
    ),
    max_size=25,
)


def view(namespace: str, name: str, policy: str, created: str, ready: bool) -> SnapshotView:
    return SnapshotView(namespace, name, policy, None, ready, "", created)


@given(EVENTS)
def test_property_updated_equals_build_after_every_event(events: list[Any]) -> None:
    """As the reflector applies watch events: added, modified (policy, time, readiness may
    change) and deleted snapshots, including deleting one that is not there."""
    items: dict[tuple[str, str], SnapshotView] = {}
    index = SnapshotIndex.build([])
    for namespace, name, policy, created, ready in events:
        old = items.get((namespace, name))
        new = None if policy is None else view(namespace, name, policy, created, ready)
        if new is None:
            items.pop((namespace, name), None)
        else:
            items[(namespace, name)] = new
        before = (dict(index.by_policy), dict(index.by_name))
        updated = index.updated(old, new)
        assert (index.by_policy, index.by_name) == before  # the published index is untouched
        index = updated
        assert index == SnapshotIndex.build(items.values())
