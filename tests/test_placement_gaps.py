"""Placement gaps: pods that pin less (or differently) than a machine type, judged correctly.

- A GPU pod pinned only by accelerator or family may land on a GPU machine type that Pod snapshots
  do not support (domain.md section 4: the supported types are an explicit list; Compute Engine
  "GPU machine types": ``nvidia-l4`` is on every G2 shape, ``g2-standard-24`` with 2 GPUs
  included; ``nvidia-h100-80gb`` on ``a3-highgpu-1g/2g/4g/8g`` and ``a3-edgegpu-8g``).
- Messages name exact machine types, never a wildcard that includes a rejected one.
- DaemonSet pods: the controller replaces the template's required affinity with one
  ``matchFields`` ``metadata.name In [<node>]`` term (k8s pkg/controller/daemon/util
  ``ReplaceDaemonSetPodNodeNameNodeAffinity``); the template was judged at DaemonSet admission.
- The legacy ``beta.kubernetes.io/instance-type`` label is still on nodes (k8s.io/cloud-provider
  node controller ``labelReconcileInfo`` keeps it equal to ``node.kubernetes.io/instance-type``).
- Affinity terms that each pin the same family by different labels pin the pod to it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import load_review, make_settings
from tests.fake_apiserver import FakeApiServer
from tests.test_rules_facts import engine_with, gpu_container, pinned
from tests.test_rules_table import cpu_pod, judge, lines, outcomes, ready_pod
from webhook.admission import Engine, admit
from webhook.facts import NodeView
from webhook.hardware import (
    INSTANCE_TYPE,
    LEGACY_INSTANCE_TYPE,
    NODE_NAME,
    node_pins,
    node_selection,
)
from webhook.responses import Decision
from webhook.review import AdmissionRequest
from webhook.server import build_engine, stop_source
from webhook.state import NodePoolFacts

Pod = dict[str, Any]
ACCELERATOR = "cloud.google.com/gke-accelerator"
ACCELERATOR_COUNT = "cloud.google.com/gke-accelerator-count"
FAMILY = "cloud.google.com/machine-family"
NODE_POOL = "cloud.google.com/gke-nodepool"
TERMS = (
    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
)
NEW_GKE = {"rules": {"gke_version": "1.35.3-gke.1234000"}}

# domain.md section 4, per accelerator: the supported machine types and their GPU counts.
L4_ONE = {"g2-standard-4", "g2-standard-8", "g2-standard-12", "g2-standard-16", "g2-standard-32"}
L4_MULTI = {"g2-standard-48", "g2-standard-96"}
ALL_SUPPORTED = L4_ONE | L4_MULTI | {"a2-highgpu-1g", "a2-ultragpu-1g", "a3-highgpu-1g"}


def gpu_pod(gpus: int, labels: dict[str, str]) -> Pod:
    """A snapshot-ready pod with ``gpus`` GPUs whose nodeSelector is exactly ``labels``."""
    pod = pinned(ready_pod(), labels)
    pod["spec"]["containers"] = [gpu_container(str(gpus))]
    return pod


def with_terms(pod: Pod, *terms: dict[str, Any]) -> Pod:
    """``pod`` without nodeSelector and with these required node affinity terms."""
    pod["spec"].pop("nodeSelector", None)
    required = {"nodeSelectorTerms": list(terms)}
    pod["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
    }
    return pod


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


def daemon_pod(node: str, gpus: int = 4) -> Pod:
    """A pod as the DaemonSet controller creates it: its required affinity is one matchFields
    term naming the node (nodeSelector and the rest of the template are kept as they were)."""
    pod = gpu_pod(gpus, {})
    return with_terms(pod, {"matchFields": [expr("metadata.name", "In", node)]})


def named_types(text: str) -> set[str]:
    """Machine types a message names, with ``g2-standard-{4,8}`` read as both types."""
    names = set(re.findall(r"\b[a-z][a-z0-9]*-[a-z]+-[0-9a-z]+\b", text))
    for prefix, sizes in re.findall(r"\b([a-z][a-z0-9]*-[a-z]+)-\{([0-9a-z,]+)\}", text):
        names |= {f"{prefix}-{size}" for size in sizes.split(",")}
    return names


def suggestion(message: str) -> set[str]:
    """Machine types after the message's last ``use``/``instance-type:`` (what it tells to pin)."""
    tail = re.split(r"; use |node\.kubernetes\.io/instance-type: ", message)[-1]
    return named_types(tail)


