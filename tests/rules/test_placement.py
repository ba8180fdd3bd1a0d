"""Placement gaps: pods that pin less (or differently) than a machine type, judged correctly.

- A GPU pod pinned only by accelerator or family may land on a GPU machine type that Pod snapshots
  do not support (docs/gke-facts.md#section-4: the supported types are an explicit list; Compute
  Engine "GPU machine types": ``nvidia-l4`` is on every G2 shape, ``g2-standard-24`` with 2 GPUs
  included; ``nvidia-h100-80gb`` on ``a3-highgpu-1g/2g/4g/8g`` and ``a3-edgegpu-8g``).
- Messages name exact machine types, never a wildcard that includes a rejected one.
- DaemonSet pods: the controller replaces the template's required affinity with one
  ``matchFields`` ``metadata.name In [<node>]`` term (k8s pkg/controller/daemon/util
  ``ReplaceDaemonSetPodNodeNameNodeAffinity``); the template was judged at DaemonSet admission.
- The legacy ``beta.kubernetes.io/instance-type`` label is still on nodes (k8s.io/cloud-provider
  node controller ``labelReconcileInfo`` keeps it equal to ``node.kubernetes.io/instance-type``).
- Affinity terms that each pin the same family by different labels pin the pod to it.
- Pins that leave only unsupported types (``gke-accelerator-count: "8"`` with H100: Compute
  Engine has only ``a3-highgpu-8g``/``a3-edgegpu-8g``) are denied like pinning such a type.
- Before GKE 1.35.0-gke.1738000 a pod on a multi-GPU node takes all its GPUs
  (docs/gke-facts.md#section-4): what a message tells to use must then pass ``gpu-whole-node`` too.
- The API server cuts each warning at 256 characters (k8s.io/apiserver/pkg/warning): messages
  fit with their fix. ``NotIn``/``Gt``/``Lt`` follow k8s.io/apimachinery ``labels.Requirement``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.admission.test_controllers import admit_controller, controller
from tests.conftest import load_review, make_settings
from tests.rules.test_facts import engine_with, gpu_container, pinned
from tests.rules.test_table import cpu_pod, judge, lines, outcomes, ready_pod
from tests.support.fake_apiserver import FakeApiServer
from webhook.admission.engine import Engine, admit
from webhook.kube.gke import INSTANCE_TYPE, LEGACY_INSTANCE_TYPE, NODE_NAME
from webhook.kube.responses import Decision
from webhook.kube.review import AdmissionRequest
from webhook.pod.node_pins import Exclusion, node_pins, node_selection
from webhook.server.runner import open_source
from webhook.snapshots.state import NodePoolFacts, NodeView

Pod = dict[str, Any]
ACCELERATOR = "cloud.google.com/gke-accelerator"
ACCELERATOR_COUNT = "cloud.google.com/gke-accelerator-count"
FAMILY = "cloud.google.com/machine-family"
NODE_POOL = "cloud.google.com/gke-nodepool"
TERMS = (
    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
)
NEW_GKE = {"rules": {"gke_version": "1.35.3-gke.1234000"}}

# docs/gke-facts.md#section-4, per accelerator: the supported machine types and their GPU counts.
L4_ONE = {"g2-standard-4", "g2-standard-8", "g2-standard-12", "g2-standard-16", "g2-standard-32"}
L4_MULTI = {"g2-standard-48", "g2-standard-96"}
ALL_SUPPORTED = L4_ONE | L4_MULTI | {"a2-highgpu-1g", "a2-ultragpu-1g", "a3-highgpu-1g"}
ALL_SUPPORTED |= {"g4-standard-48"}  # validated in the field (rules.validated_gpu_machine_types)


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
    ("pod", "settings", "use"),
    [
        pytest.param(
            gpu_pod(2, {INSTANCE_TYPE: "g2-standard-24"}),
            {},
            L4_MULTI,
            id="two-gpus-on-g2-standard-24",
        ),
        pytest.param(
            gpu_pod(1, {INSTANCE_TYPE: "g2-standard-24"}),
            {},
            L4_ONE,  # version unknown: a 1-GPU pod must not take part of a 4/8-GPU node
            id="one-gpu-on-g2-standard-24-old-gke",
        ),
        pytest.param(
            gpu_pod(1, {INSTANCE_TYPE: "g2-standard-24"}),
            NEW_GKE,
            L4_ONE | L4_MULTI,
            id="one-gpu-on-g2-standard-24-new-gke",
        ),
        pytest.param(
            gpu_pod(1, {INSTANCE_TYPE: "n2-standard-8"}),
            {},
            ALL_SUPPORTED - L4_MULTI,
            id="one-gpu-on-n2-old-gke",
        ),
        pytest.param(
            gpu_pod(1, {INSTANCE_TYPE: "n2-standard-8"}),
            NEW_GKE,
            ALL_SUPPORTED,
            id="one-gpu-on-n2-new-gke",
        ),
    ],
)
def test_denial_names_exact_supported_types_not_a_wildcard(
    pod: Pod, settings: dict[str, Any], use: set[str]
) -> None:
    decision = judge(pod, engine_with(settings=settings))
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
        source = open_source(settings)
        engine = source.engine
        try:
            api.wait_for(lambda: engine.state().synced)
            yield engine
        finally:
            source.stop()


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


# ---- 6. pins that leave only unsupported machine types (gke-accelerator-count, node pools)


def terms_pod(gpus: int, selector: dict[str, str], *expressions: dict[str, Any]) -> Pod:
    """A ``gpus``-GPU pod with nodeSelector ``selector`` and one required term of
    ``expressions``."""
    pod = with_terms(gpu_pod(gpus, {}), {"matchExpressions": list(expressions)})
    pod["spec"]["nodeSelector"] = selector
    return pod


def pools_engine(*pools: NodePoolFacts, settings: dict[str, Any] | None = None) -> Engine:
    return engine_with(node_pools={p.name: p for p in pools}, settings=settings or NEW_GKE)


# Compute Engine "GPU machine types": H100 80GB with 8 GPUs is a3-highgpu-8g and a3-edgegpu-8g;
# every a3 type with 8 GPUs adds a3-megagpu-8g (H100 Mega) and a3-ultragpu-8g (H200); the only
# 2 x L4 shape is g2-standard-24.
H100_8 = {"a3-highgpu-8g", "a3-edgegpu-8g"}
A3_8 = H100_8 | {"a3-megagpu-8g", "a3-ultragpu-8g"}


@pytest.mark.parametrize(
    ("pod", "engine", "lands_on", "pin_instead", "path"),
    [
        pytest.param(
            gpu_pod(1, {ACCELERATOR: "nvidia-h100-80gb", ACCELERATOR_COUNT: "8"}),
            engine_with(settings=NEW_GKE),
            H100_8,
            {"a3-highgpu-1g"},
            f'spec.nodeSelector["{ACCELERATOR_COUNT}"]',
            id="denies-one-h100-pinned-to-eight-gpu-nodes",
        ),
        pytest.param(
            gpu_pod(1, {ACCELERATOR: "nvidia-l4", ACCELERATOR_COUNT: "2"}),
            engine_with(settings=NEW_GKE),
            {"g2-standard-24"},
            L4_ONE | L4_MULTI,
            f'spec.nodeSelector["{ACCELERATOR_COUNT}"]',
            id="denies-one-l4-pinned-to-two-gpu-nodes",
        ),
        pytest.param(
            gpu_pod(2, {ACCELERATOR: "nvidia-l4", ACCELERATOR_COUNT: "2"}),
            engine_with(settings=NEW_GKE),
            {"g2-standard-24"},
            L4_MULTI,
            f'spec.nodeSelector["{ACCELERATOR_COUNT}"]',
            id="denies-two-l4-pinned-to-two-gpu-nodes",
        ),
        pytest.param(
            gpu_pod(1, {FAMILY: "g2", ACCELERATOR_COUNT: "2"}),
            engine_with(),
            {"g2-standard-24"},
            L4_ONE,  # old GKE: a 1-GPU pod on a 4/8-GPU node is refused by gpu-whole-node
            f'spec.nodeSelector["{ACCELERATOR_COUNT}"]',
            id="denies-g2-family-pinned-to-two-gpu-nodes-on-old-gke",
        ),
        pytest.param(
            gpu_pod(1, {FAMILY: "a3", ACCELERATOR_COUNT: "8"}),
            engine_with(settings=NEW_GKE),
            A3_8,
            {"a3-highgpu-1g"},
            f'spec.nodeSelector["{ACCELERATOR_COUNT}"]',
            id="denies-a3-family-pinned-to-eight-gpu-nodes",
        ),
        pytest.param(
            terms_pod(
                1,
                {ACCELERATOR: "nvidia-h100-80gb"},
                expr("kubernetes.io/arch", "In", "amd64"),
                expr(ACCELERATOR_COUNT, "In", "8"),
            ),
            engine_with(settings=NEW_GKE),
            H100_8,
            {"a3-highgpu-1g"},
            f"{TERMS}[0].matchExpressions[1]",
            id="denies-count-pinned-in-an-affinity-term",
        ),
        pytest.param(
            gpu_pod(1, {ACCELERATOR: "nvidia-l4"}),
            pools_engine(L4_24, CPU_POOL),
            {"g2-standard-24"},
            L4_ONE | L4_MULTI,
            f'spec.nodeSelector["{ACCELERATOR}"]',
            id="denies-l4-pod-whose-only-l4-pool-is-g2-standard-24",
        ),
        pytest.param(
            gpu_pod(2, {ACCELERATOR: "nvidia-l4"}),
            pools_engine(L4_8, L4_24),
            {"g2-standard-24"},
            L4_MULTI,
            f'spec.nodeSelector["{ACCELERATOR}"]',
            id="denies-two-l4-pod-that-fits-only-the-g2-standard-24-pool",
        ),
    ],
)
def test_pins_that_leave_only_unsupported_types_are_denied(
    pod: Pod, engine: Engine, lands_on: set[str], pin_instead: set[str], path: str
) -> None:
    decision = judge(pod, engine)
    assert not decision.allowed
    assert outcomes(decision)["deny"] == {"gpu-machine"}  # as when pinning such a type by name
    [(found, message)] = gpu_machine(decision)
    assert found == path
    assert named_types(message) - suggestion(message) == lands_on
    assert suggestion(message) == pin_instead
    assert ("drop the count pin" in message) is (path != f'spec.nodeSelector["{ACCELERATOR}"]')


@pytest.mark.parametrize(
    ("pod", "engine"),
    [
        pytest.param(
            gpu_pod(1, {ACCELERATOR: "nvidia-l4"}),
            pools_engine(L4_8, L4_24),
            id="one-l4-fits-a-supported-pool-too",
        ),
        pytest.param(
            terms_pod(1, {ACCELERATOR: "nvidia-l4"}, expr(ACCELERATOR_COUNT, "In", "1", "2")),
            engine_with(settings=NEW_GKE),
            id="count-pin-that-admits-one-gpu-nodes-too",
        ),
    ],
)
def test_pins_that_also_admit_supported_types_only_warn(pod: Pod, engine: Engine) -> None:
    decision = judge(pod, engine)
    assert decision.allowed
    assert outcomes(decision)["warn"] == {"gpu-machine"}


# ---- 7. on old GKE, what a message tells to use is accepted (gpu-whole-node agrees)


def offers(message: str, gpus: int) -> dict[str, int]:
    """Machine type -> GPUs to request, from what the message tells to use: ``X (request all 4
    GPUs)`` and ``Y (all 8)`` name the count; a bare type keeps the pod's ``gpus``."""
    tail = re.split(r"; use |node\.kubernetes\.io/instance-type: ", message)[-1]
    found: dict[str, int] = {}
    for segment in re.split(r", | or ", tail):
        count = re.search(r"\ball (\d+)\b", segment)
        for name in named_types(segment):
            found[name] = int(count.group(1)) if count else gpus
    return found


