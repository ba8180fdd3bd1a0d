"""``snapready explain`` judges a pod pinned to a ComputeClass as admission does.

Admission's prediction reads the cluster's ComputeClasses (the webhook's cache); ``explain``
reads them live (``snapshot_reader.read_compute_classes``). A review found ``explain`` said
``hit`` (candidate ``matches: true``) where admission said ``miss`` for a pod pinned to a class
that makes only G4 machines, with a snapshot taken on G2: GKE restores only onto the same
machine series (domain.md section 3).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tests.conftest import make_settings
from tests.pod.test_restore import HASH, POLICY, POOLS, V
from webhook.cli.explain import explain
from webhook.cluster.api.snapshot_reader import Live, read_compute_classes
from webhook.cluster.api.syncing import NotServed
from webhook.pod.node_pins import node_selection
from webhook.pod.restore import PodFacts, predict
from webhook.snapshots.index import SnapshotIndex
from webhook.snapshots.state import ComputeClassFacts
from webhook.snapshots.views import OriginRecord, SnapshotView

ORIGIN = OriginRecord("origin", HASH, {}, {"family": "g2", "arch": "amd64", "version": V}, {})
VIEW = SnapshotView(
    "snap", "snap-1", "llm-policy", "origin", True, "Ready", "2026-12-01T10:00:00Z", None, ORIGIN
)
SPEC = {
    "nodeSelector": {"cloud.google.com/compute-class": "rtx"},
    "containers": [{"name": "c", "image": "i"}],
}
CLASSES = {"rtx": ComputeClassFacts("rtx", frozenset({"g4"}), families_known=True)}


def test_explain_and_admission_agree_on_a_pod_pinned_to_a_compute_class() -> None:
    facts = PodFacts(
        namespace="snap",
        labels={"app": "llm"},
        annotations={},
        policies=(POLICY,),
        spec_hash=HASH,
        fields={},
        selection=node_selection(SPEC, "spec"),
    )
    admission = predict(
        facts, SnapshotIndex.build([VIEW]), POOLS, rootfs_only=False, compute_classes=CLASSES
    )
    assert (admission.outcome, admission.reason) == (
        "miss",
        "ComputeClass rtx makes g4, snapshot taken on g2",
    )
    live = Live(
        "snap",
        policies=[POLICY],
        snapshots=[VIEW],
        index=SnapshotIndex.build([VIEW]),
        pools=dict(POOLS),
        compute_classes=dict(CLASSES),
    )
    metadata = {"namespace": "snap", "name": "p", "labels": {"app": "llm"}}
    pod = {"metadata": {**metadata, "annotations": {"snapready.io/spec-hash": HASH}}, "spec": SPEC}
    document = explain(pod, live, make_settings(), now=datetime.now(UTC))
    assert document["prediction"]["outcome"] == "miss"
    assert document["prediction"]["reason"] == admission.reason
    (candidate,) = document["candidates"]
    assert candidate["matches"] is False
    assert [d["kind"] for d in candidate["differences"]] == ["family"]


class Listing:
    """A transport serving ComputeClasses, or refusing them."""

    def __init__(self, items: list[dict[str, Any]] | None) -> None:
        self.items = items

    def list(self, path: str, *, page_size: int) -> tuple[list[dict[str, Any]], str]:
        if self.items is None:
            raise NotServed(path)
        return self.items, "1"


def test_explain_reads_the_cluster_compute_classes() -> None:
    rtx = {"metadata": {"name": "rtx"}, "spec": {"priorities": [{"machineFamily": "g4"}]}}
    notes: list[str] = []
    found = read_compute_classes(Listing([rtx]), 100, notes)  # type: ignore[arg-type]
    assert found == {"rtx": ComputeClassFacts("rtx", frozenset({"g4"}), families_known=True)}
    refused = read_compute_classes(Listing(None), 100, notes)  # type: ignore[arg-type]
    assert refused is None and notes == []