def gpu_machine(decision: Decision) -> list[tuple[str, str]]:
    """``(path, message)`` of every gpu-machine finding."""
    return [(path, message) for rule, path, message in lines(decision) if rule == "gpu-machine"]


def resolve(obj: Any, path: str) -> bool:
    """Whether a Kubernetes-style field path (``a.b[0]["c/d"]``) names a field of ``obj``."""
    for name, index, key in re.findall(r'\.?([A-Za-z]\w*)|\[(\d+)\]|\["([^"]*)"\]', path):
        part: str | int = int(index) if index else (name or key)
        if isinstance(part, int):
            if not isinstance(obj, list) or part >= len(obj):
                return False
        elif not isinstance(obj, dict) or part not in obj:
            return False
        obj = obj[part]
    return True


# ---- 1. pinned by accelerator or family only


@pytest.mark.parametrize(
    ("pod", "may_land_on", "pin_instead"),
    [
        pytest.param(
            gpu_pod(1, {ACCELERATOR: "nvidia-h100-80gb"}),
            {"a3-highgpu-2g", "a3-highgpu-4g", "a3-highgpu-8g", "a3-edgegpu-8g"},
            {"a3-highgpu-1g"},
            id="warns-one-h100-pod-that-may-land-on-a3-highgpu-8g",
        ),
        pytest.param(
            gpu_pod(1, {ACCELERATOR: "nvidia-tesla-a100"}),
            {"a2-highgpu-2g", "a2-highgpu-4g", "a2-highgpu-8g", "a2-megagpu-16g"},
            {"a2-highgpu-1g"},
            id="warns-one-a100-40gb-pod-that-may-land-on-a2-highgpu-8g",
        ),
        pytest.param(
            gpu_pod(1, {ACCELERATOR: "nvidia-a100-80gb"}),
            {"a2-ultragpu-2g", "a2-ultragpu-4g", "a2-ultragpu-8g"},
            {"a2-ultragpu-1g"},
            id="warns-one-a100-80gb-pod-that-may-land-on-a2-ultragpu-8g",
        ),
        pytest.param(
            gpu_pod(1, {ACCELERATOR: "nvidia-l4"}),
            {"g2-standard-24"},
            L4_ONE,  # version unknown: a 1-GPU pod must not use part of a 4/8-GPU node
            id="warns-one-l4-pod-that-may-land-on-g2-standard-24",
        ),
        pytest.param(
            gpu_pod(2, {ACCELERATOR: "nvidia-l4"}),
            {"g2-standard-24"},
            L4_MULTI,
            id="warns-two-l4-pod-that-may-land-on-g2-standard-24",
        ),
        pytest.param(
            gpu_pod(1, {FAMILY: "a3"}),
            {
                "a3-highgpu-2g",
                "a3-highgpu-4g",
                "a3-highgpu-8g",
                "a3-edgegpu-8g",
                "a3-megagpu-8g",
                "a3-ultragpu-8g",
            },
            {"a3-highgpu-1g"},
            id="warns-one-gpu-pod-pinned-to-family-a3",
        ),
        pytest.param(
            gpu_pod(1, {FAMILY: "a2"}),
            {
                "a2-highgpu-2g",
                "a2-highgpu-4g",
                "a2-highgpu-8g",
                "a2-megagpu-16g",
                "a2-ultragpu-2g",
                "a2-ultragpu-4g",
                "a2-ultragpu-8g",
            },
            {"a2-highgpu-1g", "a2-ultragpu-1g"},
            id="warns-one-gpu-pod-pinned-to-family-a2",
        ),
        pytest.param(
            gpu_pod(1, {FAMILY: "g2"}),
            {"g2-standard-24"},
            L4_ONE,
            id="warns-one-gpu-pod-pinned-to-family-g2",
        ),
    ],
)
def test_pod_pinned_without_machine_type_is_warned_where_it_may_land(
    pod: Pod, may_land_on: set[str], pin_instead: set[str]
) -> None:
    decision = judge(pod)
    assert decision.allowed
    [(path, message)] = gpu_machine(decision)
    assert outcomes(decision)["warn"] >= {"gpu-machine"}
    assert path.startswith('spec.nodeSelector["cloud.google.com/')
    assert named_types(message) - suggestion(message) == may_land_on
    assert suggestion(message) == pin_instead
    assert INSTANCE_TYPE in message
    assert "*" not in message