@pytest.mark.parametrize(
    ("pod", "settings", "rule", "expected"),
    [
        pytest.param(
            gpu_pod(2, {ACCELERATOR: "nvidia-l4"}),
            {},
            "gpu-machine",
            {"g2-standard-48": 4, "g2-standard-96": 8},
            id="two-l4-by-accelerator-is-told-to-request-all-gpus-old-gke",
        ),
        pytest.param(
            gpu_pod(2, {INSTANCE_TYPE: "g2-standard-24"}),
            {},
            "gpu-machine",
            {"g2-standard-48": 4, "g2-standard-96": 8},
            id="two-l4-on-g2-standard-24-is-told-to-request-all-gpus-old-gke",
        ),
        pytest.param(
            gpu_pod(1, {INSTANCE_TYPE: "g2-standard-24"}),
            {},
            "gpu-machine",
            dict.fromkeys(L4_ONE, 1),
            id="one-l4-on-g2-standard-24-is-offered-one-gpu-types-old-gke",
        ),
        pytest.param(
            gpu_pod(2, {ACCELERATOR: "nvidia-h100-80gb"}),
            {},
            "gpu-multi-l4",
            {"g2-standard-48": 4, "g2-standard-96": 8},
            id="two-h100-is-told-to-request-all-l4-gpus-old-gke",
        ),
        pytest.param(
            gpu_pod(2, {}),
            {},
            "gpu-multi-l4",
            {"g2-standard-48": 4, "g2-standard-96": 8},
            id="two-unpinned-gpus-are-told-to-request-all-gpus-old-gke",
        ),
        pytest.param(
            gpu_pod(3, {INSTANCE_TYPE: "g2-standard-8"}),
            {},
            "gpu-multi-l4",
            {"g2-standard-48": 4, "g2-standard-96": 8},
            id="three-l4-on-one-gpu-type-is-told-to-request-all-gpus-old-gke",
        ),
        pytest.param(
            gpu_pod(1, {ACCELERATOR: "nvidia-l4", ACCELERATOR_COUNT: "2"}),
            {},
            "gpu-machine",
            dict.fromkeys(L4_ONE, 1),
            id="one-l4-pinned-to-two-gpu-nodes-is-offered-one-gpu-types-old-gke",
        ),
        pytest.param(
            gpu_pod(2, {INSTANCE_TYPE: "g2-standard-24"}),
            NEW_GKE,
            "gpu-machine",
            {"g2-standard-48": 2, "g2-standard-96": 2},
            id="two-l4-on-g2-standard-24-may-use-a-subset-on-new-gke",
        ),
    ],
)
def test_suggested_types_are_accepted_when_pinned(
    pod: Pod, settings: dict[str, Any], rule: str, expected: dict[str, int]
) -> None:
    engine = engine_with(settings=settings)
    gpus = sum(int(c["resources"]["limits"]["nvidia.com/gpu"]) for c in pod["spec"]["containers"])
    [message] = [m for r, _, m in lines(judge(pod, engine)) if r == rule]
    assert offers(message, gpus) == expected
    for machine_type, count in expected.items():
        decision = judge(gpu_pod(count, {INSTANCE_TYPE: machine_type}), engine)
        assert outcomes(decision)["deny"] == set(), (machine_type, count, decision.message)


