"""``snapshots.selection``: the policy of a pod comes from the live policies; labels are bounded."""

from __future__ import annotations

import pytest

from webhook.kube.matching import Policy, PolicyIndex, compile_selector
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.selection import OTHER, believed, bounded_labels, selecting_policies


def policy(name: str, namespace: str = "ml", **labels: str) -> Policy:
    return Policy(name, namespace, compile_selector({"matchLabels": labels}), "storage")


INDEX = PolicyIndex.build(
    [policy("llm", app="llm"), policy("all-gpu", tier="gpu"), policy("other", "ns2", app="llm")]
)


@pytest.mark.parametrize(
    ("labels", "namespace", "expected"),
    [
        pytest.param({"app": "llm"}, "ml", "llm", id="one-policy-selects"),
        pytest.param({"app": "llm", "tier": "gpu"}, "ml", "all-gpu,llm", id="two-sorted"),
        pytest.param({"app": "ghost"}, "ml", None, id="no-policy-selects-the-labels"),
        pytest.param({"app": "llm"}, "empty", None, id="namespace-without-policies"),
    ],
)
def test_selecting_policies(labels: dict[str, str], namespace: str, expected: str | None) -> None:
    record = PodRecord(namespace, "p", labels=labels, policy="forged")
    assert selecting_policies(record, INDEX) == expected


def test_believed_replaces_the_pods_own_policy_annotation() -> None:
    record = PodRecord("ml", "p", labels={"app": "llm"}, policy="llm-forged")
    assert believed(record, INDEX) == PodRecord("ml", "p", labels={"app": "llm"}, policy="llm")
    same = PodRecord("ml", "p", labels={"app": "llm"}, policy="llm")
    assert believed(same, INDEX) is same
    assert believed(PodRecord("ml", "ghost", policy="llm"), INDEX) is None


@pytest.mark.parametrize(
    ("namespace", "name", "expected"),
    [
        pytest.param("ml", "llm", ("ml", "llm"), id="live-policy-kept"),
        pytest.param("ml", "all-gpu,llm", ("ml", "all-gpu,llm"), id="live-set-kept"),
        pytest.param("ml", "x" * 100_000, (OTHER, OTHER), id="made-up-policy"),
        pytest.param("ml", "llm,made-up", (OTHER, OTHER), id="one-made-up-in-a-set"),
        pytest.param("ns2", "llm", (OTHER, OTHER), id="policy-of-another-namespace"),
        pytest.param("ml", "", (OTHER, OTHER), id="empty"),
    ],
)
def test_bounded_labels(namespace: str, name: str, expected: tuple[str, str]) -> None:
    assert bounded_labels(namespace, name, INDEX) == expected