def test_new_cluster_suggests_every_supported_l4_type_for_a_one_gpu_pod() -> None:
    decision = judge(gpu_pod(1, {ACCELERATOR: "nvidia-l4"}), engine_with(settings=NEW_GKE))
    [(_, message)] = gpu_machine(decision)
    assert suggestion(message) == L4_ONE | L4_MULTI  # a subset of a node's GPUs is allowed


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(gpu_pod(4, {ACCELERATOR: "nvidia-l4"}), id="four-l4-fit-only-supported-types"),
        pytest.param(
            gpu_pod(1, {ACCELERATOR: "nvidia-h100-80gb", ACCELERATOR_COUNT: "1"}),
            id="one-h100-on-one-gpu-nodes-is-only-a3-highgpu-1g",
        ),
        pytest.param(
            gpu_pod(1, {ACCELERATOR: "nvidia-l4", INSTANCE_TYPE: "g2-standard-8"}),
            id="instance-type-pinned",
        ),
        pytest.param(
            gpu_pod(2, {ACCELERATOR: "nvidia-h100-80gb"}),
            id="two-h100-is-denied-by-gpu-multi-l4-instead",
        ),
    ],
)
def test_no_landing_warning_when_every_possible_type_is_supported_or_judged(pod: Pod) -> None:
    decision = judge(pod, engine_with(settings=NEW_GKE))
    assert [m for _, m in gpu_machine(decision) if "may also land" in m] == []


def test_explicit_unsupported_type_is_still_denied() -> None:
    decision = judge(gpu_pod(1, {INSTANCE_TYPE: "a3-highgpu-8g"}))
    assert not decision.allowed
    assert outcomes(decision)["deny"] == {"gpu-machine"}


L4_8 = NodePoolFacts(
    name="l4-8",
    node_count=2,
    instance_types=frozenset({"g2-standard-8"}),
    machine_families=frozenset({"g2"}),
    accelerators=frozenset({"nvidia-l4"}),
    accelerator_counts=frozenset({"1"}),
)
L4_24 = NodePoolFacts(
    name="l4-24",
    node_count=1,
    instance_types=frozenset({"g2-standard-24"}),
    machine_families=frozenset({"g2"}),
    accelerators=frozenset({"nvidia-l4"}),
    accelerator_counts=frozenset({"2"}),
)
CPU_POOL = NodePoolFacts(
    name="n2",
    node_count=3,
    instance_types=frozenset({"n2-standard-8"}),
    machine_families=frozenset({"n2"}),
)


@pytest.mark.parametrize(
    ("pools", "warned"),
    [
        pytest.param([L4_8], False, id="allows-when-every-matching-pool-is-supported"),
        pytest.param([L4_8, L4_24], True, id="warns-when-a-matching-pool-is-g2-standard-24"),
        pytest.param([CPU_POOL], True, id="warns-from-the-catalog-when-no-pool-matches"),
    ],
)
def test_cluster_pools_decide_where_an_accelerator_pinned_pod_lands(
    pools: list[NodePoolFacts], warned: bool
) -> None:
    engine = engine_with(node_pools={p.name: p for p in pools}, settings=NEW_GKE)
    found = gpu_machine(judge(gpu_pod(1, {ACCELERATOR: "nvidia-l4"}), engine))
    assert bool(found) is warned
    if found and L4_24 in pools:
        assert 'node pool "l4-24"' in found[0][1]