# ---- 8. every message fits the API server's 256-character warning line, fix included

PARTITION = "cloud.google.com/gke-gpu-partition-size"
SHARING = "cloud.google.com/gke-gpu-sharing-strategy"
ARCH = expr("kubernetes.io/arch", "In", "amd64")
POOL_NAME = "l4-24-" + "x" * 60
LONG_POOL = NodePoolFacts(
    name=POOL_NAME,
    node_count=1,
    instance_types=frozenset({"g2-standard-24"}),
    machine_families=frozenset({"g2"}),
    accelerators=frozenset({"nvidia-l4"}),
    accelerator_counts=frozenset({"2"}),
)


def affinity_pod(gpus: int, *expressions: dict[str, Any]) -> Pod:
    """A ``gpus``-GPU pod (a CPU pod for 0) pinned only by one term: arch first, so the pins
    sit at ``matchExpressions[1]`` and later (longer paths)."""
    pod = cpu_pod() if gpus == 0 else gpu_pod(gpus, {})
    return with_terms(pod, {"matchExpressions": [ARCH, *expressions]})


FIT_CASES = [
    pytest.param(
        lambda: gpu_pod(1, {FAMILY: "a2"}),
        NEW_GKE,
        "gpu-machine",
        f"pin {INSTANCE_TYPE}: a2-highgpu-1g",
        id="a2-family-selector",
    ),
    pytest.param(
        lambda: affinity_pod(1, expr(FAMILY, "In", "a2")),
        NEW_GKE,
        "gpu-machine",
        f"pin {INSTANCE_TYPE}: a2-highgpu-1g",
        id="a2-family-affinity",
    ),
    pytest.param(
        lambda: affinity_pod(
            1, expr(ACCELERATOR, "In", "nvidia-h100-80gb"), expr(ACCELERATOR_COUNT, "In", "8")
        ),
        NEW_GKE,
        "gpu-machine",
        f"pin {INSTANCE_TYPE}: a3-highgpu-1g",
        id="h100-count-eight-affinity",
    ),
    pytest.param(
        lambda: affinity_pod(2, expr(ACCELERATOR, "In", "nvidia-l4")),
        {},
        "gpu-machine",
        f"pin {INSTANCE_TYPE}: g2-standard-48 (request all 4 GPUs)",
        id="two-l4-accelerator-affinity-old-gke",
    ),
    pytest.param(
        lambda: affinity_pod(2, expr(INSTANCE_TYPE, "In", "g2-standard-24")),
        {},
        "gpu-machine",
        "use g2-standard-48 (request all 4 GPUs)",
        id="two-l4-on-g2-standard-24-affinity-old-gke",
    ),
    pytest.param(
        lambda: affinity_pod(2, expr(ACCELERATOR, "In", "nvidia-h100-80gb")),
        {},
        "gpu-multi-l4",
        "replace nvidia-h100-80gb with nvidia-l4",
        id="two-h100-affinity-old-gke",
    ),
    pytest.param(
        lambda: affinity_pod(1, expr(INSTANCE_TYPE, "In", "g2-standard-48")),
        {},
        "gpu-whole-node",
        "request",
        id="one-l4-on-g2-standard-48-affinity-old-gke",
    ),
    pytest.param(
        lambda: affinity_pod(
            1, expr(ACCELERATOR, "In", "nvidia-tesla-a100"), expr(PARTITION, "In", "1g.5gb")
        ),
        NEW_GKE,
        "gpu-mig",
        f"remove the {PARTITION} affinity term and request whole GPUs",
        id="mig-affinity",
    ),
    pytest.param(
        lambda: affinity_pod(
            1, expr(ACCELERATOR, "In", "nvidia-l4"), expr(SHARING, "In", "time-sharing")
        ),
        NEW_GKE,
        "gpu-sharing",
        "prefer a whole GPU",
        id="sharing-affinity",
    ),
    pytest.param(
        lambda: affinity_pod(1, expr(ACCELERATOR, "In", "nvidia-tesla-t4")),
        NEW_GKE,
        "gpu-machine",
        "use nvidia-l4",
        id="unsupported-accelerator-affinity",
    ),
    pytest.param(
        lambda: affinity_pod(1, expr(FAMILY, "In", "n1")),
        NEW_GKE,
        "gpu-machine",
        "use a2, a3, g2",
        id="gpu-on-n1-affinity",
    ),
    pytest.param(
        lambda: affinity_pod(0, expr(FAMILY, "In", "e2")),
        NEW_GKE,
        "machine-family",
        "use any other series",
        id="e2-affinity",
    ),
    pytest.param(
        lambda: affinity_pod(0, expr(FAMILY, "In", "zz" + "9" * 30)),
        NEW_GKE,
        "machine-family",
        "add it to rules.known_machine_families",
        id="unknown-family-affinity",
    ),
    pytest.param(
        lambda: affinity_pod(0, expr(FAMILY, "In", "n2", "c3")),
        NEW_GKE,
        "machine-unpinned",
        "pin one",
        id="two-families-affinity",
    ),
    pytest.param(
        lambda: affinity_pod(0, expr(FAMILY, "NotIn", "e2")),
        NEW_GKE,
        "machine-unpinned",
        f"pin {FAMILY} in nodeSelector",
        id="unpinned-affinity",
    ),
    pytest.param(
        lambda: affinity_pod(1, expr(ACCELERATOR, "In", "nvidia-l4")),
        {**NEW_GKE, "pools": (LONG_POOL,)},
        "gpu-machine",
        f"pin {INSTANCE_TYPE}: g2-standard-",
        id="only-a-long-named-g2-standard-24-pool",
    ),
]


