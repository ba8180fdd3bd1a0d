"""Label selectors against Kubernetes semantics, and the per-namespace policy index.

Expected outcomes come from the Kubernetes documentation ("Labels and Selectors": set-based
requirements) and k8s.io/apimachinery/pkg/labels selector tests, not from our code.
"""

from __future__ import annotations

from typing import Any

import pytest

from webhook.base.errors import ConfigError
from webhook.kube.matching import Policy, PolicyIndex, compile_selector

WEB = {"app": "web", "tier": "frontend"}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        pytest.param({}, {}, True, id="empty-selector-selects-a-pod-without-labels"),
        pytest.param({}, WEB, True, id="empty-selector-selects-every-pod"),
        pytest.param({"matchLabels": {"app": "web"}}, WEB, True, id="matchlabels-subset-matches"),
        pytest.param({"matchLabels": {"app": "db"}}, WEB, False, id="matchlabels-other-value"),
        pytest.param(
            {"matchLabels": {"app": "web", "env": "prod"}},
            WEB,
            False,
            id="matchlabels-all-pairs-required",
        ),
        pytest.param({"matchLabels": {"app": "web"}}, {}, False, id="matchlabels-no-labels"),
        pytest.param(
            {
                "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["backend", "frontend"]}
                ]
            },
            WEB,
            True,
            id="in-any-of-the-values",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "env", "operator": "In", "values": ["a"]}]},
            WEB,
            False,
            id="in-requires-the-key",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["frontend"]}]},
            WEB,
            False,
            id="notin-excludes-listed-value",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]},
            WEB,
            True,
            id="notin-matches-when-key-absent",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
            WEB,
            True,
            id="exists-matches-any-value",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
            {"app": ""},
            True,
            id="exists-matches-empty-value",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "env", "operator": "Exists"}]},
            WEB,
            False,
            id="exists-fails-when-absent",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "env", "operator": "DoesNotExist"}]},
            WEB,
            True,
            id="doesnotexist-matches-when-absent",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]},
            WEB,
            False,
            id="doesnotexist-fails-when-present",
        ),
        pytest.param(
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["frontend"]}],
            },
            WEB,
            False,
            id="labels-and-expressions-are-anded",
        ),
        pytest.param(
            {"matchLabels": None, "matchExpressions": None}, WEB, True, id="null-fields-are-empty"
        ),
    ],
)
def test_selector_semantics(
    selector: dict[str, Any], labels: dict[str, str], expected: bool
) -> None:
    assert compile_selector(selector).matches(labels) is expected


@pytest.mark.parametrize(
    ("selector", "fragment"),
    [
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "Like", "values": ["x"]}]},
            "operator",
            id="rejects-unknown-operator",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "In"}]},
            "non-empty",
            id="rejects-in-without-values",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            "empty",
            id="rejects-exists-with-values",
        ),
        pytest.param({"matchLabels": {"a": 1}}, "string", id="rejects-non-string-label-value"),
        pytest.param({"matchLabels": ["a"]}, "map", id="rejects-matchlabels-list"),
        pytest.param(["app"], "LabelSelector", id="rejects-selector-list"),
        pytest.param(
            {"matchExpressions": [{"operator": "Exists"}]},
            "key",
            id="rejects-expression-without-key",
        ),
    ],
)
def test_invalid_selectors_are_rejected_with_the_field(selector: Any, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        compile_selector(selector, where="spec.selector")


def policy(name: str, namespace: str, selector: dict[str, Any]) -> Policy:
    return Policy(
        name=name, namespace=namespace, selector=compile_selector(selector), storage_config_name="s"
    )


def test_index_selects_only_policies_of_the_pod_namespace() -> None:
    index = PolicyIndex.build(
        [
            policy("a", "snap", {"matchLabels": {"app": "llm"}}),
            policy("b", "other", {"matchLabels": {"app": "llm"}}),
        ]
    )
    assert [p.name for p in index.select("snap", {"app": "llm"})] == ["a"]
    assert index.select("nowhere", {"app": "llm"}) == ()


def test_index_returns_every_selecting_policy_sorted_by_name() -> None:
    index = PolicyIndex.build(
        [
            policy("zeta", "snap", {}),
            policy("alpha", "snap", {"matchLabels": {"app": "llm"}}),
            policy("mid", "snap", {"matchLabels": {"app": "web"}}),
        ]
    )
    assert [p.name for p in index.select("snap", {"app": "llm"})] == ["alpha", "zeta"]
    assert len(index) == 3
