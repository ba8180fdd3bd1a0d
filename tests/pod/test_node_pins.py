"""``webhook.pod.node_pins``: node pins from nodeSelector/affinity, GPU counting."""

from __future__ import annotations

import copy
import enum
import json
import math
from datetime import date
from typing import Any

import pytest

from webhook.kube.gke import GPU_RESOURCE, INSTANCE_TYPE, MACHINE_FAMILY, PARTITION_SIZE
from webhook.pod import node_pins as node_pins_module
from webhook.pod.node_pins import node_pins, node_selection, selection_of
from webhook.pod.resources import resource_usage


@pytest.mark.parametrize(
    ("value", "total", "needle"),
    [
        pytest.param("1e99999999", 0, "not a valid quantity", id="huge-exponent-gpu-count"),
        pytest.param("9" * 400, 0, "not a valid quantity", id="400-digit-gpu-count"),
        pytest.param("1e400", 0, "not a valid quantity", id="exponent-400-gpu-count"),
        pytest.param("NaN", 0, "not a valid quantity", id="nan-gpu-count"),
        pytest.param("Infinity", 0, "not a valid quantity", id="infinity-gpu-count"),
        pytest.param(float("inf"), 0, "not a valid quantity", id="yaml-inf-gpu-count"),
        pytest.param(float("nan"), 0, "not a valid quantity", id="yaml-nan-gpu-count"),
        pytest.param("1e-99999999", 0, "not a valid quantity", id="tiny-exponent-gpu-count"),
        pytest.param("1n", 0, "not a valid quantity", id="one-nano-gpu"),
        pytest.param(".5", 0, "not a valid quantity", id="half-a-gpu"),
        pytest.param("-1", 0, "not a valid quantity", id="negative-gpu-count"),
        pytest.param("1e0", 1, None, id="exponent-form-of-one-gpu"),
        pytest.param("2000m", 2, None, id="milli-form-of-two-gpus"),
    ],
)
def test_gpu_counts_are_whole_bounded_devices(value: Any, total: int, needle: str | None) -> None:
    usage = resource_usage({"containers": [_container("a", value)]}, "spec", GPU_RESOURCE)
    assert usage.total == total
    messages = [message for _, message in usage.problems]
    if needle is None:
        assert messages == []
    else:
        [message] = messages
        assert needle in message
        assert len(message) <= 200


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


def _specs() -> list[dict[str, Any]]:
    """Pod specs with node selectors and affinity: every captured review's pod and template."""
    from tests.conftest import DATA  # noqa: PLC0415 - only this test reads the captures

    found = []
    for path in sorted((DATA / "reviews").glob("*.json")):
        obj = json.loads(path.read_text())["request"].get("object") or {}
        spec = obj.get("spec") or {}
        template = (spec.get("template") or {}).get("spec") if isinstance(spec, dict) else None
        found += [s for s in (spec, template) if isinstance(s, dict)]
    terms = [
        {"matchExpressions": [{"key": MACHINE_FAMILY, "operator": "In", "values": ["g2", "a3"]}]},
        {"matchExpressions": [{"key": INSTANCE_TYPE, "operator": "NotIn", "values": ["e2"]}]},
    ]
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": terms}}}  # fmt: skip
    return [*found, {"affinity": affinity, "nodeSelector": {MACHINE_FAMILY: "g2"}}]


def test_remembered_selections_equal_computed_ones_and_follow_the_content() -> None:
    """``node_selection`` remembers by content: the same answer as ``selection_of`` each time,
    a changed nodeSelector or affinity or field path is computed afresh, and a spec holding
    ``null`` (or a NaN from YAML, which orjson writes alike) is never remembered."""
    specs = _specs()
    assert any(s.get("nodeSelector") for s in specs) and any(s.get("affinity") for s in specs)
    for spec in specs:
        for path in ("spec", "spec.template.spec"):
            assert node_selection(spec, path) == selection_of(spec, path)
            assert node_selection(copy.deepcopy(spec), path) == selection_of(spec, path)
    family = {"nodeSelector": {MACHINE_FAMILY: "g2"}}
    assert node_selection(family, "spec").pins[MACHINE_FAMILY].values == {"g2"}
    assert node_selection({"nodeSelector": {MACHINE_FAMILY: "a3"}}, "spec").pins[
        MACHINE_FAMILY
    ].values == {"a3"}
    assert node_selection(family, "spec.template.spec").pins[MACHINE_FAMILY].path == (
        f"spec.template.spec.nodeSelector[{json.dumps(MACHINE_FAMILY)}]"
    )
    node_pins_module._selections.clear()
    node_selection(family, "spec")  # no affinity: remembered all the same
    node_selection({**family, "affinity": None}, "spec")  # null reads as absent: the same key
    assert len(node_pins_module._selections) == 1
    node_pins_module._selections.clear()
    odd = {"nodeSelector": {MACHINE_FAMILY: "g2", "x": math.nan}}
    assert node_selection(odd, "spec") == selection_of(odd, "spec")
    assert not node_pins_module._selections


def test_values_orjson_writes_alike_never_share_an_answer() -> None:
    """An unquoted YAML date (ignored: not a string) and the same date quoted (a pin) are
    written alike by orjson; neither may answer for the other, in either order. Nor an enum
    for its value, nor a tenant's megabyte selector kept in memory."""

    class Family(enum.StrEnum):
        G2 = "g2"

    for first, second in ((date(2024, 1, 1), "2024-01-01"), ("2024-01-01", date(2024, 1, 1))):
        node_pins_module._selections.clear()
        for value in (first, second):
            spec = {"nodeSelector": {MACHINE_FAMILY: value}}
            assert node_selection(spec, "spec") == selection_of(spec, "spec")
    node_pins_module._selections.clear()
    as_enum = {"nodeSelector": {MACHINE_FAMILY: Family.G2}}
    assert node_selection(as_enum, "spec") == selection_of(as_enum, "spec")
    assert not node_pins_module._selections
    huge = {"nodeSelector": {MACHINE_FAMILY: "g" * 100_000}}
    assert node_selection(huge, "spec") == selection_of(huge, "spec")
    assert not node_pins_module._selections