def admit_as(kind: str, pod: Pod, engine: Engine) -> Decision:
    """``pod`` admitted as itself or as the pod template of a ``kind`` controller."""
    if kind == "Pod":
        return judge(pod, engine)
    template = {"metadata": {"labels": pod["metadata"]["labels"]}, "spec": pod["spec"]}
    return admit_controller(kind, controller(kind, template), engine)


@pytest.mark.parametrize("kind", ["Pod", "Deployment", "CronJob"])
@pytest.mark.parametrize(("build", "case", "rule", "fix"), FIT_CASES)
def test_placement_messages_fit_a_warning_line_with_their_fix(
    kind: str, build: Callable[[], Pod], case: dict[str, Any], rule: str, fix: str
) -> None:
    """``case``: settings, plus ``pools`` (cluster node pool facts)."""
    settings = {key: value for key, value in case.items() if key != "pools"}
    pools = {p.name: p for p in case.get("pools", ())}
    engine = engine_with(settings=settings, node_pools=pools)
    findings = admit_as(kind, build(), engine).audit["findings"]
    ours = [f for f in findings if f.rule.startswith(("gpu-", "machine-"))]
    for f in ours:
        line = f"[{f.rule}] {f.path}: {f.message}"  # how admission shows it as a warning
        assert len(line) <= 256, line
    assert any(f.rule == rule and fix in f.message for f in ours), [f.message for f in ours]


