"""``webhook.pod.restore``: candidate selection and unknowns, on hand-built snapshot indexes.

The real-API-server scenarios are in tests/cluster/test_snapshots.py; these rows pin the edge
cases a user test found: records whose origin was never known, ``namespace/name`` origins,
groups without snapshots, and ``ps-name`` pins across policies.
"""

from __future__ import annotations

import pytest

from webhook.kube.matching import Policy, compile_selector
from webhook.kube.snapshots import OriginRecord, SnapshotIndex, SnapshotView, snapshot_view
from webhook.pod.node_pins import node_selection
from webhook.pod.restore import PodFacts, predict

HASH = "v1:sha256:" + "a" * 64
POLICY = Policy(
    "llm-policy", "snap", compile_selector({"matchLabels": {"app": "llm"}}), "s",
    grouping_labels=("model",),
)  # fmt: skip


def snapshot(
    name: str,
    *,
    spec_hash: str | None = HASH,
    group: dict[str, str] | None = None,
    policy: str = "llm-policy",
    created: str = "2026-12-01T10:00:00Z",
) -> SnapshotView:
    """A Ready snapshot with an origin record (group ``model=m1`` unless given)."""
    group = group if group is not None else {"model": "m1"}
    origin = OriginRecord("origin", spec_hash, {}, {}, group)
    return SnapshotView("snap", name, policy, "origin", True, "Ready", created, None, origin)


def pod(labels: dict[str, str], annotations: dict[str, str] | None = None) -> PodFacts:
    return PodFacts(
        namespace="snap",
        labels=labels,
        annotations=annotations or {},
        policies=(POLICY,),
        spec_hash=HASH,
        fields={},
        selection=node_selection({}, "spec"),
    )


def run(facts: PodFacts, *views: SnapshotView) -> tuple[str, str | None, str]:
    result = predict(facts, SnapshotIndex.build(views), {}, rootfs_only=False)
    return result.outcome, result.snapshot, result.reason


def test_a_record_whose_origin_was_never_known_is_not_a_difference() -> None:
    unknown = snapshot("snap-unknown", spec_hash=None, group={})
    outcome, chosen, reason = run(pod({"app": "llm"}), unknown)
    assert (outcome, chosen) == ("none", None)
    assert "no known origin" in reason


def test_a_known_record_still_hits_beside_an_unknown_one() -> None:
    known = snapshot("snap-ok", created="2026-12-01T09:00:00Z")
    unknown = snapshot("snap-unknown", spec_hash=None)
    assert run(pod({"app": "llm", "model": "m1"}), known, unknown)[:2] == ("hit", "snap-ok")


def test_a_group_without_snapshots_is_named_in_the_reason() -> None:
    outcome, _, reason = run(pod({"app": "llm", "model": "m2"}), snapshot("snap-m1"))
    assert outcome == "none"
    assert "llm-policy group model=m2" in reason


@pytest.mark.parametrize(
    ("pinned", "expected"),
    [
        pytest.param("snap-other", "belongs to policy other-policy", id="pin-of-another-policy"),
        pytest.param("snap-gone", "does not exist", id="pin-to-a-missing-snapshot"),
    ],
)
def test_a_ps_name_pin_must_name_a_snapshot_of_the_pods_policy(pinned: str, expected: str) -> None:
    other = snapshot("snap-other", policy="other-policy")
    facts = pod({"app": "llm", "model": "m1"}, {"podsnapshot.gke.io/ps-name": pinned})
    outcome, chosen, reason = run(facts, other)
    assert (outcome, chosen) == ("none", None)
    assert expected in reason


@pytest.mark.parametrize(
    ("value", "origin"),
    [
        pytest.param("origin", "origin", id="plain-name"),
        pytest.param("snap/origin", "origin", id="own-namespace-prefix"),
        pytest.param("odd/origin", None, id="other-namespace-is-unknown"),
    ],
)
def test_origin_pod_annotation_forms(value: str, origin: str | None) -> None:
    obj = {
        "metadata": {
            "namespace": "snap",
            "name": "s",
            "annotations": {"podsnapshot.gke.io/origin-pod": value},
        },
        "spec": {"policyName": "llm-policy"},
    }
    view = snapshot_view(obj, origin_annotation="snapready.io/origin")
    assert view is not None and view.origin_pod == origin


def test_admission_reads_only_the_pods_own_group() -> None:
    """Issue 35: the prediction never walks the namespace's snapshots (``of_policy``); it reads
    the Ready snapshots of the pod's group, indexed when the cache changed."""

    class Guarded(SnapshotIndex):
        def of_policy(self, namespace: str, policy: str) -> tuple[SnapshotView, ...]:
            raise AssertionError("the request path iterated every snapshot of the policy")

    other = [snapshot(f"other-{i}", group={"model": "m2"}) for i in range(50)]
    mine = snapshot("mine", group={"model": "m1"}, created="2026-12-02T10:00:00Z")
    built = SnapshotIndex.build([*other, mine])
    index = Guarded(built.by_policy, built.by_name, built.ready)
    result = predict(pod({"app": "llm", "model": "m1"}), index, {}, rootfs_only=False)
    assert (result.outcome, result.snapshot, result.candidates) == ("hit", "mine", 1)
