"""Issue 27: series labels are bounded by the live policies, never by what objects say."""

from __future__ import annotations

from webhook.kube.matching import Policy, PolicyIndex, compile_selector
from webhook.server.collectors import SnapshotCollector
from webhook.snapshots.index import SnapshotIndex
from webhook.snapshots.selection import OTHER
from webhook.snapshots.state import ClusterState
from webhook.snapshots.views import SnapshotView


def test_snapshots_of_made_up_policies_share_one_series() -> None:
    live = Policy("llm", "ml", compile_selector({}), "storage")
    views = [SnapshotView("ml", "real", "llm", None, True, "", "2026-12-01T10:00:00Z")]
    views += [
        SnapshotView("ml", f"forged-{i}", f"p{i}-" + "x" * 1000, None, True, "", "")
        for i in range(50)
    ]
    state = ClusterState(
        policies=PolicyIndex.build([live]),
        snapshots=SnapshotIndex.build(views),
        snapshots_known=True,
    )
    [family] = list(SnapshotCollector(lambda: state).collect())
    samples = {
        (s.labels["namespace"], s.labels["policy"], s.labels["state"]): s.value
        for s in family.samples
    }
    assert samples == {("ml", "llm", "ready"): 1.0, (OTHER, OTHER, "ready"): 50.0}
