"""Governance rules for PodSnapshotPolicy objects (``webhook.governance.policy``), pure.

The cluster state holds the example storage config ``snapshots-us-central1`` and the example
policy ``llm-policy`` (``app=llm`` in namespace ``snap``), as ``manifests/examples`` does.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.governance import policy_findings, selectors_overlap
from webhook.kube.matching import PolicyIndex, compile_selector
from webhook.snapshots.state import ClusterState, StorageConfig, parse_policy

NAMESPACE = "snap"
LLM_POLICY: dict[str, Any] = {
    "apiVersion": "podsnapshot.gke.io/v1",
    "kind": "PodSnapshotPolicy",
    "metadata": {"name": "llm-policy", "namespace": NAMESPACE},
    "spec": {
        "selector": {"matchLabels": {"app": "llm"}},
        "storageConfigName": "snapshots-us-central1",
        "triggerConfig": {"type": "workload"},
    },
}
STATE = ClusterState(
    policies=PolicyIndex.build([parse_policy(LLM_POLICY, prefix="snapready.io/")]),
    storage_configs={
        "snapshots-us-central1": StorageConfig("snapshots-us-central1", "snapready-snapshots")
    },
    synced=True,
)
DROP = object()


def web_policy(**spec: Any) -> dict[str, Any]:
    """A complete policy for ``app=web``; ``spec`` entries replace fields (``DROP`` removes)."""
    base: dict[str, Any] = {
        "selector": {"matchLabels": {"app": "web"}},
        "storageConfigName": "snapshots-us-central1",
        "triggerConfig": {"type": "manual"},
        "retentionConfig": {"lastAccessTimeout": "30d"},
    }
    for key, value in spec.items():
        if value is DROP:
            base.pop(key, None)
        else:
            base[key] = value
    return {"metadata": {"name": "web-policy", "namespace": NAMESPACE}, "spec": base}


def rules_of(
    obj: dict[str, Any], state: ClusterState = STATE, name: str = "web-policy"
) -> set[Any]:
    """The (rule, severity) pairs found for ``obj``."""
    found = policy_findings(obj, state, namespace=NAMESPACE, name=name)
    return {(f.rule, f.severity) for f in found}


GROUP_BY_MODEL = {"groupByLabelValue": {"labels": ["model"]}}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(web_policy(), set(), id="accepts-a-complete-policy"),
        pytest.param(
            web_policy(storageConfigName="nope"),
            {("policy-storage-config", "deny")},
            id="denies-an-unknown-storage-config",
        ),
        pytest.param(
            web_policy(storageConfigName=DROP),
            {("policy-storage-config", "deny")},
            id="denies-a-missing-storage-config-name",
        ),
        pytest.param(
            web_policy(selector={}),
            {("policy-selector-empty", "warn"), ("policy-overlap", "warn")},
            id="warns-on-an-empty-selector-which-also-overlaps-llm-policy",
        ),
        pytest.param(
            web_policy(selector=DROP), {("policy-selector", "deny")}, id="denies-a-missing-selector"
        ),
        pytest.param(
            web_policy(selector={"matchExpressions": [{"key": "a", "operator": "Near"}]}),
            {("policy-selector", "deny")},
            id="denies-a-selector-with-an-unknown-operator",
        ),
        pytest.param(
            web_policy(retentionConfig=DROP),
            {("policy-retention", "warn")},
            id="warns-without-retention",
        ),
        pytest.param(
            web_policy(retentionConfig={}),
            {("policy-retention-format", "deny")},
            id="denies-retention-without-last-access-timeout",
        ),
        pytest.param(
            web_policy(retentionConfig={"lastAccessTimeout": "30 days"}),
            {("policy-retention-format", "deny")},
            id="denies-retention-outside-the-gke-pattern",
        ),
        pytest.param(
            web_policy(snapshotGroupingRules=GROUP_BY_MODEL),
            {("policy-grouping-labels", "warn")},
            id="warns-on-a-grouping-label-the-selector-does-not-require",
        ),
        pytest.param(
            web_policy(
                selector={
                    "matchLabels": {"app": "web"},
                    "matchExpressions": [{"key": "model", "operator": "Exists"}],
                },
                snapshotGroupingRules=GROUP_BY_MODEL,
            ),
            set(),
            id="accepts-a-grouping-label-required-by-exists",
        ),
        pytest.param(
            web_policy(
                selector={"matchLabels": {"app": "web", "model": "gemma"}},
                snapshotGroupingRules=GROUP_BY_MODEL,
            ),
            set(),
            id="accepts-a-grouping-label-required-by-match-labels",
        ),
        pytest.param(
            web_policy(
                selector={
                    "matchLabels": {"app": "web"},
                    "matchExpressions": [{"key": "model", "operator": "NotIn", "values": ["x"]}],
                },
                snapshotGroupingRules=GROUP_BY_MODEL,
            ),
            {("policy-grouping-labels", "warn")},
            id="warns-on-a-grouping-label-only-under-notin",
        ),
        pytest.param(
            web_policy(triggerConfig={"type": "readinessProbe"}),
            {("policy-trigger-type", "warn")},
            id="warns-on-an-undocumented-trigger-type",
        ),
        pytest.param(
            web_policy(triggerConfig=DROP),
            {("policy-trigger-type", "warn")},
            id="warns-on-a-missing-trigger-config",
        ),
        pytest.param(
            web_policy(selector={"matchExpressions": [{"key": "app", "operator": "Exists"}]}),
            {("policy-overlap", "warn")},
            id="warns-when-another-policy-selects-the-same-pods",
        ),
        pytest.param(
            web_policy(
                selector={
                    "matchExpressions": [
                        {"key": "app", "operator": "Exists"},
                        {"key": "app", "operator": "NotIn", "values": ["llm"]},
                    ]
                }
            ),
            set(),
            id="accepts-a-selector-made-disjoint-by-notin",
        ),
        pytest.param(
            {"metadata": {"name": "web-policy"}, "spec": "oops"},
            {("policy-spec", "deny")},
            id="denies-a-spec-that-is-not-an-object",
        ),
    ],
)
def test_policy_rules(obj: dict[str, Any], expected: set[Any]) -> None:
    assert rules_of(obj) == expected


def test_a_policy_does_not_overlap_itself_on_update() -> None:
    same = copy.deepcopy(LLM_POLICY)
    same["spec"]["retentionConfig"] = {"lastAccessTimeout": "7d"}
    assert rules_of(same, name="llm-policy") == set()
    assert rules_of(same, name="llm-policy-copy") == {("policy-overlap", "warn")}


def test_an_unknown_storage_config_is_only_a_warning_before_the_cache_synced() -> None:
    unsynced = ClusterState(policies=STATE.policies, storage_configs={}, synced=False)
    assert rules_of(web_policy(), unsynced) == {("policy-storage-config", "warn")}


def test_messages_say_what_to_change() -> None:
    obj = web_policy(storageConfigName="nope", selector={}, retentionConfig=DROP)
    found = {f.rule: f for f in policy_findings(obj, STATE, namespace=NAMESPACE, name="x")}
    assert "known: snapshots-us-central1" in found["policy-storage-config"].message
    assert found["policy-storage-config"].path == "spec.storageConfigName"
    assert "lastAccessTimeout" in found["policy-retention"].message
    assert "llm-policy" in found["policy-overlap"].message
    grouping = policy_findings(
        web_policy(snapshotGroupingRules=GROUP_BY_MODEL), STATE, namespace=NAMESPACE, name="x"
    )
    assert grouping[0].path == "spec.snapshotGroupingRules.groupByLabelValue.labels[0]"
    assert "{key: model, operator: Exists}" in grouping[0].message


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        pytest.param("30d", True, id="accepts-days"),
        pytest.param("12 h", True, id="accepts-a-space-before-the-unit"),
        pytest.param("1y", True, id="accepts-years"),
        pytest.param("6mo", True, id="accepts-months"),
        pytest.param("90min", True, id="accepts-minutes"),
        pytest.param("30", False, id="rejects-a-number-without-unit"),
        pytest.param("30s", False, id="rejects-seconds"),
        pytest.param("d30", False, id="rejects-unit-first"),
        pytest.param("1.5h", False, id="rejects-a-fraction"),
        pytest.param("-1d", False, id="rejects-a-sign"),
        pytest.param("30d\n", False, id="rejects-a-trailing-newline"),
        pytest.param("\uff13\uff10d", False, id="rejects-non-ascii-digits"),
        pytest.param(30, False, id="rejects-a-number"),
    ],
)
def test_last_access_timeout_follows_the_crd_pattern(value: Any, valid: bool) -> None:
    found = rules_of(web_policy(retentionConfig={"lastAccessTimeout": value}))
    assert found == (set() if valid else {("policy-retention-format", "deny")})


@pytest.mark.parametrize(
    ("first", "second", "overlap"),
    [
        pytest.param({}, {"matchLabels": {"a": "1"}}, True, id="empty-overlaps-anything"),
        pytest.param(
            {"matchLabels": {"a": "1"}}, {"matchLabels": {"a": "2"}}, False, id="different-values"
        ),
        pytest.param(
            {"matchLabels": {"a": "1"}}, {"matchLabels": {"b": "2"}}, True, id="different-keys"
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]},
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["2", "3"]}]},
            True,
            id="in-sets-that-intersect",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]},
            {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1", "2"]}]},
            False,
            id="in-fully-excluded-by-notin",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
            {"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]},
            False,
            id="exists-against-does-not-exist",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]},
            {"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]},
            True,
            id="notin-allows-the-label-to-be-absent",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
            {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1", "2"]}]},
            True,
            id="exists-with-notin-picks-another-value",
        ),
    ],
)
def test_selector_overlap_table(first: Any, second: Any, overlap: bool) -> None:
    assert selectors_overlap(compile_selector(first), compile_selector(second)) is overlap
    assert selectors_overlap(compile_selector(second), compile_selector(first)) is overlap


KEYS = ["a", "b"]
VALUES = ["1", "2"]
terms = st.one_of(
    st.builds(
        lambda key, op, values: {"key": key, "operator": op, "values": values},
        st.sampled_from(KEYS),
        st.sampled_from(["In", "NotIn"]),
        st.lists(st.sampled_from(VALUES), min_size=1, max_size=2, unique=True),
    ),
    st.builds(
        lambda key, op: {"key": key, "operator": op},
        st.sampled_from(KEYS),
        st.sampled_from(["Exists", "DoesNotExist"]),
    ),
)
selectors = st.builds(
    lambda labels, expressions: {"matchLabels": labels, "matchExpressions": expressions},
    st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2),
    st.lists(terms, max_size=3),
)


def every_label_set() -> list[dict[str, str]]:
    """All label sets over KEYS with each key absent, a listed value, or a fresh value."""
    choices = [None, *VALUES, "fresh"]
    return [
        {k: v for k, v in zip(KEYS, combo, strict=True) if v is not None}
        for combo in itertools.product(choices, repeat=len(KEYS))
    ]


@given(selectors, selectors)
def test_selector_overlap_agrees_with_brute_force(first: Any, second: Any) -> None:
    a, b = compile_selector(first), compile_selector(second)
    witnessed = any(a.matches(labels) and b.matches(labels) for labels in every_label_set())
    assert selectors_overlap(a, b) is witnessed
