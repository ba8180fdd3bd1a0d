"""With ``lifecycle.prune: off`` the leader's pass does pod work only while a group is stale.

The refresh plan reads the pods a refresh may checkpoint from ``PodUses.ready`` (kept from the
pod cache's events); with pruning off nothing else reads pods, so a pass with nothing stale must
read none (and keep no marks), and one with stale groups must find the same refresh pods as with
pruning on. In-process, on ``bench.lifecycle``'s synthetic state (the worker's API calls go to a
transport that lists nothing; no cluster behaviour is asserted here).
"""

from __future__ import annotations

import threading
from typing import Any, cast

from bench.lifecycle import _Quiet, synthetic_state
from tests.conftest import make_settings
from tests.snapshots.test_prune_refresh import pod, snap
from tests.snapshots.test_prune_refresh import state as prune_state
from webhook.cluster.controllers.snapshot_lifecycle import LifecycleWorker
from webhook.snapshots.state import ClusterState


def worker(state: ClusterState, prune: str) -> LifecycleWorker:
    quiet = _Quiet()
    return LifecycleWorker(
        quiet, cast(Any, quiet), state=lambda: state,
        snapshot_api=lambda: "/apis/podsnapshot.gke.io/v1",
        is_leader=lambda: True, lock=threading.Lock(), on_change=lambda: None,
        settings=make_settings(lifecycle={"prune": prune, "refresh": "on"}),
    )  # fmt: skip


def test_nothing_stale_reads_no_pod_and_keeps_no_marks() -> None:
    off = worker(synthetic_state(2_000, 500, upgrade=False), "off")
    for _ in range(3):
        off.reconcile()
    assert off.refreshes == [] and off.pod_uses.full_reads == 0
    record = next(iter(off.state().pods.values()))
    off.pod_uses.changed(record)
    assert not off.pod_uses._marked, "no pass asks: the pod cache's events are not kept"


def test_stale_groups_find_the_pods_they_would_with_pruning_on() -> None:
    # A snapshot taken on a version no pool runs any more, and a Ready pod of its group on the
    # upgraded pool (``tests/snapshots/test_prune_refresh``'s cluster).
    current = prune_state([snap("old")], [pod("cold")])
    off, on = worker(current, "off"), worker(current, "dry-run")
    for _ in range(2):
        off.reconcile()
        on.reconcile()
    assert [r.pod for r in off.refreshes] == ["cold"]
    assert off.refreshes == on.refreshes
    assert off.pod_uses.full_reads == 1, "read once, then kept from the marks"
    assert off.prunable == {}