# ---- 2. exact types in messages


@pytest.mark.parametrize(
    ("pod", "use"),
    [
        pytest.param(
            gpu_pod(2, {INSTANCE_TYPE: "g2-standard-24"}), L4_MULTI, id="two-gpus-on-g2-standard-24"
        ),
        pytest.param(
            gpu_pod(1, {INSTANCE_TYPE: "g2-standard-24"}),
            L4_ONE | L4_MULTI,
            id="one-gpu-on-g2-standard-24",
        ),
        pytest.param(
            gpu_pod(1, {INSTANCE_TYPE: "n2-standard-8"}), ALL_SUPPORTED, id="one-gpu-on-n2"
        ),
    ],
)
def test_denial_names_exact_supported_types_not_a_wildcard(pod: Pod, use: set[str]) -> None:
    decision = judge(pod)
    [(_, message)] = [m for m in gpu_machine(decision) if "no GPU snapshots" in m[1]]
    assert not decision.allowed
    assert "*" not in message
    assert suggestion(message) == use
    assert "g2-standard-24" not in suggestion(message)


# ---- 3. DaemonSet pods bound to a node by name


def test_daemonset_pod_on_unknown_node_is_not_denied_for_lacking_pins() -> None:
    pod = daemon_pod("gke-l4-pool-abc")
    decision = judge(pod)
    assert decision.allowed
    [(rule, path, message)] = lines(decision)
    assert rule == "machine-unpinned"
    assert path == f"{TERMS}[0].matchFields[0]"
    assert 'node "gke-l4-pool-abc"' in message
    assert "not checked" in message and "DaemonSet template" in message


def l4_node(machine_type: str, gpus: str) -> NodeView:
    return NodeView(
        "l4-pool",
        (
            (ACCELERATOR, "nvidia-l4"),
            (ACCELERATOR_COUNT, gpus),
            (FAMILY, "g2"),
            (INSTANCE_TYPE, machine_type),
        ),
    )


NODES = {
    "gke-l4-48": l4_node("g2-standard-48", "4"),
    "gke-l4-24": l4_node("g2-standard-24", "2"),
    "gke-e2": NodeView("e2-pool", ((FAMILY, "e2"), (INSTANCE_TYPE, "e2-standard-8"))),
}


@pytest.mark.parametrize(
    ("pod", "settings", "deny", "warn"),
    [
        pytest.param(
            daemon_pod("gke-l4-48", 4),
            NEW_GKE,
            set(),
            set(),
            id="allows-four-l4-on-known-g2-standard-48",
        ),
        pytest.param(
            daemon_pod("gke-l4-48", 1),
            {},
            {"gpu-whole-node"},
            set(),
            id="denies-one-l4-on-four-gpu-node-old-gke",
        ),
        pytest.param(
            daemon_pod("gke-l4-24", 2),
            NEW_GKE,
            {"gpu-machine"},
            set(),
            id="denies-known-g2-standard-24-node",
        ),
        pytest.param(
            daemon_pod("gke-e2", 1),
            NEW_GKE,
            {"gpu-machine", "machine-family"},
            set(),
            id="denies-gpu-pod-on-known-e2-node",
        ),
    ],
)
def test_daemonset_pod_is_placed_by_its_known_node(
    pod: Pod, settings: dict[str, Any], deny: set[str], warn: set[str]
) -> None:
    decision = judge(pod, engine_with(nodes=NODES, settings=settings))
    assert outcomes(decision) == {"deny": deny, "warn": warn}


def test_daemonset_pod_keeps_its_node_selector() -> None:
    pod = daemon_pod("gke-l4-pool-abc", 1)
    pod["spec"]["nodeSelector"] = {INSTANCE_TYPE: "a3-highgpu-8g"}
    decision = judge(pod)
    assert outcomes(decision)["deny"] == {"gpu-machine"}


