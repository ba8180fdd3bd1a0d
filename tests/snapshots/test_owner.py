"""A pod's owning workload (``workload_of``) and its place in the origin record (issue 23)."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.snapshots.views import OriginRecord, WorkloadRef, workload_of


def owned(kind: str, name: str, labels: dict[str, str] | None = None, **ref: Any) -> Any:
    owner = {"apiVersion": "x/v1", "kind": kind, "name": name, "uid": "u-1", "controller": True}
    return {"labels": labels or {}, "ownerReferences": [{**owner, **ref}]}


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        pytest.param(
            owned("ReplicaSet", "decode-5d8f7c9b4", {"pod-template-hash": "5d8f7c9b4"}),
            WorkloadRef("Deployment", "decode"),
            id="replicaset-of-a-deployment-is-the-deployment",
        ),
        pytest.param(
            owned("ReplicaSet", "standalone"),
            WorkloadRef("ReplicaSet", "standalone", "u-1"),
            id="bare-replicaset-without-template-hash",
        ),
        pytest.param(
            owned("Sandbox", "hermes-alice"),
            WorkloadRef("Sandbox", "hermes-alice", "u-1"),
            id="agent-sandbox-sandbox",
        ),
        pytest.param(
            owned("StatefulSet", "db"), WorkloadRef("StatefulSet", "db", "u-1"), id="statefulset"
        ),
        pytest.param(owned("Job", "j", controller=False), None, id="no-controller-reference"),
        pytest.param({"name": "bare"}, None, id="bare-pod"),
    ],
)
def test_workload_of(metadata: Any, expected: WorkloadRef | None) -> None:
    assert workload_of(metadata) == expected


def test_origin_record_round_trips_its_workload() -> None:
    record = OriginRecord("p", "v1:sha256:" + "0" * 64, workload=WorkloadRef("Sandbox", "a", "u"))
    parsed = OriginRecord.from_json(record.to_json())
    assert parsed is not None
    assert parsed.workload == WorkloadRef("Sandbox", "a", "u")


def test_a_record_written_before_the_workload_field_reads_as_unknown() -> None:
    old = '{"v":1,"pod":"p","specHash":null,"fields":{},"node":{},"group":{}}'
    record = OriginRecord.from_json(old)
    assert record is not None and record.workload is None