# ---- 9. NotIn / Gt / Lt exclusions in affinity terms


@pytest.mark.parametrize(
    ("operator", "values", "label", "admits"),
    [
        pytest.param("NotIn", ("2",), "1", True, id="notin-passes-another-value"),
        pytest.param("NotIn", ("2",), "2", False, id="notin-refuses-a-listed-value"),
        pytest.param("NotIn", ("2",), None, True, id="notin-passes-a-node-without-the-label"),
        pytest.param("NotIn", (), "1", False, id="notin-without-values-matches-nothing"),
        pytest.param("Lt", ("2",), "1", True, id="lt-passes-a-smaller-count"),
        pytest.param("Lt", ("2",), "2", False, id="lt-refuses-an-equal-count"),
        pytest.param("Gt", ("1",), "8", True, id="gt-passes-a-larger-count"),
        pytest.param("Gt", ("1",), None, False, id="gt-refuses-a-node-without-the-label"),
        pytest.param("Gt", ("1",), "x", False, id="gt-refuses-a-non-integer-label"),
        pytest.param("Gt", ("x",), "8", False, id="gt-with-a-non-integer-bound-matches-nothing"),
        pytest.param("Gt", ("1", "2"), "8", False, id="gt-with-two-values-matches-nothing"),
        pytest.param("Lt", ("+3",), "-1", True, id="signed-integers-compare-like-parseint"),
        pytest.param("Lt", ("9" * 5000,), "1", False, id="bound-beyond-int64-matches-nothing"),
        pytest.param("Gt", ("0",), "\u00b2", False, id="superscript-two-is-not-an-integer"),
        pytest.param("DoesNotExist", (), None, True, id="does-not-exist-passes-no-label"),
        pytest.param("DoesNotExist", (), "1", False, id="does-not-exist-refuses-the-label"),
    ],
)
def test_exclusions_follow_kubernetes_label_requirements(
    operator: Any, values: tuple[str, ...], label: str | None, admits: bool
) -> None:
    assert Exclusion(operator, values).admits(label) is admits


