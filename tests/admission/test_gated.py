"""A gated pod's placement update, judged again (``admission.gated``; the chart's
``scheduling.snapready.io`` webhook, ``tests/e2e/test_scheduling_gates.py`` on a real API
server)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from tests.admission.test_mutate_findings import prefill_pod
from tests.conftest import make_settings
from tests.mutation.test_mutation import apply, engine_for, make_review, run
from webhook.admission.engine import Engine, admit
from webhook.admission.gated import placement_changed
from webhook.kube.review import AdmissionRequest
from webhook.server.runner import build_engine
from webhook.snapshots.index import SnapshotIndex
from webhook.snapshots.state import NodePoolFacts
from webhook.snapshots.views import OriginRecord, SnapshotView, WorkloadRef

POD: dict[str, Any] = {
    "metadata": {"name": "p", "namespace": "snap", "labels": {"app": "llm"}},
    "spec": {
        "runtimeClassName": "gvisor",
        "schedulingGates": [{"name": "example.com/flavor"}],
        "containers": [{"name": "c", "image": "nginx@sha256:" + "a" * 64}],
    },
}


def update(new: dict[str, Any], old: dict[str, Any] = POD) -> AdmissionRequest:
    return AdmissionRequest.model_validate(
        {
            "uid": "u1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "namespace": "snap",
            "operation": "UPDATE",
            "object": new,
            "oldObject": old,
            "userInfo": {"username": "kueue"},
        }
    )


def with_spec(**fields: Any) -> dict[str, Any]:
    pod = copy.deepcopy(POD)
    pod["spec"].update(fields)
    return pod


def test_only_a_gated_pods_placement_changes_count() -> None:
    assert placement_changed(update(with_spec(nodeSelector={"a": "b"})))
    assert placement_changed(update(with_spec(tolerations=[{"key": "k", "operator": "Exists"}])))
    annotated = copy.deepcopy(POD)
    annotated["metadata"]["annotations"] = {"x": "y"}
    assert not placement_changed(update(annotated)), "not a placement"
    ungated = with_spec(nodeSelector={"a": "b"})
    ungated["spec"].pop("schedulingGates")
    old = copy.deepcopy(ungated)
    old["spec"]["nodeSelector"] = {}
    assert not placement_changed(update(ungated, old)), "only a gated pod's placement may change"


def test_the_update_is_denied_only_for_what_it_brings() -> None:
    """``machine-family: e2`` is denied (as at CREATE); a new placement the rules accept, and
    the findings the pod already had before the change, are not held against it."""
    engine = build_engine(make_settings())
    e2 = admit(
        update(with_spec(nodeSelector={"cloud.google.com/machine-family": "e2"})),
        "validate",
        engine,
    )
    assert not e2.allowed and "machine-family" in str(e2.message)
    n2 = admit(
        update(with_spec(nodeSelector={"cloud.google.com/machine-family": "n2"})),
        "validate",
        engine,
    )
    assert n2.allowed
    before = with_spec(nodeSelector={"cloud.google.com/machine-family": "e2"})
    more = with_spec(nodeSelector={"cloud.google.com/machine-family": "e2", "zone": "a"})
    assert admit(update(more, before), "validate", engine).allowed, "e2 was there before"
    web = with_spec(nodeSelector={"cloud.google.com/machine-family": "e2"})
    web["metadata"]["labels"] = {"app": "web"}
    old_web = copy.deepcopy(POD)
    old_web["metadata"]["labels"] = {"app": "web"}
    assert admit(update(web, old_web), "validate", engine).allowed, "no policy selects it"


def test_unselecting_the_pod_in_the_same_update_does_not_escape() -> None:
    """A review: labels that no policy selects plus ``machine-family: e2`` in one UPDATE was
    allowed, and the labels put back afterwards never reached the webhook."""
    engine = build_engine(make_settings())
    new = with_spec(nodeSelector={"cloud.google.com/machine-family": "e2"})
    new["metadata"]["labels"] = {"app": "web"}
    request = update(new)
    assert placement_changed(request)
    decision = admit(request, "validate", engine)
    assert not decision.allowed and "machine-family" in str(decision.message)
    relabelled = copy.deepcopy(POD)
    relabelled["metadata"]["labels"] = {"app": "llm", "extra": "x"}
    assert placement_changed(update(relabelled)), "a gated pod's labels decide its policies"


def test_a_pin_restated_elsewhere_is_not_new() -> None:
    """A review: Kueue writing the affinity's e2 pin as a nodeSelector while it ungates was
    denied (the finding's path moved), and the pod would stay gated for ever."""
    engine = build_engine(make_settings())
    expression = {"key": "cloud.google.com/machine-family", "operator": "In", "values": ["e2"]}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expression]}]
            }
        }
    }
    old = with_spec(affinity=affinity)
    new = with_spec(affinity=affinity, nodeSelector={"cloud.google.com/machine-family": "e2"})
    assert admit(update(new, old), "validate", engine).allowed