@pytest.fixture
def kube_engine(tmp_path: Path) -> Iterator[Engine]:
    """The real rules in kube mode against the captured Nodes (``n1``: g2-standard-48, 4 x L4;
    ``gke-snap-e2-pool-7c1f``: e2-standard-8) and cluster version 1.35.3-gke.1234000."""
    with FakeApiServer() as api:
        settings = make_settings(
            source={
                "kind": "kube",
                "kubeconfig": api.kubeconfig(tmp_path),
                "backoff_initial_seconds": 0.01,
                "backoff_max_seconds": 0.05,
            }
        )
        engine = build_engine(settings)
        try:
            api.wait_for(lambda: engine.state().synced)
            yield engine
        finally:
            stop_source(engine)


@pytest.mark.parametrize(
    ("node", "allowed"),
    [
        pytest.param("n1", True, id="allows-daemonset-pod-on-watched-l4x4-node"),
        pytest.param("gke-snap-e2-pool-7c1f", False, id="denies-daemonset-pod-on-watched-e2-node"),
    ],
)
def test_watched_nodes_place_daemonset_pods(kube_engine: Engine, node: str, allowed: bool) -> None:
    review = load_review("03")
    pod = review["request"]["object"]
    spec = pod["spec"]
    del spec["nodeSelector"]
    spec["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [expr("metadata.name", "In", node)]}]
            }
        }
    }
    decision = admit(AdmissionRequest.model_validate(review["request"]), "validate", kube_engine)
    assert decision.allowed is allowed
    assert "machine-unpinned" not in outcomes(decision)["warn"]


# ---- 4. the legacy instance-type label


@pytest.mark.parametrize(
    ("pod", "deny"),
    [
        pytest.param(
            pinned(cpu_pod(), {LEGACY_INSTANCE_TYPE: "e2-standard-8"}),
            {"machine-family"},
            id="denies-e2-by-legacy-label",
        ),
        pytest.param(
            gpu_pod(1, {LEGACY_INSTANCE_TYPE: "a3-highgpu-8g"}),
            {"gpu-machine"},
            id="denies-a3-highgpu-8g-by-legacy-label",
        ),
        pytest.param(
            gpu_pod(1, {LEGACY_INSTANCE_TYPE: "g2-standard-8"}),
            set(),
            id="allows-g2-standard-8-by-legacy-label",
        ),
        pytest.param(
            gpu_pod(1, {LEGACY_INSTANCE_TYPE: "g2-standard-8", INSTANCE_TYPE: "g2-standard-8"}),
            set(),
            id="allows-both-labels-agreeing",
        ),
    ],
)
def test_legacy_instance_type_label_is_read(pod: Pod, deny: set[str]) -> None:
    decision = judge(pod)
    assert outcomes(decision) == {"deny": deny, "warn": set()}


def test_legacy_label_path_points_at_the_legacy_key() -> None:
    [(rule, path, _)] = lines(judge(pinned(cpu_pod(), {LEGACY_INSTANCE_TYPE: "e2-standard-8"})))
    assert (rule, path) == ("machine-family", f'spec.nodeSelector["{LEGACY_INSTANCE_TYPE}"]')


def test_conflicting_legacy_and_ga_labels_are_a_contradiction_stated_by_the_ga_key() -> None:
    spec = {"nodeSelector": {LEGACY_INSTANCE_TYPE: "e2-standard-8", INSTANCE_TYPE: "n2-standard-8"}}
    pin = node_pins(spec, "spec")[INSTANCE_TYPE]
    assert LEGACY_INSTANCE_TYPE not in node_pins(spec, "spec")
    assert pin.values == frozenset()  # no node carries two instance types: never schedulable
    assert pin.path == f'spec.nodeSelector["{INSTANCE_TYPE}"]'


