"""The restore prediction reads a pod's node selection as the scheduler does
(``pod.virtual_node``): the nodeSelector AND one required affinity term, a term's requirements
ANDed, an empty term matching no node (k8s.io/component-helpers scheduling/corev1/nodeaffinity),
and GKE restores only onto the snapshot's machine series and CPU architecture (domain.md
section 3). A hostile trial (2026-12-08) found each case below predicted ``hit`` from a G2/amd64
snapshot (the last ``miss``), because only whole-pod pins and ``NotIn`` in every term were read.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.pod.test_restore import POOLS, V, _in, _not_in, _required, on_machine
from webhook.kube.gke import ACCELERATOR, INSTANCE_TYPE, MACHINE_FAMILY, NODE_POOL
from webhook.kube.gke import ARCHITECTURE as ARCH
from webhook.pod.node_pins import Requirement, node_selection
from webhook.pod.pools import landing_pools
from webhook.pod.virtual_node import MAX_REQUIREMENTS, MAX_VALUES, satisfiable
from webhook.snapshots.facts import compute_class_facts, node_view

A100, L4, H100 = "nvidia-tesla-a100", "nvidia-l4", "nvidia-h100-80gb"


def terms(*expressions: list[dict[str, Any]]) -> dict[str, Any]:
    return _required([{"matchExpressions": list(each)} for each in expressions])


G2_OR_A2 = terms([_in(MACHINE_FAMILY, "g2", "a2")])


@pytest.mark.parametrize(
    ("spec", "gpus"),
    [
        # one term rules G2 out by NotIn, the other by In on A2
        (terms([_not_in(MACHINE_FAMILY, "g2")], [_in(MACHINE_FAMILY, "a2")]), False),
        # each term names A2 through another label
        (terms([_in(MACHINE_FAMILY, "a2")], [_in(INSTANCE_TYPE, "a2-highgpu-1g")]), True),
        (terms([_in(ACCELERATOR, A100)], [_in(MACHINE_FAMILY, "a2")]), True),
        # the term that admits G2 rules amd64 out
        (terms([_in(MACHINE_FAMILY, "g2"), _not_in(ARCH, "amd64")], [_in(MACHINE_FAMILY, "a2")]),
         True),
        # a nodeSelector pin narrows a wider affinity pin (ANDed)
        ({**G2_OR_A2, "nodeSelector": {INSTANCE_TYPE: "a2-highgpu-1g"}}, True),
        ({**G2_OR_A2, "nodeSelector": {ACCELERATOR: H100}}, True),
        ({**G2_OR_A2, "nodeSelector": {NODE_POOL: "a100"}}, True),
        # an empty term matches no node: it does not reopen G2
        (_required([{"matchExpressions": [_in(MACHINE_FAMILY, "a2")]}, {}]), True),
        # every G2 node carries the L4
        (terms([{"key": ACCELERATOR, "operator": "DoesNotExist"}]), False),
        # the legacy arch label the kubelet still sets, read as kubernetes.io/arch
        ({"nodeSelector": {"beta.kubernetes.io/arch": "arm64"}}, False),
    ],
)  # fmt: skip
def test_a_selection_no_g2_node_meets_is_a_miss(spec: dict[str, Any], gpus: bool) -> None:
    result = on_machine(spec, gpus=gpus)
    assert result.outcome == "miss", result.reason


@pytest.mark.parametrize(
    ("spec", "gpus"),
    [
        (terms([_in(MACHINE_FAMILY, "a2")], [_in(ACCELERATOR, L4)]), True),
        (terms([_not_in(INSTANCE_TYPE, "g2-standard-8")]), True),  # other G2 shapes
        (terms([_not_in(NODE_POOL, "l4")]), True),  # another G2 pool may take it
        (terms([{"key": ACCELERATOR, "operator": "Exists"}]), True),
        # a GPU model no table lists may run on G2 (Google runs GPUs beyond the lists)
        (terms([_not_in(ACCELERATOR, L4)]), True),
        ({"nodeSelector": {"beta.kubernetes.io/arch": "amd64"}}, False),
    ],
)  # fmt: skip
def test_a_selection_some_g2_node_meets_still_hits(spec: dict[str, Any], gpus: bool) -> None:
    assert on_machine(spec, gpus=gpus).outcome == "hit"


def test_a_long_in_list_is_still_read_term_by_term() -> None:
    """Past ``LANDING_MAX_CHARS`` the pins' answer is not remembered, but the terms are still
    read: ``pool In [a100, l4, ...] AND pool NotIn [l4]`` lands on A2 only."""
    padding = [f"p{i:02d}" + "x" * 60 for i in range(17)]
    spec = terms([_in(NODE_POOL, "a100", "l4", *padding), _not_in(NODE_POOL, "l4")])
    assert [p.name for p in landing_pools(node_selection(spec, "spec"), POOLS)] == ["a100"]
    assert on_machine(spec).outcome == "miss"


def test_a_gpu_pod_never_restores_a_snapshot_of_a_series_without_gpus() -> None:
    """Resources are not in the fingerprint: a template that adds a GPU still matches a
    snapshot taken on N2, where no GPU attaches (Compute Engine: GPUs only on N1 and the
    accelerator-optimized series)."""
    n2 = {"family": "n2", "arch": "amd64", "version": V}
    gpu = on_machine({}, gpus=True, node=n2)
    assert gpu.outcome == "miss"
    assert gpu.reason == "asks for GPUs, which machine family n2 has none of, snapshot taken there"
    assert on_machine({}, gpus=False, node=n2).outcome == "hit"
    unknown = {"family": "z9", "arch": "amd64", "version": V}
    assert on_machine({}, gpus=True, node=unknown).outcome == "hit", "a series on no list"
    exists = terms([{"key": ACCELERATOR, "operator": "Exists"}])
    assert on_machine(exists, node=n2).outcome == "miss", "needs a GPU node: none is N2"


def test_a_compute_class_of_gpu_priorities_makes_that_gpus_series() -> None:
    h100 = compute_class_facts(
        {"metadata": {"name": "h100"}, "spec": {"priorities": [{"gpu": {"type": H100}}]}}
    )
    assert h100 is not None
    pinned = {"nodeSelector": {"cloud.google.com/compute-class": "h100"}}
    result = on_machine(pinned, {"h100": h100}, gpus=True)
    assert (result.outcome, result.reason) == (
        "miss",
        "ComputeClass h100 makes a3, snapshot taken on g2",
    )


def test_a_custom_n1_node_and_a_pod_pinned_to_its_type_agree_on_the_series() -> None:
    """A node without the family label gets it from its machine type as the pins read it
    (``custom-4-8192`` is N1): it was ``custom`` there and ``n1`` here, a false miss."""
    labels = {"cloud.google.com/gke-nodepool": "custom", INSTANCE_TYPE: "custom-4-8192"}
    view = node_view({"metadata": {"name": "n", "labels": labels}})
    assert view is not None and view.label(MACHINE_FAMILY) == "n1"
    node = {"family": "n1", "arch": "amd64", "version": V}
    assert (
        on_machine({"nodeSelector": {INSTANCE_TYPE: "custom-4-8192"}}, node=node).outcome == "hit"
    )


def test_an_unlisted_gpu_model_may_run_on_a_gpu_series() -> None:
    """A4X Max (GB300) runs ``nvidia-gb300``, which no table here lists (a review): a pod
    pinned to it may restore a snapshot taken on A4X."""
    a4x = {"family": "a4x", "arch": "arm64", "version": V}
    pinned = {"nodeSelector": {ACCELERATOR: "nvidia-gb300"}}
    assert on_machine(pinned, gpus=True, node=a4x).outcome == "hit"


def test_a_huge_requirement_is_not_judged() -> None:
    """A tenant's ``In`` and ``NotIn`` of the same 16,000 values cost seconds per pool when
    every candidate scanned every value (a review); values are a set, and a requirement of
    more than ``MAX_VALUES`` is not judged (the API server bounds the request, not the list)."""
    values = [f"v{n}" for n in range(MAX_VALUES + 1)]
    rules = (
        Requirement(INSTANCE_TYPE, "In", frozenset(values)),
        Requirement(INSTANCE_TYPE, "NotIn", frozenset(values)),
    )
    assert satisfiable(None, rules), "not judged: no miss from a list past the bound"
    small = tuple(Requirement(r.key, r.operator, frozenset(values[:10])) for r in rules)
    assert not satisfiable(None, small), "In and NotIn of the same values: nothing passes"


def test_an_operator_that_is_not_a_string_is_ignored_not_a_crash() -> None:
    """Admission runs before the API server decodes the pod: an object as an operator reached
    a set lookup and failed the request with a 500 (a review)."""
    expression = {"key": MACHINE_FAMILY, "operator": {"x": 1}, "values": ["a2"]}
    selection = node_selection(_required([{"matchExpressions": [expression]}]), "spec")
    assert selection.exclusions == ({},)
    assert on_machine(_required([{"matchExpressions": [expression]}])).outcome == "miss", (
        "a term Kubernetes cannot parse matches no node"
    )


def test_thousands_of_terms_are_not_judged() -> None:
    """Past ``MAX_REQUIREMENTS`` requirements in all, the terms are not judged (no reason, and
    no per-pool work that grows with the request)."""
    many = [{"matchExpressions": [_not_in(MACHINE_FAMILY, "g2")]}] * (MAX_REQUIREMENTS + 1)
    assert on_machine(_required(many)).outcome == "hit"
    few = [{"matchExpressions": [_not_in(MACHINE_FAMILY, "g2")]}] * 3
    assert on_machine(_required(few)).outcome == "miss"
