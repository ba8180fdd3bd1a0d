"""The leader says so when the API server drops a field of the SnapshotRecords it writes.

``helm upgrade`` applies no CRD: an upgrade that skips ``kubectl apply -f chart/crds/`` leaves
the previous SnapshotRecord schema, and a structural schema prunes the fields it does not know
(``spec.restoreBlocker`` here), silently: every prediction that needs the field is then made as
if nothing stopped the restore (a trial showed it on the real API server with the previous
CRD). The transport answers a create as the API server does under that older schema: the object
stored, without the field. The real-API-server path of the records is tests/cluster/controllers/
test_records.py (the shared control plane's CRD cannot be swapped there: other tests run
beside it).
"""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest

from tests.rules.test_facts import policy
from webhook.cluster.api.syncing import NotServed
from webhook.cluster.controllers.origins.recorder import OriginRecorder
from webhook.kube.matching import PolicyIndex
from webhook.snapshots.index import SnapshotIndex
from webhook.snapshots.state import ClusterState
from webhook.snapshots.views import SnapshotView

CACHE = {"name": "cache", "mountPath": "/cache"}
ORIGIN = {
    "metadata": {"name": "origin", "namespace": "snap", "labels": {"app": "llm"}},
    "spec": {
        "runtimeClassName": "gvisor",
        "initContainers": [{"name": "fetch", "image": "x", "volumeMounts": [CACHE]}],
        "containers": [{"name": "app", "image": "y", "volumeMounts": [CACHE]}],
        "volumes": [{"name": "cache", "emptyDir": {}}],
    },
}


class OlderSchema:
    """GETs: the origin pod, no record yet (404). A create stores the body without the keys
    of ``unknown`` (``spec``), as a structural schema that lacks them does."""

    def __init__(self, unknown: tuple[str, ...]) -> None:
        self.unknown, self.created = unknown, 0

    def get(self, path: str) -> dict[str, Any]:
        if path.endswith("/pods/origin"):
            return copy.deepcopy(ORIGIN)
        raise NotServed(path)

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.created += 1
        stored = copy.deepcopy(body)
        for key in self.unknown:
            stored["spec"].pop(key, None)
        return stored

    def delete(self, path: str, *, uid: str = "") -> dict[str, Any]:
        return {}


def record_once(transport: OlderSchema) -> OriginRecorder:
    view = SnapshotView("snap", "snap-1", "llm-policy", "origin", True, "Ready",
                        "2026-12-01T10:00:00Z", None, None, uid="uid-1")  # fmt: skip
    state = ClusterState(
        policies=PolicyIndex.build((policy(),)),
        synced=True,
        snapshots=SnapshotIndex.build([view]),
        snapshots_known=True,
    )
    recorder = OriginRecorder(
        transport,
        state=lambda: state,
        snapshot_api=lambda: "/apis/podsnapshot.gke.io/v1",
        records_served=lambda: True,
        is_leader=lambda: True,
        prefix="snapready.io/",
        lock=threading.Lock(),
        on_change=lambda: None,
    )
    assert recorder.record_missing() == 1
    return recorder


def test_a_record_stored_without_restore_blocker_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorder = record_once(OlderSchema(("restoreBlocker",)))
    assert recorder.dropped == ("restoreBlocker",)
    assert "drops spec.restoreBlocker: apply chart/crds/" in recorder.status
    assert any(
        r.levelname == "ERROR" and "spec.restoreBlocker" in r.getMessage() for r in caplog.records
    )


def test_a_record_stored_whole_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    recorder = record_once(OlderSchema(()))
    assert recorder.dropped == ()
    assert recorder.status == "1 written"
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