def test_legacy_label_in_an_affinity_term_intersects_with_the_ga_key() -> None:
    spec = with_terms(
        cpu_pod(),
        {
            "matchExpressions": [
                expr(LEGACY_INSTANCE_TYPE, "In", "n2-standard-4", "e2-standard-4"),
                expr(INSTANCE_TYPE, "In", "n2-standard-4"),
            ]
        },
    )["spec"]
    pin = node_pins(spec, "spec")[INSTANCE_TYPE]
    assert pin.values == frozenset({"n2-standard-4"})
    assert pin.path == f"{TERMS}[0].matchExpressions[1]"


def test_matchfields_node_names_are_a_pin_of_their_own() -> None:
    selection = node_selection(daemon_pod("node-a")["spec"], "spec")
    pin = selection.pins[NODE_NAME]
    assert (pin.values, pin.exhaustive) == (frozenset({"node-a"}), True)
    assert selection.terms_path == TERMS


# ---- 5. families pinned term by term, and where "not pinned" points


def test_terms_pinning_one_family_by_different_labels_pin_the_pod() -> None:
    pod = with_terms(
        cpu_pod(),
        {"matchExpressions": [expr(FAMILY, "In", "n2")]},
        {"matchExpressions": [expr(INSTANCE_TYPE, "In", "n2-standard-4")]},
    )
    decision = judge(pod)
    assert decision.allowed
    assert lines(decision) == []


def test_terms_pinning_two_families_by_different_labels_warn_at_the_terms() -> None:
    pod = with_terms(
        cpu_pod(),
        {"matchExpressions": [expr(FAMILY, "In", "n2")]},
        {"matchExpressions": [expr(INSTANCE_TYPE, "In", "c3-standard-4")]},
    )
    [(rule, path, message)] = lines(judge(pod))
    assert (rule, path) == ("machine-unpinned", TERMS)
    assert "c3, n2" in message


@pytest.mark.parametrize(
    ("pod", "path", "fix"),
    [
        pytest.param(
            with_terms(cpu_pod(), {"matchExpressions": [expr(FAMILY, "NotIn", "e2")]}),
            TERMS,
            f"pin {FAMILY} in nodeSelector",
            id="affinity-without-family-points-at-the-terms",
        ),
        pytest.param(
            with_terms(
                cpu_pod(),
                {"matchExpressions": [expr(FAMILY, "In", "n2")]},
                {"matchExpressions": [expr(INSTANCE_TYPE, "Exists")]},
            ),
            TERMS,
            f"pin {FAMILY} in nodeSelector",
            id="one-term-without-family-points-at-the-terms",
        ),
        pytest.param(
            pinned(cpu_pod(), {"disktype": "ssd"}),
            "spec.nodeSelector",
            f"pin {FAMILY} in nodeSelector",
            id="selector-without-family-points-at-the-selector",
        ),
    ],
)
def test_not_pinned_points_at_a_field_that_exists(pod: Pod, path: str, fix: str) -> None:
    [(rule, found, message)] = lines(judge(pod))
    assert (rule, found) == ("machine-unpinned", path)
    assert message.endswith(fix)
    assert resolve(pod, found)


def test_pod_with_no_node_selection_at_all_is_pointed_at_its_spec() -> None:
    pod = cpu_pod()
    del pod["spec"]["nodeSelector"]
    [(rule, path, _)] = lines(judge(pod))
    assert (rule, path) == ("machine-unpinned", "spec")


def test_every_finding_path_of_these_pods_exists_in_the_pod() -> None:
    pods = [
        gpu_pod(1, {ACCELERATOR: "nvidia-l4"}),
        gpu_pod(1, {FAMILY: "a3"}),
        daemon_pod("gke-unknown"),
        pinned(cpu_pod(), {LEGACY_INSTANCE_TYPE: "e2-standard-8"}),
        with_terms(cpu_pod(), {"matchExpressions": [expr(FAMILY, "NotIn", "e2")]}),
    ]
    for pod in pods:
        for rule, path, _ in lines(judge(pod)):
            assert resolve(pod, path), (rule, path)
