"""Custom resources that embed pod templates (issue 24): dispatch, one decision for every
template, UPDATE and delete shortcuts, controller labels in matching, the ``workloads.extra``
setting. Rows run through ``admit`` with the example policies (``llm-policy`` selects
``app=llm`` in ``snap``)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.admission.test_controllers import bad_template
from tests.conftest import make_settings
from tests.rules.test_table import ready_pod
from webhook.admission.engine import Engine, admit
from webhook.kube.custom_views import workload_views
from webhook.kube.custom_workloads import UNKNOWN_VALUE, fnv1a32, parse_path
from webhook.kube.review import AdmissionRequest
from webhook.server.runner import build_engine


@pytest.fixture(scope="module")
def engine() -> Engine:
    return build_engine(make_settings())


def good_template(labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"labels": labels or {"app": "llm"}}, "spec": ready_pod()["spec"]}


def ray_cluster(head: dict[str, Any], *workers: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc", "namespace": "snap"},
        "spec": {
            "headGroupSpec": {"template": head},
            "workerGroupSpecs": [
                {"groupName": f"g{i}", "template": worker} for i, worker in enumerate(workers)
            ],
        },
    }


def request(obj: dict[str, Any], operation: str = "CREATE", old: Any = None) -> AdmissionRequest:
    group, _, version = obj["apiVersion"].rpartition("/")
    return AdmissionRequest.model_validate(
        {
            "uid": "u",
            "kind": {"group": group, "version": version, "kind": obj["kind"]},
            "namespace": "snap",
            "operation": operation,
            "object": obj,
            "oldObject": old,
        }
    )


def test_every_worker_group_is_judged_and_named_by_its_path(engine: Engine) -> None:
    obj = ray_cluster(good_template(), good_template(), bad_template())
    decision = admit(request(obj), "validate", engine)
    assert not decision.allowed
    assert decision.message is not None
    assert "RayCluster is not snapshot-ready" in decision.message
    paths = {f.path for f in decision.audit["findings"]}
    assert "spec.workerGroupSpecs[1].template.spec.runtimeClassName" in paths
    assert not any(p.startswith(("spec.headGroupSpec", "spec.workerGroupSpecs[0]")) for p in paths)
    assert decision.audit["policy"] == "snap/llm-policy"


def test_the_mutating_endpoint_and_unknown_kinds_are_left_alone(engine: Engine) -> None:
    obj = ray_cluster(bad_template())
    mutate = admit(request(obj), "mutate", engine)
    assert (mutate.allowed, mutate.patch) == (True, ())
    other = {**obj, "apiVersion": "example.com/v1"}
    assert admit(request(other), "validate", engine).allowed


def test_an_update_that_keeps_the_templates_or_deletes_is_not_judged_again(engine: Engine) -> None:
    obj = ray_cluster(bad_template())
    scaled = copy.deepcopy(obj)
    scaled["spec"]["headGroupSpec"]["replicas"] = 3
    assert admit(request(scaled, "UPDATE", obj), "validate", engine).allowed
    changed = copy.deepcopy(obj)
    changed["spec"]["headGroupSpec"]["template"]["metadata"]["labels"]["v"] = "2"
    assert not admit(request(changed, "UPDATE", obj), "validate", engine).allowed
    deleting = copy.deepcopy(changed)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert admit(request(deleting, "UPDATE", obj), "validate", engine).allowed


def test_a_leaderworkerset_view_carries_the_labels_its_controller_adds() -> None:
    # The LWS controller labels its pods leaderworkerset.sigs.k8s.io/name=<lws name>: a policy
    # on it selects the templates although none carries the label (corpus test: lws-vllm).
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "vllm", "namespace": "snap"},
        "spec": {"leaderWorkerTemplate": {"workerTemplate": bad_template("other")}},
    }
    (worker,) = workload_views(lws)
    assert worker.added_labels["leaderworkerset.sigs.k8s.io/name"] == "vllm"
    assert worker.added_labels["leaderworkerset.sigs.k8s.io/worker-index"] == UNKNOWN_VALUE
    assert worker.spec_path == "spec.leaderWorkerTemplate.workerTemplate.spec"


def test_a_sandbox_gets_the_name_hash_its_controller_computes() -> None:
    # agent-sandbox labels a Sandbox's pod with FNV-1a 32 of the Sandbox name; the derived pod
    # of Sandbox hermes-alice in the real-manifests corpus carries b794d7ca.
    assert fnv1a32("hermes-alice") == "b794d7ca"
    sandbox = {
        "apiVersion": "agents.x-k8s.io/v1alpha1",
        "kind": "Sandbox",
        "metadata": {"name": "hermes-alice"},
        "spec": {"podTemplate": good_template()},
    }
    (view,) = workload_views(sandbox)
    assert view.added_labels == {"agents.x-k8s.io/sandbox-name-hash": "b794d7ca"}


def test_a_job_template_matches_with_the_job_name_and_an_unknown_uid() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train"},
        "spec": {"completionMode": "Indexed", "template": good_template()},
    }
    (view,) = workload_views(job)
    assert view.added_labels["batch.kubernetes.io/job-name"] == "train"
    assert view.added_labels["controller-uid"] == UNKNOWN_VALUE
    assert view.added_labels["batch.kubernetes.io/job-completion-index"] == UNKNOWN_VALUE
    (one,) = workload_views(job, ordinal=2)
    assert one.added_labels["batch.kubernetes.io/job-completion-index"] == "2"


def test_the_setting_adds_a_custom_resource() -> None:
    settings = make_settings(
        workloads={
            "extra": [
                {
                    "group": "example.com",
                    "kind": "Pool",
                    "resource": "pools",
                    "templates": ["spec.members[*].template"],
                }
            ]
        }
    )
    engine = build_engine(settings)
    pool = {
        "apiVersion": "example.com/v1",
        "kind": "Pool",
        "metadata": {"name": "p", "namespace": "snap"},
        "spec": {"members": [{"template": good_template()}, {"template": bad_template()}]},
    }
    decision = admit(request(pool), "validate", engine)
    assert not decision.allowed
    assert any(
        f.path.startswith("spec.members[1].template.spec") for f in decision.audit["findings"]
    )
    assert parse_path("spec.members[*].template") == ("spec", "members", "*", "template")
    with pytest.raises(ValueError, match="dot-separated"):
        make_settings(
            workloads={
                "extra": [{"group": "g", "kind": "K", "resource": "r", "templates": ["a..b"]}]
            }
        )
