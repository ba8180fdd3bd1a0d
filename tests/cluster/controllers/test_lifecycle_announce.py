"""The leader's ``SnapshotsPrunable`` Events (``lifecycle.prune: dry-run``): one per policy
and set of prunable snapshots, in every namespace, even when two namespaces' policies and
snapshots have the same names (a hostile trial found the second namespace's Event dropped:
the de-duplication key was the note, which does not name the namespace)."""

from __future__ import annotations

import threading
from typing import Any, cast

from webhook.base.config import Settings
from webhook.cluster.controllers.snapshot_lifecycle import LifecycleWorker
from webhook.kube.matching import Policy, PolicyIndex, compile_selector
from webhook.snapshots.index import SnapshotIndex
from webhook.snapshots.state import ClusterState, NodePoolFacts
from webhook.snapshots.views import OriginRecord, SnapshotView

NAMESPACES = ("team-a", "team-b")
OLD, NEW = "1.35.3-gke.1", "1.35.4-gke.2"
NOW = 1_800_000_000.0  # 2027-01-15, days after the snapshots: their grace has passed


class Recorder:
    """The Event recorder and the transport: Events kept, nothing listed or written."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def emit(self, event: Any) -> bool:
        self.events.append(event)
        return True

    def list(self, path: str, **options: Any) -> tuple[list[Any], None]:
        return [], None


def snapshot(namespace: str) -> SnapshotView:
    """A Ready snapshot taken on a version no node pool runs any more (unrunnable)."""
    origin = OriginRecord(
        pod="origin", spec_hash="v1:sha256:" + "a" * 64,
        node={"pool": "l4", "version": OLD}, group={},
    )  # fmt: skip
    return SnapshotView(
        namespace, "snap-1", "llm", "origin", True, "", "2026-12-01T10:00:00Z",
        origin=origin, uid=f"{namespace}-uid",
    )  # fmt: skip


def test_each_namespace_gets_its_event_once_per_set() -> None:
    selector = compile_selector({"matchLabels": {"app": "llm"}})
    state = ClusterState(
        policies=PolicyIndex.build(Policy("llm", ns, selector, "storage") for ns in NAMESPACES),
        node_pools={"l4": NodePoolFacts("l4", 1, versions=frozenset({NEW}))},
        snapshots=SnapshotIndex.build(snapshot(ns) for ns in NAMESPACES),
        snapshots_known=True, pods_known=True, synced=True,
    )  # fmt: skip
    recorder = Recorder()
    clock = [NOW]
    worker = LifecycleWorker(
        cast(Any, recorder), cast(Any, recorder), state=lambda: state,
        snapshot_api=lambda: "/apis/podsnapshot.gke.io/v1", is_leader=lambda: True,
        lock=threading.Lock(), on_change=lambda: None, settings=Settings(),
        clock=lambda: clock[0],
    )  # fmt: skip
    worker.reconcile()  # the unrunnable clock starts
    clock[0] += 2 * 24 * 3600  # past the grace
    worker.reconcile()
    worker.reconcile()
    prunable = [e for e in recorder.events if e.reason == "SnapshotsPrunable"]
    assert sorted(e.regarding.namespace for e in prunable) == list(NAMESPACES)
    assert prunable[0].note == prunable[1].note, "the same note in both namespaces"
    assert len(worker._announced) == 2, "only the sets of the last pass are remembered"
