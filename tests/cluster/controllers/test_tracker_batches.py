"""``RestoreTracker`` passes over batches of pod events (its ``min_interval``): a pod that
arrived and left the pod cache within one batch is still looked at.

The pod cache watches only ``<prefix>selected=true`` pods, so a pod whose label is removed
leaves it as if deleted (``labels.LabelGuard`` then looks it up and writes the label back). A
pass that sees such a pod in its batch of new pods, already missing from the cache, took it for
"not cached yet" and never looked at it again until the next full pass (30 s): with passes
batched, ``test_trust``'s relabel test timed out 2 times in 3. No API server is needed to show
the order of passes, so this one uses a recording transport; ``test_trust`` runs the same path
against the real API server.
"""

from __future__ import annotations

import threading
from typing import Any

from webhook.cluster.api.events import EventRecorder
from webhook.cluster.api.syncing import NotServed
from webhook.cluster.controllers.restores.tracker import RestoreTracker
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.state import ClusterState


class Pods:
    """A pod API where every pod is gone (404), recording each GET."""

    def __init__(self) -> None:
        self.gets: list[str] = []

    def get(self, path: str) -> Any:
        self.gets.append(path)
        raise NotServed(path)

    def merge_patch(self, path: str, patch: Any, *, field_manager: str) -> Any:
        raise AssertionError("nothing to relabel: the pod is gone")

    def strategic_patch(self, path: str, patch: Any, *, field_manager: str = "snapready") -> Any:
        raise AssertionError("no readiness gate here")


def test_a_pod_that_left_the_cache_in_the_batch_it_arrived_in_is_looked_up_next_pass() -> None:
    state = ClusterState(synced=True)
    pods = Pods()
    tracker = RestoreTracker(
        EventRecorder(transport=None, instance="test"),  # type: ignore[arg-type]  # unused
        state=lambda: state,
        is_leader=lambda: True,
        lock=threading.Lock(),
        on_change=lambda: None,
        pods=pods,
    )
    tracker.reconcile()  # takes over: nothing pending yet
    record = PodRecord("ns", "p", uid="u1", labels={"snapready.io/selected": "true"})
    tracker.observe(record)  # the pod arrives in the cache...
    tracker.gone(record)  # ...and leaves it (label removed) before the next pass
    tracker.reconcile()  # new and already missing: maybe not cached yet, so not looked up
    assert pods.gets == []
    assert "ns/p" in tracker._pending
    tracker.reconcile()  # the next pass looks it up: gone (404), no longer pending
    assert pods.gets == ["/api/v1/namespaces/ns/pods/p"]
    assert "ns/p" not in tracker._pending