@pytest.mark.parametrize("mode", ["enforce", "warn"])
def test_a_placement_predicted_to_cold_start_is_denied_under_on_miss_deny(mode: str) -> None:
    """A review: with ``restore.on_miss: deny``, a gated unpinned pod (a hit) pinned by UPDATE
    to a pool upgraded past the snapshot was allowed; created so pinned it is denied. Judged
    as at CREATE: ``on_miss: deny`` denies in a ``warn`` namespace too (a later review found
    the UPDATE only warned there), with the words CREATE uses."""
    pod = prefill_pod()
    pod["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    stamped = apply(pod, run(make_review(pod), engine_for()))
    spec_hash = stamped["metadata"]["annotations"]["snapready.io/spec-hash"]
    base = engine_for(restore={"on_miss": "deny"}, enforcement=mode)
    node = {"pool": "old", "family": "n2", "arch": "amd64", "version": "1.35.1-gke.100"}
    origin = OriginRecord(
        "origin", spec_hash, node=node, workload=WorkloadRef("Deployment", "prefill")
    )
    view = SnapshotView(
        "snap", "snap-1", "llm-policy", "origin", True, "Ready", "2026-12-01T10:00:00Z", None,
        origin,
    )  # fmt: skip

    def pool(name: str, version: str) -> NodePoolFacts:
        return NodePoolFacts(
            name, 2, frozenset({"n2-standard-8"}), frozenset({"n2"}),
            architectures=frozenset({"amd64"}), versions=frozenset({version}),
        )  # fmt: skip

    pools = {"old": pool("old", "1.35.1-gke.100"), "new": pool("new", "1.35.3-gke.200")}
    state = dataclasses.replace(
        base.state(),
        snapshots=SnapshotIndex.build([view]),
        snapshots_known=True,
        node_pools=pools,
    )
    engine = Engine(settings=base.settings, state=lambda: state, governance=base.governance)
    assert run(make_review(pod), engine).allowed, "unpinned: a hit"
    new = copy.deepcopy(stamped)
    new["spec"]["nodeSelector"] = {"cloud.google.com/gke-nodepool": "new"}
    decision = admit(update(new, stamped), "validate", engine)
    assert not decision.allowed and "cold-start" in str(decision.message), decision.message
    pinned = copy.deepcopy(pod)
    pinned["spec"]["nodeSelector"] = {"cloud.google.com/gke-nodepool": "new"}
    at_create = run(make_review(pinned), engine)
    assert not at_create.allowed and at_create.message == decision.message, "CREATE's words"
    back = copy.deepcopy(stamped)
    back["spec"]["nodeSelector"] = {"cloud.google.com/gke-nodepool": "old"}
    assert admit(update(back, stamped), "validate", engine).allowed


def test_a_warning_turned_into_a_denial_is_new() -> None:
    """A review: findings were compared by rule alone, so a rule that warned at CREATE could
    deny after the UPDATE unnoticed. ``gpu-machine`` warns about an L4 pin (it may also land on
    unsupported shapes) and, under ``unlisted_gpu_severity: deny``, denies a T4 pin."""
    engine = build_engine(make_settings(rules={"unlisted_gpu_severity": "deny"}))

    def gpu_pod(accelerator: str) -> dict[str, Any]:
        pod = with_spec(nodeSelector={"cloud.google.com/gke-accelerator": accelerator})
        pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
        return pod

    old = gpu_pod("nvidia-l4")
    assert admit(update(old, POD), "validate", engine).allowed, "gpu-machine only warns"
    decision = admit(update(gpu_pod("nvidia-tesla-t4"), old), "validate", engine)
    assert not decision.allowed and "gpu-machine" in str(decision.message), decision
