"""Pod controllers are judged on their pod template; pods only at creation; ephemeral containers.

Rows run through ``admit`` with the example policies (``llm-policy`` selects ``app=llm`` in
``snap``); one test goes through the real HTTPS server (``https_server`` fixture).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.conftest import RunningServer, load_review, make_settings
from tests.rules.test_table import lines, outcomes, ready_pod
from webhook.admission.engine import Engine, admit
from webhook.base.types import Endpoint
from webhook.kube.responses import Decision
from webhook.kube.review import AdmissionRequest
from webhook.server.runner import build_engine

# kind -> (API group, keys from the object to the pod template)
CONTROLLERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "Deployment": ("apps", ("spec", "template")),
    "StatefulSet": ("apps", ("spec", "template")),
    "DaemonSet": ("apps", ("spec", "template")),
    "ReplicaSet": ("apps", ("spec", "template")),
    "Job": ("batch", ("spec", "template")),
    "CronJob": ("batch", ("spec", "jobTemplate", "spec", "template")),
}


@pytest.fixture(scope="module")
def examples_engine() -> Engine:
    return build_engine(make_settings())


def bad_template(app: str = "llm") -> dict[str, Any]:
    """A pod template on runc with a MIG selector and a privileged container."""
    pod = ready_pod()
    spec = pod["spec"]
    spec["runtimeClassName"] = "runc"
    spec["nodeSelector"] = {
        "cloud.google.com/gke-accelerator": "nvidia-tesla-a100",
        "cloud.google.com/gke-gpu-partition-size": "1g.5gb",
    }
    spec["containers"][0]["securityContext"] = {"privileged": True}
    return {"metadata": {"labels": {"app": app}}, "spec": spec}


def controller(kind: str, template: dict[str, Any]) -> dict[str, Any]:
    """A ``kind`` object in ``snap`` whose pod template is ``template``."""
    group, path = CONTROLLERS[kind]
    obj: dict[str, Any] = {
        "apiVersion": f"{group}/v1",
        "kind": kind,
        "metadata": {"name": "llm", "namespace": "snap"},
    }
    node = obj
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = template
    return obj


def request(
    kind: str,
    obj: Any,
    *,
    group: str = "",
    operation: str = "CREATE",
    sub_resource: str | None = None,
    old: Any = None,
) -> AdmissionRequest:
    return AdmissionRequest.model_validate(
        {
            "uid": "uid-ctl",
            "kind": {"group": group, "version": "v1", "kind": kind},
            "namespace": "snap",
            "operation": operation,
            "subResource": sub_resource,
            "object": obj,
            "oldObject": old,
        }
    )


def admit_controller(kind: str, obj: dict[str, Any], engine: Engine, **kwargs: Any) -> Decision:
    return admit(request(kind, obj, group=CONTROLLERS[kind][0], **kwargs), "validate", engine)


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
@pytest.mark.parametrize(
    ("kind", "base"),
    [
        pytest.param("Deployment", "spec.template.spec", id="deployment"),
        pytest.param("StatefulSet", "spec.template.spec", id="statefulset"),
        pytest.param("DaemonSet", "spec.template.spec", id="daemonset"),
        pytest.param("ReplicaSet", "spec.template.spec", id="replicaset"),
        pytest.param("Job", "spec.template.spec", id="job"),
        pytest.param("CronJob", "spec.jobTemplate.spec.template.spec", id="cronjob"),
    ],
)
def test_controller_template_is_denied_with_template_paths(
    kind: str, base: str, operation: str, examples_engine: Engine
) -> None:
    decision = admit_controller(
        kind, controller(kind, bad_template()), examples_engine, operation=operation
    )
    assert not decision.allowed
    assert f"snapready: {kind} is not snapshot-ready" in (decision.message or "")
    assert sorted((rule, path) for rule, path, _ in lines(decision)) == [
        # the template's GPU pins no driver branch (gpu-driver, a warning line)
        ("gpu-driver", f'{base}.containers[0].resources.limits["nvidia.com/gpu"]'),
        ("gpu-mig", f'{base}.nodeSelector["cloud.google.com/gke-gpu-partition-size"]'),
        ("gvisor-runtime", f"{base}.runtimeClassName"),
        ("sandbox-compat", f"{base}.containers[0].securityContext.privileged"),
    ]


def scaled_and_relabelled(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` after a scale and a label edit: nothing in its pod template changes."""
    new = copy.deepcopy(obj)
    new["metadata"]["labels"] = {"team": "inference"}
    new["spec"]["replicas"] = 3
    return new