@pytest.mark.parametrize(
    ("pod", "settings", "outcome"),
    [
        pytest.param(
            terms_pod(
                1, {ACCELERATOR: "nvidia-l4"}, expr(INSTANCE_TYPE, "NotIn", "g2-standard-24")
            ),
            NEW_GKE,
            None,
            id="instance-type-notin-g2-standard-24-leaves-only-supported-types",
        ),
        pytest.param(
            terms_pod(
                1, {ACCELERATOR: "nvidia-l4"}, expr(LEGACY_INSTANCE_TYPE, "NotIn", "g2-standard-24")
            ),
            NEW_GKE,
            None,
            id="legacy-instance-type-notin-counts-too",
        ),
        pytest.param(
            terms_pod(1, {ACCELERATOR: "nvidia-l4"}, expr(ACCELERATOR_COUNT, "Lt", "2")),
            NEW_GKE,
            None,
            id="count-lt-2-means-one-gpu-nodes",
        ),
        pytest.param(
            terms_pod(1, {ACCELERATOR: "nvidia-l4"}, expr(ACCELERATOR_COUNT, "NotIn", "2")),
            NEW_GKE,
            None,
            id="count-notin-2-excludes-g2-standard-24",
        ),
        pytest.param(
            terms_pod(1, {FAMILY: "a3"}, expr(ACCELERATOR_COUNT, "Lt", "2")),
            NEW_GKE,
            None,
            id="a3-family-with-count-lt-2-is-only-a3-highgpu-1g",
        ),
        pytest.param(
            terms_pod(1, {ACCELERATOR: "nvidia-l4"}, expr(ACCELERATOR_COUNT, "Gt", "1")),
            NEW_GKE,
            "warn",
            id="count-gt-1-still-admits-g2-standard-24",
        ),
        pytest.param(
            terms_pod(1, {ACCELERATOR: "nvidia-l4"}, expr(INSTANCE_TYPE, "NotIn", "g2-standard-8")),
            NEW_GKE,
            "warn",
            id="notin-another-type-still-admits-g2-standard-24",
        ),
        pytest.param(
            pinned(
                with_terms(
                    gpu_pod(1, {}),
                    {"matchExpressions": [expr(ACCELERATOR_COUNT, "Lt", "2")]},
                    {"matchExpressions": [expr(INSTANCE_TYPE, "Exists")]},
                ),
                {ACCELERATOR: "nvidia-l4"},
            ),
            NEW_GKE,
            "warn",
            id="an-ored-term-without-the-exclusion-still-admits-g2-standard-24",
        ),
        pytest.param(
            terms_pod(
                1, {ACCELERATOR: "nvidia-h100-80gb"}, expr(INSTANCE_TYPE, "NotIn", "a3-highgpu-1g")
            ),
            NEW_GKE,
            "deny",
            id="h100-pod-excluding-a3-highgpu-1g-can-only-land-on-unsupported-types",
        ),
    ],
)
def test_affinity_exclusions_decide_where_the_pod_may_land(
    pod: Pod, settings: dict[str, Any], outcome: str | None
) -> None:
    decision = judge(pod, engine_with(settings=settings))
    found = {k for k, rules in outcomes(decision).items() if "gpu-machine" in rules}
    assert found == ({outcome} if outcome else set())


@pytest.mark.parametrize(
    ("pod", "warned"),
    [
        pytest.param(gpu_pod(1, {ACCELERATOR: "nvidia-l4"}), True, id="l4-may-land-on-4-gpu-nodes"),
        pytest.param(
            terms_pod(1, {ACCELERATOR: "nvidia-l4"}, expr(ACCELERATOR_COUNT, "Lt", "2")),
            False,
            id="count-lt-2-rules-out-multi-gpu-nodes",
        ),
    ],
)
def test_whole_node_warning_applies_count_exclusions_on_old_gke(pod: Pod, warned: bool) -> None:
    decision = judge(pod)
    assert ("gpu-whole-node" in outcomes(decision)["warn"]) is warned


# ---- 10. one finding per cause


@pytest.mark.parametrize(
    ("pod", "engine", "expected"),
    [
        pytest.param(
            daemon_pod("gke-l4-48", 1),
            engine_with(nodes=NODES),
            [("gpu-whole-node", "deny")],
            id="daemonset-pod-on-known-g2-standard-48-node-old-gke",
        ),
        pytest.param(
            gpu_pod(1, {INSTANCE_TYPE: "g2-standard-48", ACCELERATOR_COUNT: "4"}),
            engine_with(),
            [("gpu-whole-node", "deny")],
            id="instance-type-and-count-pins-of-one-node-old-gke",
        ),
        pytest.param(
            gpu_pod(1, {ACCELERATOR: "nvidia-l4", ACCELERATOR_COUNT: "2"}),
            engine_with(),
            [("gpu-machine", "deny")],  # g2-standard-24 is unsupported: requesting 2 won't help
            id="count-pin-of-unsupported-nodes-is-one-gpu-machine-denial-old-gke",
        ),
    ],
)
def test_one_finding_per_cause(pod: Pod, engine: Engine, expected: list[tuple[str, str]]) -> None:
    decision = judge(pod, engine)
    audit = decision.audit
    found = [
        (f.rule, f.severity)
        for f in audit["findings"]
        if f.rule in ("gpu-whole-node", "gpu-machine")
    ]
    assert found == expected


