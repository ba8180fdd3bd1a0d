"""Where a pod lands by node taints and GKE Sandbox labels (``pod.tolerations``,
``pod.pools.landing_pools``), and what that does to the restore prediction.

A GKE cluster runs GPU pools tainted ``nvidia.com/gpu=present:NoSchedule`` and Sandbox pools
labelled and tainted ``sandbox.gke.io/runtime=gvisor``; the ``gvisor`` RuntimeClass gives each
pod the selector and toleration (review 03 of ../shared/data carries both). GKE upgrades node
pools one at a time: a Sandbox pool on a newer version than the snapshot's, beside a pool that
still runs it, is a cold start for the pod, which only lands on the Sandbox pool.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.pod.test_restore import on_machine
from webhook.pod.node_pins import node_selection
from webhook.pod.pools import landing_pools
from webhook.pod.tolerations import Toleration, tolerated, tolerations_of
from webhook.snapshots.state import NodePoolFacts, Taint

OLD, NEW = "1.35.3-gke.1234000", "1.35.4-gke.1000"
GPU = Taint("nvidia.com/gpu", "present", "NoSchedule")
SANDBOX = Taint("sandbox.gke.io/runtime", "gvisor", "NoSchedule")
REVIEW_03 = Path(__file__).parents[1] / "data/reviews/03-pod-create-gvisor-l4x4-gpu4.json"


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (Toleration("nvidia.com/gpu", "Exists", "", ""), GPU, True),
        (Toleration("nvidia.com/gpu", "Equal", "present", "NoSchedule"), GPU, True),
        (Toleration("nvidia.com/gpu", "Equal", "absent", "NoSchedule"), GPU, False),
        (Toleration("nvidia.com/gpu", "Exists", "", "NoExecute"), GPU, False),
        (Toleration("", "Exists", "", ""), GPU, True),  # tolerates everything
        (Toleration("other", "Exists", "", ""), GPU, False),
        (Toleration("nvidia.com/gpu", "Gt", "1", ""), GPU, False),  # unknown operator
    ],
)
def test_toleration_matching_is_kubernetes(
    toleration: Toleration, taint: Taint, expected: bool
) -> None:
    """k8s.io/api core/v1 ``Toleration.ToleratesTaint``."""
    assert toleration.tolerates(taint) is expected


def test_only_filtering_taints_keep_a_pod_off() -> None:
    soft = Taint("soft", "", "PreferNoSchedule")
    assert tolerated(frozenset({soft}), ())
    assert not tolerated(frozenset({soft, GPU}), ())
    assert tolerations_of({"tolerations": [{"key": "k"}, "junk", {"key": 3}]}) == (
        Toleration("k", "Equal", "", ""),
    )


def pool(name: str, version: str, **facts: Any) -> NodePoolFacts:
    return NodePoolFacts(name, 2, versions=frozenset({version}), **facts)


POOLS = {
    "default": pool("default", OLD, machine_families=frozenset({"e2"})),
    "sandbox-cpu": pool(
        "sandbox-cpu", NEW, sandboxes=frozenset({"gvisor"}), taints=frozenset({SANDBOX})
    ),
    "sandbox-l4": pool(
        "sandbox-l4",
        OLD,
        accelerators=frozenset({"nvidia-l4"}),
        sandboxes=frozenset({"gvisor"}),
        taints=frozenset({SANDBOX, GPU}),
    ),
}


def names(spec: dict[str, Any], *, gpu: bool = False) -> list[str]:
    selection = node_selection(spec, "spec")
    found = landing_pools(selection, POOLS, gpu=gpu, tolerations=tolerations_of(spec))
    return [p.name for p in found]


GVISOR = {
    "runtimeClassName": "gvisor",
    "nodeSelector": {"sandbox.gke.io/runtime": "gvisor"},
    "tolerations": [
        {"key": "sandbox.gke.io/runtime", "operator": "Equal", "value": "gvisor",
         "effect": "NoSchedule"},
    ],
}  # fmt: skip


def test_a_gvisor_pod_lands_only_on_sandbox_pools_whose_taints_it_tolerates() -> None:
    assert names(GVISOR) == ["sandbox-cpu"], "no GPU toleration: not on the L4 pool"
    with_gpu = {
        **GVISOR,
        "tolerations": [*GVISOR["tolerations"], {"key": "nvidia.com/gpu", "operator": "Exists"}],
    }
    assert names(with_gpu, gpu=True) == ["sandbox-l4"]
    assert names(GVISOR, gpu=True) == ["sandbox-l4"], "a GPU pod tolerates nvidia.com/gpu"
    assert names({}) == ["default"], "tolerates no taint: only the untainted pool"
    assert landing_pools(node_selection({}, "spec"), POOLS) == sorted(
        POOLS.values(), key=lambda p: p.name
    ), "tolerations not known: taints not judged"


def test_review_03_lands_on_the_sandbox_l4_pool_only() -> None:
    """The real pod: the API server added its RuntimeClass's selector and toleration before
    the webhook saw it, but no ``nvidia.com/gpu`` toleration for its GPU request; GKE runs it
    on a GPU pool tainted so (the captured node ``n1``), so asking for GPUs tolerates it."""
    spec = json.loads(REVIEW_03.read_text())["request"]["object"]["spec"]
    l4 = {
        "sandbox-l4": pool(
            "sandbox-l4",
            OLD,
            accelerators=frozenset({"nvidia-l4"}),
            instance_types=frozenset({"g2-standard-48"}),
            sandboxes=frozenset({"gvisor"}),
            taints=frozenset({SANDBOX, GPU}),
        ),
        "default": POOLS["default"],
    }
    selection = node_selection(spec, "spec")
    found = landing_pools(selection, l4, gpu=True, tolerations=tolerations_of(spec))
    assert [p.name for p in found] == ["sandbox-l4"]


def predicted(spec: dict[str, Any]) -> Any:
    """The prediction against a snapshot taken at ``OLD`` (no machine facts), over ``POOLS``."""
    return on_machine(spec, pools=POOLS, node={"version": OLD}, tolerations=True)


def test_a_sandbox_pool_upgraded_past_the_snapshot_is_a_miss_beside_an_older_pool() -> None:
    """The default pool still runs the snapshot's version, but a gVisor pod never lands there;
    nor on the L4 Sandbox pool it does not tolerate. It was predicted ``hit``."""
    result = predicted(GVISOR)
    assert result.outcome == "miss"
    assert result.reason == f"node pool sandbox-cpu runs {NEW}, snapshot taken on {OLD}"
    assert predicted({}).outcome == "hit", "a pod the default pool takes"


def test_a_pod_selecting_a_compute_class_tolerates_its_taint() -> None:
    """GKE taints the nodes a ComputeClass makes ``cloud.google.com/compute-class=<name>`` and
    tolerates it on the pods that select the class, possibly after this webhook ran (a
    review): such a pod still lands on the class's pool."""
    made = pool(
        "cc",
        OLD,
        taints=frozenset({Taint("cloud.google.com/compute-class", "llm", "NoSchedule")}),
    )
    pools = {"cc": made, "default": POOLS["default"]}
    spec = {"nodeSelector": {"cloud.google.com/compute-class": "llm"}}
    found = landing_pools(node_selection(spec, "spec"), pools, tolerations=tolerations_of(spec))
    assert [p.name for p in found] == ["cc", "default"]
    other = {"nodeSelector": {"cloud.google.com/compute-class": "other"}}
    found = landing_pools(node_selection(other, "spec"), pools, tolerations=tolerations_of(other))
    assert [p.name for p in found] == ["default"]


def test_the_filtered_answer_is_remembered_per_pins_terms_and_tolerations() -> None:
    """The taint and affinity filters ran on every call after the pins' memo (a review: 23 us
    at 20 pools, 156 us at 100): the whole answer is remembered."""
    from webhook.pod import pools as memo  # noqa: PLC0415

    selection = node_selection(GVISOR, "spec")
    first = landing_pools(selection, POOLS, tolerations=tolerations_of(GVISOR))
    kept = memo._LANDING[0][1]
    assert any(key[2] == tolerations_of(GVISOR) for key in kept)  # type: ignore[index]
    assert landing_pools(selection, POOLS, tolerations=tolerations_of(GVISOR)) == first
