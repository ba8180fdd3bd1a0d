"""Rules from what a real GKE cluster does (issue 23, docs/gke-facts.md#section-9), with default
settings.

The hardware lists (documented vs validated in the field), ``gpu-whole-node`` only on a known old
version, ``gpu-driver``, ``restore-from-policy``, MIG by resource name and the optional driver
pin mutation. Unlike ``test_table``'s rows (strict lists, a preview version, no ``gpu-driver``),
these run with the built-in defaults unless a row says otherwise.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.admission.test_controllers import admit_controller, controller
from tests.conftest import make_settings
from tests.rules.test_table import GPU, judge, lines, outcomes, ready_pod
from webhook.admission.engine import Engine, admit
from webhook.kube.matching import PolicyIndex
from webhook.kube.review import AdmissionRequest
from webhook.snapshots.state import (
    ClusterState,
    ComputeClassFacts,
    DisruptionBudget,
    NodePoolFacts,
    disruption_budget,
    parse_policy,
)

Pod = dict[str, Any]
DRIVER = "cloud.google.com/gke-gpu-driver-version"
ACCELERATOR = "cloud.google.com/gke-accelerator"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
COMPUTE_CLASS = "cloud.google.com/compute-class"
NODE_POOL = "cloud.google.com/gke-nodepool"
FAMILY = "cloud.google.com/machine-family"


WORKLOAD_POLICY = parse_policy(
    {
        "metadata": {"name": "llm-policy", "namespace": "snap"},
        "spec": {
            "selector": {"matchLabels": {"app": "llm"}},
            "storageConfigName": "s",
            "triggerConfig": {"type": "workload"},
        },
    },
    prefix="snapready.io/",
)
"""``llm-policy`` with a workload trigger (the checkpoint-window rule needs one)."""


def engine(settings: dict[str, Any] | None = None, **state: Any) -> Engine:
    """Default settings (plus ``settings``) over ``llm-policy`` and the given cluster facts."""
    cluster = ClusterState(policies=PolicyIndex.build((WORKLOAD_POLICY,)), synced=True, **state)
    return Engine(settings=make_settings(**(settings or {})), state=lambda: cluster)


def gpu_pod(selector: dict[str, str], gpus: str = "1", resource: str = GPU) -> Pod:
    """``ready_pod`` with exactly ``selector`` and ``gpus`` of ``resource``."""
    pod = ready_pod()
    pod["spec"]["nodeSelector"] = dict(selector)
    pod["spec"]["containers"][0]["resources"] = {"limits": {resource: gpus}}
    return pod


G4 = {INSTANCE_TYPE: "g4-standard-48", ACCELERATOR: "nvidia-rtx-pro-6000", DRIVER: "latest"}


# ---- 1. hardware lists


def test_the_ready_pod_passes_every_rule_with_defaults() -> None:
    decision = judge(ready_pod(), engine())
    assert decision.allowed and not decision.warnings


@pytest.mark.parametrize(
    "selector",
    [
        pytest.param(G4, id="g4-standard-48-with-rtx-pro-6000"),
        pytest.param({INSTANCE_TYPE: "g4-standard-48", DRIVER: "latest"}, id="by-machine-type"),
    ],
)
def test_googles_validated_g4_setup_is_admitted(selector: dict[str, str]) -> None:
    decision = judge(gpu_pod(selector), engine())
    found = outcomes(decision)
    assert decision.allowed
    assert "gpu-machine" not in found["warn"] | found["deny"]
    assert "machine-family" not in found["deny"]


def test_g4_by_accelerator_alone_warns_where_it_may_land() -> None:
    # nvidia-rtx-pro-6000 is on every G4 shape; only g4-standard-48 is validated.
    decision = judge(gpu_pod({ACCELERATOR: "nvidia-rtx-pro-6000", DRIVER: "latest"}), engine())
    [(_, path, message)] = [line for line in lines(decision) if line[0] == "gpu-machine"]
    assert path == 'spec.nodeSelector["cloud.google.com/gke-accelerator"]'
    assert "g4-standard-{96,192,384}" in message  # the other G4 shapes, each named
    assert message.endswith("pin node.kubernetes.io/instance-type: g4-standard-48")


@pytest.mark.parametrize(
    ("selector", "name"),
    [
        pytest.param(
            {INSTANCE_TYPE: "a3-highgpu-8g", DRIVER: "latest"}, "a3-highgpu-8g", id="type"
        ),
        pytest.param(
            {ACCELERATOR: "nvidia-tesla-t4", DRIVER: "latest"}, "nvidia-tesla-t4", id="gpu"
        ),
    ],
)
def test_a_gpu_on_neither_list_is_a_warning_that_says_so(
    selector: dict[str, str], name: str
) -> None:
    default = judge(gpu_pod(selector), engine())
    [(_, _, message)] = [line for line in lines(default) if line[0] == "gpu-machine"]
    assert default.allowed
    assert name in message and "neither list" in message
    strict = judge(gpu_pod(selector), engine({"rules": {"unlisted_gpu_severity": "deny"}}))
    assert not strict.allowed
    assert "gpu-machine" in outcomes(strict)["deny"]


def test_multi_gpu_off_l4_stays_denied_also_on_g4() -> None:
    decision = judge(gpu_pod({ACCELERATOR: "nvidia-rtx-pro-6000", DRIVER: "latest"}, "2"), engine())
    assert not decision.allowed
    assert "gpu-multi-l4" in outcomes(decision)["deny"]


@pytest.mark.parametrize("family", ["c4", "c4a", "c4d", "n4", "h4d", "a4", "a4x", "g4", "z3"])
def test_every_current_machine_family_is_known(family: str) -> None:
    pod = ready_pod()
    pod["spec"]["nodeSelector"] = {FAMILY: family}
    del pod["spec"]["containers"][0]["resources"]
    assert "machine-family" not in outcomes(judge(pod, engine()))["deny"]


def test_an_invented_family_is_still_unknown() -> None:
    pod = ready_pod()
    pod["spec"]["nodeSelector"] = {FAMILY: "q9"}
    del pod["spec"]["containers"][0]["resources"]
    assert "machine-family" in outcomes(judge(pod, engine()))["deny"]


# ---- 8. gpu-whole-node only on a known old version


def test_gpu_whole_node_is_silent_when_the_version_is_unknown() -> None:
    pod = gpu_pod({ACCELERATOR: "nvidia-l4", DRIVER: "latest"})
    assert "gpu-whole-node" not in outcomes(judge(pod, engine()))["warn"]


def test_gpu_whole_node_on_a_known_old_version_names_the_cli_flag() -> None:
    pod = gpu_pod({INSTANCE_TYPE: "g2-standard-48", DRIVER: "latest"})
    old = engine({"rules": {"gke_version": "1.34.1-gke.3084001"}})
    [(_, _, message)] = [line for line in lines(judge(pod, old)) if line[0] == "gpu-whole-node"]
    assert "--gke-version" in message


# ---- 2. gpu-driver


def test_default_driver_gpu_pod_is_warned_naming_the_driver() -> None:
    decision = judge(gpu_pod({INSTANCE_TYPE: "g2-standard-8"}), engine())
    [(path, message)] = [(p, m) for r, p, m in lines(decision) if r == "gpu-driver"]
    assert decision.allowed
    assert path == 'spec.containers[0].resources.limits["nvidia.com/gpu"]'
    assert "default GPU driver" in message and "535" in message
    assert f"{DRIVER}: latest" in message


def test_gpu_driver_can_deny() -> None:
    strict = engine({"rules": {"gpu_driver": {"severity": "deny"}}})
    decision = judge(gpu_pod({INSTANCE_TYPE: "g2-standard-8"}), strict)
    assert not decision.allowed
    assert "gpu-driver" in outcomes(decision)["deny"]


def test_pinning_the_default_branch_is_named() -> None:
    decision = judge(gpu_pod({INSTANCE_TYPE: "g2-standard-8", DRIVER: "default"}), engine())
    [(path, message)] = [(p, m) for r, p, m in lines(decision) if r == "gpu-driver"]
    assert path == f'spec.nodeSelector["{DRIVER}"]'
    assert "default" in message and "latest" in message


def test_required_affinity_on_latest_is_accepted() -> None:
    pod = gpu_pod({INSTANCE_TYPE: "g2-standard-8"})
    term = {"matchExpressions": [{"key": DRIVER, "operator": "In", "values": ["latest"]}]}
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }
    assert "gpu-driver" not in outcomes(judge(pod, engine()))["warn"]


def test_cpu_pods_are_not_judged_by_gpu_driver() -> None:
    pod = ready_pod()
    pod["spec"]["nodeSelector"] = {FAMILY: "n2"}
    del pod["spec"]["containers"][0]["resources"]
    assert "gpu-driver" not in outcomes(judge(pod, engine()))["warn"]


def _class(name: str, drivers: set[str]) -> ComputeClassFacts:
    return ComputeClassFacts(name, frozenset({"g2"}), gpu_drivers=frozenset(drivers))


@pytest.mark.parametrize(
    ("drivers", "warned"),
    [
        pytest.param({"latest"}, False, id="class-whose-gpu-priorities-all-say-latest"),
        pytest.param({"latest", "default"}, True, id="class-with-one-default-priority"),
        pytest.param(set(), True, id="class-without-gpu-priorities"),
    ],
)
def test_compute_class_driver_version_decides(drivers: set[str], warned: bool) -> None:
    pod = gpu_pod({COMPUTE_CLASS: "gpus", INSTANCE_TYPE: "g2-standard-8"})
    decision = judge(pod, engine(compute_classes={"gpus": _class("gpus", drivers)}))
    assert ("gpu-driver" in outcomes(decision)["warn"]) is warned


def _pool(name: str, driver: str, machine: str = "g2-standard-8") -> NodePoolFacts:
    return NodePoolFacts(
        name=name,
        node_count=2,
        instance_types=frozenset({machine}),
        machine_families=frozenset({"g2"}),
        accelerators=frozenset({"nvidia-l4"}),
        gpu_drivers=frozenset({driver}),
    )


@pytest.mark.parametrize(
    ("pools", "warned"),
    [
        pytest.param([_pool("a", "latest"), _pool("b", "latest")], False, id="every-pool-latest"),
        pytest.param([_pool("a", "latest"), _pool("b", "default")], True, id="one-pool-default"),
        pytest.param(
            [_pool("a", "latest"), _pool("b", "default", "g2-standard-16")],
            False,
            id="default-pool-of-another-type-is-out-of-reach",
        ),
    ],
)
def test_cluster_mode_landing_pools_decide(pools: list[NodePoolFacts], warned: bool) -> None:
    pod = gpu_pod({INSTANCE_TYPE: "g2-standard-8"})
    decision = judge(pod, engine(node_pools={p.name: p for p in pools}))
    assert ("gpu-driver" in outcomes(decision)["warn"]) is warned


# ---- 3. restore-from-policy


def test_restore_from_policy_annotation_is_warned() -> None:
    pod = ready_pod()
    pod["metadata"]["annotations"] = {"podsnapshot.gke.io/restore-from-policy": "llm-policy"}
    decision = judge(pod, engine())
    [(path, message)] = [(p, m) for r, p, m in lines(decision) if r == "restore-from-policy"]
    assert decision.allowed
    assert path == 'metadata.annotations["podsnapshot.gke.io/restore-from-policy"]'
    assert "first snapshot is never taken" in message


# ---- 4. MIG by resource name


def test_mig_by_resource_name_is_a_gpu_pod_denied_by_gpu_mig() -> None:
    pod = gpu_pod({INSTANCE_TYPE: "a2-highgpu-1g", DRIVER: "latest"}, "1", "nvidia.com/mig-3g.20gb")
    decision = judge(pod, engine())
    [(path, message)] = [(p, m) for r, p, m in lines(decision) if r == "gpu-mig"]
    assert not decision.allowed
    assert path == 'spec.containers[0].resources.limits["nvidia.com/mig-3g.20gb"]'
    assert "3g.20gb" in message and "nvidia.com/gpu" in message


# ---- the optional driver pin (mutation)


def mutate(pod: Pod, settings: dict[str, Any]) -> list[dict[str, Any]]:
    request = AdmissionRequest.model_validate(
        {
            "uid": "u-1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "namespace": "snap",
            "operation": "CREATE",
            "object": pod,
        }
    )
    return list(admit(request, "mutate", engine(settings)).patch)


DRIVER_OP = {"op": "add", "path": "/spec/nodeSelector/cloud.google.com~1gke-gpu-driver-version"}


def test_driver_pin_is_off_by_default() -> None:
    ops = mutate(gpu_pod({INSTANCE_TYPE: "g2-standard-8"}), {})
    assert not [op for op in ops if "gke-gpu-driver-version" in op["path"]]


def test_driver_pin_adds_the_node_selector_when_on() -> None:
    on = {"rules": {"gpu_driver": {"pin": True}}}
    ops = mutate(gpu_pod({INSTANCE_TYPE: "g2-standard-8"}), on)
    assert {**DRIVER_OP, "value": "latest"} in ops
    pinned = mutate(gpu_pod({INSTANCE_TYPE: "g2-standard-8", DRIVER: "default"}), on)
    assert not [op for op in pinned if "gke-gpu-driver-version" in op["path"]]
    cpu = ready_pod()
    del cpu["spec"]["containers"][0]["resources"]
    assert not [op for op in mutate(copy.deepcopy(cpu), on) if "gke-gpu" in op["path"]]


# ---- 7. checkpoint-window


def budget(selector: dict[str, str], **spec: Any) -> DisruptionBudget:
    obj = {
        "metadata": {"name": "pdb", "namespace": "snap"},
        "spec": {"selector": {"matchLabels": selector}, **spec},
    }
    found = disruption_budget(obj)
    assert found is not None
    return found


def template_of(kind: str) -> Any:
    pod = ready_pod()
    return controller(kind, {"metadata": pod["metadata"], "spec": pod["spec"]})


@pytest.mark.parametrize(
    ("kind", "budgets", "warned"),
    [
        pytest.param("Deployment", [], True, id="deployment-without-pdb"),
        pytest.param("StatefulSet", [], True, id="statefulset-without-pdb"),
        pytest.param(
            "Deployment", [budget({"app": "llm"}, maxUnavailable=0)], False, id="zero-pdb"
        ),
        pytest.param(
            "Deployment", [budget({"app": "llm"}, minAvailable="100%")], False, id="all-available"
        ),
        pytest.param(
            "Deployment", [budget({"app": "llm"}, maxUnavailable=1)], True, id="pdb-allowing-one"
        ),
        pytest.param(
            "Deployment", [budget({"app": "other"}, maxUnavailable=0)], True, id="pdb-of-other-pods"
        ),
        pytest.param("Job", [], False, id="jobs-are-not-snapshot-sources-here"),
    ],
)
def test_checkpoint_window_needs_a_zero_disruption_budget(
    kind: str, budgets: list[DisruptionBudget], warned: bool
) -> None:
    state = engine(disruption_budgets={"snap": tuple(budgets)})
    decision = admit_controller(kind, template_of(kind), state)
    found = [(p, m) for r, p, m in lines(decision) if r == "checkpoint-window"]
    assert bool(found) is warned
    if warned:
        assert found[0][0] == "spec.template.metadata.labels"
        assert "maxUnavailable: 0" in found[0][1]


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        pytest.param(
            {"minAvailable": 1},
            "(PDB pdb: minAvailable: 1, so 0 only up to 1 pod(s))",
            id="min-available-1",
        ),
        pytest.param(
            {"minAvailable": 3},
            "(PDB pdb: minAvailable: 3, so 0 only up to 3 pod(s))",
            id="min-available-3",
        ),
        pytest.param(
            {"maxUnavailable": "25%"},
            "(PDB pdb: maxUnavailable: 25%)",
            id="25%",
        ),
    ],
)
def test_checkpoint_window_says_what_a_partial_budget_allows(
    spec: dict[str, Any], says: str
) -> None:
    """A PDB ``minAvailable: 1`` over a 1-replica Deployment allows no disruption at that count
    (a new-user trial: the warning said it "allows some"); scaled out it does."""
    budgets = (budget({"app": "llm"}, **spec),)
    state = engine(disruption_budgets={"snap": budgets})
    decision = admit_controller("Deployment", template_of("Deployment"), state)
    [message] = [m for r, _, m in lines(decision) if r == "checkpoint-window"]
    assert says in message and "allows some" not in message
    assert message.removesuffix(" for them").endswith("add a PDB with maxUnavailable: 0")
    assert len(f"[checkpoint-window] spec.template.metadata.labels: {message}") <= 256
    assert " holds these pods at 0 disruptions at any count (" in message


def test_checkpoint_window_is_not_judged_where_budgets_are_unknown() -> None:
    decision = admit_controller("Deployment", template_of("Deployment"), engine())
    assert "checkpoint-window" not in outcomes(decision)["warn"]


def test_pvc_under_post_checkpoint_resume_is_warned_and_stop_is_not() -> None:
    pod = ready_pod()
    pod["spec"]["volumes"] = [{"name": "db", "persistentVolumeClaim": {"claimName": "db"}}]
    [(path, message)] = [
        (p, m) for r, p, m in lines(judge(pod, engine())) if r == "checkpoint-window"
    ]
    assert path == "spec.volumes[0]" and "postCheckpoint: resume" in message
    stop = parse_policy(
        {
            "metadata": {"name": "llm-policy", "namespace": "snap"},
            "spec": {
                "selector": {"matchLabels": {"app": "llm"}},
                "storageConfigName": "s",
                "triggerConfig": {"type": "workload", "postCheckpoint": "stop"},
            },
        },
        prefix="snapready.io/",
    )
    cluster = ClusterState(policies=PolicyIndex.build((stop,)), synced=True)
    stopped = judge(pod, Engine(settings=make_settings(), state=lambda: cluster))
    assert "checkpoint-window" not in outcomes(stopped)["warn"]