# ---- 11. following a message literally gives an admitted pod; refused values are pointed at

OLD_GKE = {"rules": {"gke_version": "1.34.1-gke.1000000"}}


def with_gpus(pod: Pod, gpus: int) -> Pod:
    pod["spec"]["containers"] = [gpu_container(str(gpus))]
    return pod


def follow_swap(pod: Pod, message: str, gpus: int) -> Pod:
    """``pod`` after doing what a ``replace X with Y ... instance-type: T`` message says: X
    replaced by Y wherever the pod states it, the first offered type pinned by nodeSelector
    and the GPUs the offer asks for."""
    swap = re.search(r"replace (?:\S+: )?(\S+) with ([a-z0-9-]+)", message)
    assert swap is not None, message
    old, new = swap.groups()
    # "X allows 1 GPU...; replace it with Y": "it" is the value the message opens with.
    old = message.split(maxsplit=1)[0] if old == "it" else old
    spec = pod["spec"]
    selector = spec.setdefault("nodeSelector", {})
    for key, value in list(selector.items()):
        if value == old:
            selector[key] = new
    required = spec.get("affinity", {}).get("nodeAffinity", {})
    terms = required.get("requiredDuringSchedulingIgnoredDuringExecution", {})
    for term in terms.get("nodeSelectorTerms", []):
        for expression in term.get("matchExpressions", []):
            expression["values"] = [new if v == old else v for v in expression.get("values", [])]
    [(machine_type, count), *_] = offers(message, gpus).items()
    selector[INSTANCE_TYPE] = machine_type
    return with_gpus(pod, count)


@pytest.mark.parametrize("settings", [NEW_GKE, OLD_GKE, {}], ids=["new-gke", "old-gke", "unknown"])
@pytest.mark.parametrize(
    ("pod", "pin"),
    [
        pytest.param(
            gpu_pod(2, {ACCELERATOR: "nvidia-h100-80gb"}), "nvidia-h100-80gb", id="h100-selector"
        ),
        pytest.param(
            gpu_pod(2, {ACCELERATOR: "nvidia-h100-80gb", INSTANCE_TYPE: "g2-standard-48"}),
            "nvidia-h100-80gb",
            id="h100-selector-kept-beside-an-l4-type",
        ),
        pytest.param(gpu_pod(2, {FAMILY: "a3"}), "a3", id="a3-family-selector"),
        pytest.param(gpu_pod(2, {FAMILY: "a2"}), "a2", id="a2-family-selector"),
        pytest.param(
            with_terms(gpu_pod(2, {}), {"matchExpressions": [expr(FAMILY, "In", "g2", "a3")]}),
            "a3",
            id="g2-or-a3-family-affinity",
        ),
    ],
)
def test_multi_gpu_message_replaces_the_one_gpu_pin_and_then_admits(
    pod: Pod, pin: str, settings: dict[str, Any]
) -> None:
    """GKE: more than one GPU per snapshot pod only on L4 (G2); pinning a G2 type while keeping
    an H100/A3 pin contradicts it, so the message must say to replace that pin."""
    engine, pod = engine_with(settings=settings), copy.deepcopy(pod)
    [message] = [m for r, _, m in lines(judge(pod, engine)) if r == "gpu-multi-l4"]
    assert re.search(rf"\b{pin}\b.*\breplace\b|\breplace {pin}\b", message), message
    followed = judge(follow_swap(pod, message, 2), engine)
    assert outcomes(followed)["deny"] == set(), followed.message


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(
            terms_pod(
                2,
                {INSTANCE_TYPE: "g2-standard-48"},
                expr(ACCELERATOR, "In", "nvidia-l4", "nvidia-h100-80gb"),
            ),
            id="g2-standard-48-with-l4-or-h100-affinity",
        ),
        pytest.param(
            terms_pod(2, {INSTANCE_TYPE: "g2-standard-96"}, expr(FAMILY, "In", "g2", "a3")),
            id="g2-standard-96-with-g2-or-a3-family-affinity",
        ),
    ],
)
def test_accelerators_its_instance_type_rules_out_are_not_held_against_a_multi_gpu_pod(
    pod: Pod,
) -> None:
    """Selector and affinity are ANDed: a g2 node carries nvidia-l4 only (Compute Engine "GPU
    machine types"), so the H100/A3 alternative can never be reached."""
    decision = judge(pod, engine_with(settings=NEW_GKE))
    assert outcomes(decision)["deny"] == set(), decision.message


def follow_whole_node(pod: Pod, message: str) -> Pod:
    """``pod`` after ``request N [GPUs] ... and drop a, b`` / ``and pin only T``."""
    count = re.search(r"request (?:all )?(\d+)", message)
    assert count is not None, message
    pod = with_gpus(pod, int(count.group(1)))
    drop = re.search(r" and drop (.+?)(?: \(|$)", message)
    only = re.search(r" and pin only (\S+)", message)
    assert drop or only, message
    for term in pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]:
        for expression in term["matchExpressions"]:
            if expression["key"] == INSTANCE_TYPE:
                values = expression["values"]
                keep = {only.group(1)} if only else set(values)
                gone = set(drop.group(1).split(", ")) if drop else set(values) - keep
                expression["values"] = [v for v in values if v not in gone]
    return pod