def finalizer_removed(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` being deleted, as the garbage collector updates it to drop its finalizer."""
    new = copy.deepcopy(obj)
    new["metadata"]["deletionTimestamp"] = "2026-11-29T08:00:00Z"
    new["metadata"]["finalizers"] = []
    return new


@pytest.mark.parametrize("kind", sorted(CONTROLLERS))
@pytest.mark.parametrize(
    "change",
    [
        pytest.param(scaled_and_relabelled, id="scale-and-label-edit"),
        pytest.param(finalizer_removed, id="garbage-collector-removes-finalizer-while-deleting"),
    ],
)
def test_update_that_leaves_the_template_alone_is_allowed(
    kind: str, change: Any, examples_engine: Engine
) -> None:
    # Found by a user test: these UPDATEs were denied for a template admitted earlier (or made
    # before its policy), blocking scaling and leaving deleted workloads stuck Terminating.
    old = controller(kind, bad_template())
    decision = admit_controller(kind, change(old), examples_engine, operation="UPDATE", old=old)
    assert decision.allowed, decision.message
    assert decision.warnings == ()


@pytest.mark.parametrize("kind", sorted(CONTROLLERS))
def test_update_that_breaks_the_template_is_denied(kind: str, examples_engine: Engine) -> None:
    good = controller(kind, {"metadata": {"labels": {"app": "llm"}}, "spec": ready_pod()["spec"]})
    assert admit_controller(kind, good, examples_engine).allowed
    broken = controller(kind, bad_template())
    decision = admit_controller(kind, broken, examples_engine, operation="UPDATE", old=good)
    assert not decision.allowed
    assert "gvisor-runtime" in (decision.message or "")


@pytest.mark.parametrize("sub_resource", ["status", "scale"])
def test_controller_subresources_are_not_judged(sub_resource: str, examples_engine: Engine) -> None:
    obj = controller("Deployment", bad_template())
    decision = admit_controller(
        "Deployment", obj, examples_engine, operation="UPDATE", sub_resource=sub_resource, old=obj
    )
    assert decision.allowed


@pytest.mark.parametrize("kind", sorted(CONTROLLERS))
def test_unselected_template_is_allowed_untouched(kind: str, examples_engine: Engine) -> None:
    decision = admit_controller(kind, controller(kind, bad_template(app="other")), examples_engine)
    assert decision.allowed
    assert decision.warnings == ()


@pytest.mark.parametrize("kind", sorted(CONTROLLERS))
def test_controllers_are_not_judged_on_the_mutating_endpoint(
    kind: str, examples_engine: Engine
) -> None:
    group = CONTROLLERS[kind][0]
    decision = admit(
        request(kind, controller(kind, bad_template()), group=group), "mutate", examples_engine
    )
    assert decision.allowed
    assert decision.patch == ()


def test_captured_deployment_is_allowed_with_template_path_warnings(
    examples_engine: Engine,
) -> None:
    review = load_review("13")
    decision = admit(
        AdmissionRequest.model_validate(review["request"]), "validate", examples_engine
    )
    assert decision.allowed
    assert outcomes(decision) == {
        "deny": set(),
        # gpu-machine: a 1 x L4 template pinned by accelerator only may land on g2-standard-24;
        # gpu-driver: it pins no driver branch (GKE version unknown: no gpu-whole-node)
        "warn": {"stale-state", "image-digest", "gpu-driver", "gpu-machine"},
    }
    assert {path for _, path, _ in lines(decision)} == {
        "spec.template.spec.containers[0].env",
        "spec.template.spec.containers[0].image",
        'spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"]',
        'spec.template.spec.nodeSelector["cloud.google.com/gke-accelerator"]',
    }


def test_template_without_spec_or_metadata_does_not_crash(examples_engine: Engine) -> None:
    obj = controller("Deployment", {"metadata": {"labels": {"app": "llm"}}, "spec": None})
    decision = admit_controller("Deployment", obj, examples_engine)
    assert not decision.allowed
    assert outcomes(decision)["deny"] == {"gvisor-runtime"}


def test_pod_update_is_not_judged_again(examples_engine: Engine) -> None:
    pod = controller("Deployment", bad_template())["spec"]["template"] | {"kind": "Pod"}
    decision = admit(request("Pod", pod, operation="UPDATE", old=pod), "validate", examples_engine)
    assert decision.allowed and decision.warnings == ()


def _debug_container(name: str, privileged: bool) -> dict[str, Any]:
    return {"name": name, "image": "busybox", "securityContext": {"privileged": privileged}}


def _pod_with_ephemeral(*containers: dict[str, Any], app: str = "llm") -> dict[str, Any]:
    pod = ready_pod()
    pod["metadata"]["labels"] = {"app": app}
    pod["spec"]["ephemeralContainers"] = list(containers)
    return pod


def _ephemeral(
    new: dict[str, Any], old: Any, engine: Engine, endpoint: Endpoint = "validate"
) -> Decision:
    req = request("Pod", new, operation="UPDATE", sub_resource="ephemeralcontainers", old=old)
    return admit(req, endpoint, engine)


def test_added_privileged_ephemeral_container_is_denied(examples_engine: Engine) -> None:
    old = _pod_with_ephemeral(_debug_container("debug-1", True))
    new = _pod_with_ephemeral(_debug_container("debug-1", True), _debug_container("debug-2", True))
    decision = _ephemeral(new, old, examples_engine)
    assert not decision.allowed
    assert [(rule, path) for rule, path, _ in lines(decision)] == [
        ("sandbox-compat", "spec.ephemeralContainers[1].securityContext.privileged")
    ]


@pytest.mark.parametrize(
    ("new", "old", "endpoint"),
    [
        pytest.param(
            _pod_with_ephemeral(_debug_container("debug-1", True)),
            _pod_with_ephemeral(_debug_container("debug-1", True)),
            "validate",
            id="allows-existing-ephemeral-container",
        ),
        pytest.param(
            _pod_with_ephemeral(_debug_container("debug-1", False)),
            _pod_with_ephemeral(),
            "validate",
            id="allows-unprivileged-debug-container",
        ),
        pytest.param(
            _pod_with_ephemeral(_debug_container("debug-1", True), app="other"),
            _pod_with_ephemeral(app="other"),
            "validate",
            id="allows-unselected-pod",
        ),
        pytest.param(
            _pod_with_ephemeral(_debug_container("debug-1", True)),
            _pod_with_ephemeral(),
            "mutate",
            id="mutating-endpoint-does-not-judge",
        ),
    ],
)
def test_ephemeral_containers_allowed(
    new: dict[str, Any], old: dict[str, Any], endpoint: Endpoint, examples_engine: Engine
) -> None:
    decision = _ephemeral(copy.deepcopy(new), copy.deepcopy(old), examples_engine, endpoint)
    assert decision.allowed and decision.warnings == ()


def test_ephemeral_without_old_object_judges_every_container(examples_engine: Engine) -> None:
    new = _pod_with_ephemeral(_debug_container("debug-1", True))
    assert not _ephemeral(new, None, examples_engine).allowed


@pytest.mark.e2e
def test_mig_review_is_denied_over_https(https_server: RunningServer) -> None:
    review = load_review("04")
    with https_server.client() as client:
        response = client.post(
            "/validate", content=json.dumps(review), headers={"Content-Type": "application/json"}
        )
    assert response.status_code == 200
    body = response.json()
    assert body["apiVersion"] == review["apiVersion"]
    assert body["response"]["uid"] == review["request"]["uid"]
    assert body["response"]["allowed"] is False
    message = body["response"]["status"]["message"]
    assert "[gpu-mig]" in message
    assert 'spec.nodeSelector["cloud.google.com/gke-gpu-partition-size"]' in message


def test_ephemeral_containers_with_non_string_names_are_judged_not_crashed_on(
    examples_engine: Engine,
) -> None:
    # Found by `make fuzz`: a list or map as a container name made the "added" check crash.
    odd = _debug_container("debug-1", True)
    odd["name"] = ["not", "a", "name"]
    old_odd = _debug_container("debug-0", False)
    old_odd["name"] = {"also": "odd"}
    decision = _ephemeral(_pod_with_ephemeral(odd), _pod_with_ephemeral(old_odd), examples_engine)
    assert not decision.allowed
    assert [(rule, path) for rule, path, _ in lines(decision)] == [
        ("sandbox-compat", "spec.ephemeralContainers[0].securityContext.privileged")
    ]
