"""SnapshotRecords (issue 31): the object snapready writes, what it believes, and the join.

A record is believed for the PodSnapshot whose uid it names, and only then; ``RecordJoin``
keeps the joined index equal to a full join after every PodSnapshot or record event.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from webhook.snapshots.index import SnapshotIndex
from webhook.snapshots.records import (
    RecordJoin,
    RecordView,
    join_all,
    joined,
    record_from_spec,
    record_object,
    record_view,
)
from webhook.snapshots.views import (
    ConfigRef,
    OriginRecord,
    SnapshotView,
    WorkloadRef,
    snapshot_view,
)

HASH = "v1:sha256:" + "ab" * 32
RECORD = OriginRecord(
    pod="origin-0",
    spec_hash=HASH,
    fields={"spec.containers[0].image": "1f2e3d4c"},
    node={"pool": "l4", "version": "1.35.3-gke.1234000", "gpuDriver": "latest"},
    group={"model": "m1"},
    workload=WorkloadRef("Deployment", "llm", ""),
    config=(ConfigRef("Secret", "token", "42", "2026-12-01T00:00:00Z"),),
    node_name="gke-l4-1",
    node_from="gke",
    triggered_by="trigger-1",
)
SNAPSHOT = SnapshotView("ns", "snap-0", "llm-policy", "origin-0", True, "", "2026", uid="uid-1")


def test_a_record_object_names_its_snapshot_and_is_owned_by_it() -> None:
    obj = record_object(RECORD, SNAPSHOT, "podsnapshot.gke.io/v1", converted=False)
    assert obj["apiVersion"] == "snapready.io/v1alpha1" and obj["kind"] == "SnapshotRecord"
    assert obj["metadata"]["name"] == "snap-0" and obj["metadata"]["namespace"] == "ns"
    assert obj["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "podsnapshot.gke.io/v1",
            "kind": "PodSnapshot",
            "name": "snap-0",
            "uid": "uid-1",
        }
    ]
    spec = obj["spec"]
    assert spec["snapshot"] == {"name": "snap-0", "uid": "uid-1", "policy": "llm-policy"}
    assert (spec["originPod"], spec["originNode"], spec["nodeFrom"]) == (
        "origin-0",
        "gke-l4-1",
        "gke",
    )
    assert spec["specHash"] == HASH and spec["convertedFrom"] is None
    assert spec["node"]["family"] is None  # unknown stays null, never guessed


def test_a_record_reads_back_as_written() -> None:
    obj = record_object(RECORD, SNAPSHOT, "podsnapshot.gke.io/v1", converted=True)
    obj["metadata"]["uid"] = "record-uid"
    view = record_view(obj)
    assert view is not None
    assert (view.namespace, view.name, view.snapshot_uid, view.converted) == (
        "ns",
        "snap-0",
        "uid-1",
        True,
    )
    expected_node = {k: RECORD.node.get(k) for k in view.record.node}
    assert view.record == OriginRecord(**{**RECORD.__dict__, "node": expected_node})


def test_a_record_without_a_snapshot_uid_is_not_kept() -> None:
    obj = record_object(RECORD, SNAPSHOT, "podsnapshot.gke.io/v1", converted=False)
    del obj["spec"]["snapshot"]["uid"]
    assert record_view(obj) is None
    assert record_from_spec({"fields": "junk", "node": 3, "config": [1, {"kind": "Pod"}]}) == (
        OriginRecord(
            pod=None,
            spec_hash=None,
            node=dict.fromkeys(
                ("pool", "family", "instanceType", "arch", "version", "accelerator", "gpuDriver")
            ),
            config=(),
        )
    )


def test_a_record_is_believed_only_for_the_snapshot_uid_it_names() -> None:
    mine = RecordView("ns", "snap-0", "uid-1", RECORD)
    leftover = RecordView("ns", "snap-0", "uid-of-a-deleted-snapshot", RECORD)
    assert joined(SNAPSHOT, mine).origin == RECORD
    assert joined(SNAPSHOT, leftover).origin is None
    assert joined(SNAPSHOT, None).origin is None
    assert [v.origin for v in join_all([SNAPSHOT], [leftover, mine])] == [RECORD]


def test_gke_writes_the_origin_facts_a_record_relies_on() -> None:
    """GKE's own metadata on a PodSnapshot (docs/gke-facts.md#section-10) is read into the view; a
    snapready.io/origin annotation is only flagged for conversion, never believed as is."""
    obj: dict[str, Any] = {
        "metadata": {
            "namespace": "ns",
            "name": "snap-0",
            "uid": "uid-1",
            "labels": {"gke-pod-snapshot-triggered-by": "trigger-1"},
            "annotations": {
                "podsnapshot.gke.io/origin-pod": "origin-0",
                "podsnapshot.gke.io/origin-node": "gke-l4-1",
                "snapready.io/origin": RECORD.to_json(),
            },
        },
        "spec": {"policyName": "llm-policy"},
    }
    view = snapshot_view(obj, origin_annotation="snapready.io/origin")
    assert view is not None
    assert (view.origin_pod, view.origin_node, view.triggered_by) == (
        "origin-0",
        "gke-l4-1",
        "trigger-1",
    )
    assert view.legacy and view.origin is None
    obj["metadata"]["annotations"]["podsnapshot.gke.io/origin-node"] = "../../x"
    again = snapshot_view(obj, origin_annotation="snapready.io/origin")
    assert again is not None and again.origin_node is None


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["snapshot", "record"]),
        st.sampled_from(["s1", "s2", "s3"]),
        st.one_of(st.none(), st.sampled_from(["u1", "u2"])),  # uid; None: deleted
        st.sampled_from(["p", "q"]),
    ),
    max_size=30,
)


@given(EVENTS, st.integers(min_value=0, max_value=30))
def test_property_the_incremental_join_equals_a_full_join(events: list[Any], relist: int) -> None:
    """As the two reflectors apply watch events (and, once, a relist of either), the joined
    index equals joining every current snapshot with its record from scratch."""
    snapshots: dict[str, SnapshotView] = {}
    records: dict[str, RecordView] = {}
    index = SnapshotIndex.build([])
    join = RecordJoin()
    join.refresh(index, records)
    for step, (kind, name, uid, policy) in enumerate(events):
        key = f"ns/{name}"
        if kind == "snapshot":
            old = snapshots.pop(key, None)
            new = None
            if uid is not None:
                new = snapshots[key] = SnapshotView(
                    "ns", name, policy, None, True, "", "t", uid=uid
                )
            index = index.updated(old, new)
        elif uid is None:
            records.pop(key, None)
        else:
            records[key] = RecordView("ns", name, uid, RECORD)
        if step == relist:
            join.touch_all()
        else:
            join.touch(key)
        result = join.refresh(index, records)
        expected = SnapshotIndex.build(join_all(snapshots.values(), records.values()))
        assert result == expected


def test_a_record_beyond_the_crd_bounds_is_written_with_those_parts_unknown() -> None:
    """The CRD bounds names at 253 characters, field digests at 8,192 and config at 2,048
    entries; ``record_spec`` never sends more (the API server would refuse the record with a
    422 the leader does not retry), it says "unknown" instead."""
    from webhook.snapshots.records import record_spec  # noqa: PLC0415

    odd = OriginRecord(
        pod="p",
        spec_hash=HASH,
        fields={f"spec.containers[{i}].image": "x" for i in range(8193)},
        workload=WorkloadRef("Kind", "n" * 254),
        config=tuple(ConfigRef("Secret", f"s{i}", None) for i in range(2049)),
        node={"pool": "p" * 254, "version": "1.35.3-gke.1"},
    )
    spec = record_spec(odd, SNAPSHOT, converted=False)
    assert spec["specHash"] == HASH and spec["fields"] == {}
    assert spec["workload"] is None and spec["config"] is None
    assert spec["node"]["pool"] is None and spec["node"]["version"] == "1.35.3-gke.1"
    fine = record_spec(RECORD, SNAPSHOT, converted=False)
    assert fine["workload"] == {"kind": "Deployment", "name": "llm", "uid": ""}
    assert len(fine["config"]) == 1 and fine["fields"] == dict(RECORD.fields)