@pytest.mark.parametrize("settings", [OLD_GKE, {}], ids=["old-gke", "unknown"])
@pytest.mark.parametrize(
    ("gpus", "types"),
    [
        pytest.param(1, ("g2-standard-4", "g2-standard-48"), id="one-gpu-on-g2-standard-4-or-48"),
        pytest.param(4, ("g2-standard-48", "g2-standard-96"), id="four-gpus-on-g2-48-or-96"),
        pytest.param(
            1,
            (
                "g2-standard-4",
                "g2-standard-8",
                "g2-standard-12",
                "g2-standard-16",
                "g2-standard-48",
            ),
            id="one-gpu-on-many-one-gpu-types-or-48",
        ),
    ],
)
def test_whole_node_message_drops_the_types_that_cannot_hold_the_count(
    gpus: int, types: tuple[str, ...], settings: dict[str, Any]
) -> None:
    """Before GKE 1.35.0-gke.1738000 a pod on a multi-GPU node takes all its GPUs: "request 4"
    alone would be refused on the 1-GPU types still pinned."""
    engine = engine_with(settings=settings)
    pod = affinity_pod(gpus, expr(INSTANCE_TYPE, "In", *types))
    [message] = [m for r, _, m in lines(judge(pod, engine)) if r == "gpu-whole-node"]
    followed = judge(follow_whole_node(pod, message), engine)
    assert outcomes(followed)["deny"] == set(), followed.message


def two_terms(gpus: int, key: str, first: str, second: str) -> Pod:
    term = [{"matchExpressions": [expr(key, "In", value)]} for value in (first, second)]
    return with_terms(gpu_pod(gpus, {}), *term)


@pytest.mark.parametrize(
    ("pod", "settings", "rule"),
    [
        pytest.param(
            two_terms(1, INSTANCE_TYPE, "g2-standard-4", "a3-highgpu-8g"),
            NEW_GKE,
            "gpu-machine",
            id="unsupported-type-in-the-second-term",
        ),
        pytest.param(
            two_terms(2, ACCELERATOR, "nvidia-l4", "nvidia-h100-80gb"),
            NEW_GKE,
            "gpu-multi-l4",
            id="one-gpu-accelerator-in-the-second-term",
        ),
        pytest.param(
            two_terms(1, INSTANCE_TYPE, "g2-standard-4", "g2-standard-48"),
            OLD_GKE,
            "gpu-whole-node",
            id="four-gpu-type-in-the-second-term-old-gke",
        ),
    ],
)
def test_refused_value_is_pointed_at_in_the_term_that_allows_it(
    pod: Pod, settings: dict[str, Any], rule: str
) -> None:
    """nodeSelectorTerms are ORed: the fix belongs in the term naming the refused value."""
    decision = judge(pod, engine_with(settings=settings))
    paths = {p for r, p, _ in lines(decision) if r == rule}
    assert paths == {f"{TERMS}[1].matchExpressions[0]"}, decision.message


@pytest.mark.parametrize(
    ("machine", "accelerator"),
    [("a3-highgpu-2g", "nvidia-h100-80gb"), ("a2-highgpu-2g", "nvidia-tesla-a100")],
)
def test_a_multi_gpu_pod_on_an_unlisted_h100_or_a100_type_is_denied_like_its_accelerator(
    machine: str, accelerator: str
) -> None:
    """More than one GPU per snapshot pod only on L4 (GKE's docs; multi-GPU H100 failed to
    checkpoint, domain.md section 9). The same 2-GPU hardware pinned by accelerator was denied
    while its instance type (on neither list) was only warned by ``gpu-machine`` (a hostile
    trial, 2026-12-07): both are denied by ``gpu-multi-l4`` now, and a 1-GPU pod there is not."""
    engine = engine_with()
    by_type = outcomes(judge(gpu_pod(2, {INSTANCE_TYPE: machine}), engine))
    by_accelerator = outcomes(judge(gpu_pod(2, {ACCELERATOR: accelerator}), engine))
    assert "gpu-multi-l4" in by_type["deny"] and "gpu-multi-l4" in by_accelerator["deny"]
    [message] = [
        m for r, _, m in lines(judge(gpu_pod(2, {INSTANCE_TYPE: machine}), engine))
        if r == "gpu-multi-l4"
    ]  # fmt: skip
    assert message.startswith(f"{machine} is {machine[:2]}: more than 1 GPU per pod needs L4")
    one = outcomes(judge(gpu_pod(1, {INSTANCE_TYPE: machine}), engine))
    assert "gpu-multi-l4" not in one["deny"] | one["warn"]
