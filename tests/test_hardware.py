"""``webhook.hardware``: quantity parsing, node pins from nodeSelector/affinity, GPU counting."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from webhook.hardware import (
    GPU_RESOURCE,
    INSTANCE_TYPE,
    MACHINE_FAMILY,
    PARTITION_SIZE,
    node_pins,
    parse_quantity,
    resource_usage,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("1", Decimal(1), id="plain-string"),
        pytest.param(1, Decimal(1), id="json-integer"),
        pytest.param("0", Decimal(0), id="zero"),
        pytest.param("500m", Decimal("0.5"), id="milli"),
        pytest.param("2Ki", Decimal(2048), id="binary-suffix"),
        pytest.param("1k", Decimal(1000), id="decimal-suffix"),
        pytest.param("1e3", Decimal(1000), id="exponent"),
        pytest.param("1.5", Decimal("1.5"), id="fraction"),
        pytest.param(" 4 ", Decimal(4), id="surrounding-space"),
    ],
)
def test_parse_quantity_accepts_kubernetes_syntax(text: Any, expected: Decimal) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("one", id="word"),
        pytest.param("", id="empty"),
        pytest.param("1Xi", id="unknown-suffix"),
        pytest.param(True, id="boolean"),
        pytest.param(None, id="null"),
        pytest.param(["1"], id="list"),
    ],
)
def test_parse_quantity_rejects_garbage(text: Any) -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity(text)


def _affinity(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": list(term)} for term in terms]
            }
        }
    }


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    term: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        term["values"] = list(values)
    return term


AFFINITY_BASE = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"


def test_node_selector_pins_one_value_with_its_path() -> None:
    pins = node_pins({"nodeSelector": {MACHINE_FAMILY: "n2"}}, "spec.template.spec")
    pin = pins[MACHINE_FAMILY]
    assert (pin.values, pin.exhaustive, pin.required) == (frozenset({"n2"}), True, True)
    assert pin.path == 'spec.template.spec.nodeSelector["cloud.google.com/machine-family"]'


def test_affinity_in_every_term_pins_the_union_of_values() -> None:
    spec = {
        "affinity": _affinity(
            [_expr(MACHINE_FAMILY, "In", "n2")], [_expr(MACHINE_FAMILY, "In", "c3", "n2")]
        )
    }
    pin = node_pins(spec, "spec")[MACHINE_FAMILY]
    assert pin.values == frozenset({"n2", "c3"})
    assert pin.exhaustive
    assert pin.path == f"{AFFINITY_BASE}.nodeSelectorTerms[0].matchExpressions[0]"


def test_a_term_without_the_key_leaves_the_pod_unpinned_but_values_are_kept() -> None:
    spec = {"affinity": _affinity([_expr(MACHINE_FAMILY, "In", "e2")], [_expr("zone", "In", "a")])}
    pin = node_pins(spec, "spec")[MACHINE_FAMILY]
    assert pin.values == frozenset({"e2"})
    assert not pin.exhaustive
    assert not pin.required


def test_in_expressions_within_one_term_intersect() -> None:
    spec = {
        "affinity": _affinity(
            [
                _expr(MACHINE_FAMILY, "Exists"),
                _expr(MACHINE_FAMILY, "In", "n2", "e2"),
                _expr(MACHINE_FAMILY, "In", "n2"),
            ]
        )
    }
    pin = node_pins(spec, "spec")[MACHINE_FAMILY]
    assert pin.values == frozenset({"n2"})
    assert pin.path.endswith("matchExpressions[1]")


@pytest.mark.parametrize(
    "operator",
    [
        pytest.param("NotIn", id="notin-does-not-pin"),
        pytest.param("DoesNotExist", id="doesnotexist-does-not-pin"),
        pytest.param("Gt", id="gt-does-not-pin"),
    ],
)
def test_negative_operators_do_not_pin(operator: str) -> None:
    values = () if operator == "DoesNotExist" else ("e2",)
    spec = {"affinity": _affinity([_expr(MACHINE_FAMILY, operator, *values)])}
    assert MACHINE_FAMILY not in node_pins(spec, "spec")


def test_exists_requires_the_label_without_values() -> None:
    spec = {"affinity": _affinity([_expr(PARTITION_SIZE, "Exists")])}
    pin = node_pins(spec, "spec")[PARTITION_SIZE]
    assert pin.values == frozenset()
    assert pin.required and pin.mentioned and not pin.exhaustive


def test_node_selector_and_contradicting_affinity_leave_no_value() -> None:
    spec = {
        "nodeSelector": {INSTANCE_TYPE: "g2-standard-8"},
        "affinity": _affinity([_expr(INSTANCE_TYPE, "In", "g2-standard-48")]),
    }
    pin = node_pins(spec, "spec")[INSTANCE_TYPE]
    assert pin.values == frozenset()
    assert pin.path == 'spec.nodeSelector["node.kubernetes.io/instance-type"]'


def test_malformed_selectors_are_ignored_without_crashing() -> None:
    spec = {
        "nodeSelector": {MACHINE_FAMILY: 3},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}},
    }
    assert node_pins(spec, "spec") == {}


def _container(name: str, gpus: Any = None, **extra: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": "busybox", **extra}
    if gpus is not None:
        container["resources"] = {"limits": {GPU_RESOURCE: gpus}}
    return container


@pytest.mark.parametrize(
    ("spec", "total"),
    [
        pytest.param({"containers": [_container("a", "1")]}, 1, id="one-gpu-string"),
        pytest.param({"containers": [_container("a", 2)]}, 2, id="json-number-limit"),
        pytest.param({"containers": [_container("a", "0")]}, 0, id="zero-limit-is-no-gpu"),
        pytest.param(
            {"containers": [_container("a"), _container("b", "2")]}, 2, id="gpu-in-second-container"
        ),
        pytest.param(
            {"containers": [_container("a", "1"), _container("b", "1")]}, 2, id="app-gpus-add-up"
        ),
        pytest.param(
            {
                "initContainers": [_container("side", "1", restartPolicy="Always")],
                "containers": [_container("a", "1")],
            },
            2,
            id="native-sidecar-adds-to-app-containers",
        ),
        pytest.param(
            {"initContainers": [_container("init", "1")], "containers": [_container("a", "1")]},
            1,
            id="classic-init-counts-as-max-not-sum",
        ),
        pytest.param(
            {"initContainers": [_container("init", "4")], "containers": [_container("a", "1")]},
            4,
            id="big-init-container-dominates",
        ),
        pytest.param(
            {
                "initContainers": [
                    _container("side", "1", restartPolicy="Always"),
                    _container("init", "2"),
                ],
                "containers": [_container("a")],
            },
            3,
            id="init-after-sidecar-runs-beside-it",
        ),
    ],
)
def test_pod_gpu_total_follows_the_scheduler(spec: dict[str, Any], total: int) -> None:
    usage = resource_usage(spec, "spec", GPU_RESOURCE)
    assert usage.total == total
    assert usage.problems == ()


def test_gpu_container_paths_and_roles() -> None:
    spec = {
        "initContainers": [_container("side", "1", restartPolicy="Always")],
        "containers": [_container("a"), _container("b", "1")],
    }
    usage = resource_usage(spec, "spec.template.spec", GPU_RESOURCE)
    assert [(u.path, u.role) for u in usage.containers] == [
        ('spec.template.spec.initContainers[0].resources.limits["nvidia.com/gpu"]', "sidecar"),
        ('spec.template.spec.containers[1].resources.limits["nvidia.com/gpu"]', "app"),
    ]


def test_requests_only_gpu_is_counted_and_reported() -> None:
    spec = {"containers": [{"name": "a", "resources": {"requests": {GPU_RESOURCE: "1"}}}]}
    usage = resource_usage(spec, "spec", GPU_RESOURCE)
    assert usage.total == 1
    [(path, message)] = usage.problems
    assert path == 'spec.containers[0].resources.requests["nvidia.com/gpu"]'
    assert "without a limit" in message


def test_request_differing_from_limit_is_reported() -> None:
    resources = {"limits": {GPU_RESOURCE: "2"}, "requests": {GPU_RESOURCE: "1"}}
    usage = resource_usage(
        {"containers": [{"name": "a", "resources": resources}]}, "spec", GPU_RESOURCE
    )
    assert usage.total == 2
    assert "!= limit" in usage.problems[0][1]


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("lots", id="not-a-quantity"),
        pytest.param("500m", id="fraction-of-a-gpu"),
        pytest.param("-1", id="negative"),
    ],
)
def test_malformed_gpu_quantities_count_zero_and_are_reported(value: str) -> None:
    usage = resource_usage({"containers": [_container("a", value)]}, "spec", GPU_RESOURCE)
    assert usage.total == 0
    assert usage.problems[0][0] == 'spec.containers[0].resources.limits["nvidia.com/gpu"]'


def test_odd_shapes_do_not_crash() -> None:
    spec: dict[str, Any] = {
        "containers": [None, {"name": "a", "resources": None}, {"resources": {"limits": []}}]
    }
    assert resource_usage(spec, "spec", GPU_RESOURCE).total == 0
