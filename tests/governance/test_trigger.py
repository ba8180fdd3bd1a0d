"""``manual-trigger``: a PodSnapshotManualTrigger's target must be a Running pod of a manual policy.

Cluster state is built by hand as the pod cache delivers it (``PodRecord`` of stamped pods); the
envtest checks (``tests/e2e/test_field_rules.py``) run the same through a real API server.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import make_settings
from webhook.admission.engine import Engine, admit
from webhook.admission.governance import Governance
from webhook.kube.matching import Policy, PolicyIndex
from webhook.kube.review import AdmissionRequest, AdmissionReviewRequest
from webhook.server.logs import admission_fields
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.state import ClusterState, parse_policy
from webhook.snapshots.views import WorkloadRef

NS = "sandboxes"


def policy(name: str, trigger: str, app: str = "sandbox") -> Policy:
    return parse_policy(
        {
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "selector": {"matchLabels": {"app": app}},
                "storageConfigName": "s",
                "triggerConfig": {"type": trigger},
            },
        },
        prefix="snapready.io/",
    )


def pod(name: str, phase: str = "Running", **labels: str) -> PodRecord:
    return PodRecord(NS, name, labels={"app": "sandbox", **labels}, phase=phase)


def engine(
    pods: list[PodRecord],
    policies: tuple[Policy, ...] = (policy("manual", "manual"),),
    *,
    known: bool = True,
    settings: dict[str, Any] | None = None,
) -> Engine:
    state = ClusterState(
        policies=PolicyIndex.build(policies),
        pods={f"{p.namespace}/{p.name}": p for p in pods},
        pods_known=known,
        synced=True,
    )
    return Engine(
        settings=make_settings(**(settings or {})),
        state=lambda: state,
        governance=Governance(None),
    )


def trigger(target: str | None, operation: str = "CREATE") -> AdmissionRequest:
    spec = {} if target is None else {"targetPod": target}
    return AdmissionRequest.model_validate(
        {
            "uid": "u-1",
            "kind": {
                "group": "podsnapshot.gke.io",
                "version": "v1",
                "kind": "PodSnapshotManualTrigger",
            },
            "namespace": NS,
            "name": "snap-1",
            "operation": operation,
            "userInfo": {"username": "alice@example.com"},
            "object": {
                "apiVersion": "podsnapshot.gke.io/v1",
                "kind": "PodSnapshotManualTrigger",
                "metadata": {"name": "snap-1", "namespace": NS},
                "spec": spec,
            },
        }
    )


@pytest.mark.parametrize(
    ("target", "pods", "policies", "needle"),
    [
        pytest.param("ghost", [pod("s-1")], None, "does not exist or no", id="missing-pod"),
        pytest.param("s-1", [pod("s-1", "Pending")], None, "Pending, not Running", id="pending"),
        pytest.param("s-1", [pod("s-1", "Succeeded")], None, "not Running", id="finished"),
        pytest.param(
            "s-1",
            [pod("s-1")],
            (policy("auto", "workload"),),
            "only auto (workload trigger)",
            id="selected-only-by-a-workload-policy",
        ),
        pytest.param(
            "s-1",
            [pod("s-1", app="other")],
            None,
            "selected by no manual PodSnapshotPolicy",
            id="labels-selected-by-no-policy-now",
        ),
        pytest.param(None, [], None, "spec.targetPod is required", id="no-target"),
    ],
)
def test_trigger_on_the_wrong_pod_is_denied(
    target: str | None, pods: list[PodRecord], policies: tuple[Policy, ...] | None, needle: str
) -> None:
    decision = admit(trigger(target), "validate", engine(pods, *([policies] if policies else [])))
    assert not decision.allowed
    assert "[manual-trigger] spec.targetPod" in (decision.message or "")
    assert needle in (decision.message or "")


def test_trigger_on_a_running_pod_of_a_manual_policy_is_admitted() -> None:
    decision = admit(trigger("s-1"), "validate", engine([pod("s-1")]))
    assert decision.allowed and not decision.warnings
    assert decision.audit["user"] == "alice@example.com"


def test_source_label_is_required_only_when_configured() -> None:
    strict = {"rules": {"manual_trigger": {"require_source_label": True}}}
    refused = admit(trigger("s-1"), "validate", engine([pod("s-1")], settings=strict))
    assert not refused.allowed
    assert 'snapready.io/snapshot-source: "true"' in (refused.message or "")
    marked = pod("s-1", **{"snapready.io/snapshot-source": "true"})
    assert admit(trigger("s-1"), "validate", engine([marked], settings=strict)).allowed


def test_without_a_pod_cache_the_trigger_is_warned_not_refused() -> None:
    decision = admit(trigger("ghost"), "validate", engine([], known=False))
    assert decision.allowed
    assert any("not verified" in w for w in decision.warnings)


def test_updates_are_not_judged() -> None:
    assert admit(trigger("ghost", "UPDATE"), "validate", engine([])).allowed


def test_warn_mode_namespace_admits_with_the_reason() -> None:
    settings = {"enforcement": "warn"}
    decision = admit(trigger("ghost"), "validate", engine([], settings=settings))
    assert decision.allowed
    assert any("[manual-trigger]" in w for w in decision.warnings)


def test_the_admission_log_line_names_who_created_the_trigger() -> None:
    request = trigger("ghost")
    review = AdmissionReviewRequest.model_validate(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    )
    decision = admit(request, "validate", engine([]))
    fields = admission_fields("validate", review, decision, 0.001)
    assert fields["user"] == "alice@example.com"
    assert fields["decision"] == "denied"


# ---- an ungrouped policy over several workloads (cross-workload at policy admission)


def policy_review(grouped: bool) -> AdmissionRequest:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": "sandbox"}},
        "storageConfigName": "s",
        "triggerConfig": {"type": "manual"},
        "retentionConfig": {"lastAccessTimeout": "7d"},
    }
    if grouped:
        spec["snapshotGroupingRules"] = {
            "groupByLabelValue": {"labels": ["agents.x-k8s.io/sandbox-name-hash"]}
        }
    return AdmissionRequest.model_validate(
        {
            "uid": "u-2",
            "kind": {"group": "podsnapshot.gke.io", "version": "v1", "kind": "PodSnapshotPolicy"},
            "namespace": NS,
            "name": "sandboxes",
            "operation": "CREATE",
            "object": {
                "apiVersion": "podsnapshot.gke.io/v1",
                "kind": "PodSnapshotPolicy",
                "metadata": {"name": "sandboxes", "namespace": NS},
                "spec": spec,
            },
        }
    )


def tenants() -> list[PodRecord]:
    return [
        PodRecord(
            NS, n, labels={"app": "sandbox"}, owner=WorkloadRef("Sandbox", n), phase="Running"
        )
        for n in ("alice", "bob")
    ]


def test_ungrouped_policy_over_two_tenants_is_warned() -> None:
    decision = admit(policy_review(False), "validate", engine(tenants(), ()))
    warnings = [w for w in decision.warnings if w.startswith("[cross-workload]")]
    assert len(warnings) == 1  # (the storage config "s" is missing here: denied for that)
    assert "Sandbox alice" in warnings[0] and "Sandbox bob" in warnings[0]


def test_grouped_policy_over_two_tenants_is_not_warned() -> None:
    decision = admit(policy_review(True), "validate", engine(tenants(), ()))
    assert not [w for w in decision.warnings if "cross-workload" in w]


def test_one_workload_under_an_ungrouped_policy_is_not_warned() -> None:
    decision = admit(policy_review(False), "validate", engine(tenants()[:1], ()))
    assert not [w for w in decision.warnings if "cross-workload" in w]
