"""The report object (``kube.policy_reports``) and the audit's pure helpers (``snapshots.audit``).

Shapes follow the report APIs' own types (openreports/reports-api
``apis/openreports.io/v1alpha1/report_types.go``; wg-policy ``v1alpha2``); the real schemas judge
the objects in ``tests/cluster/controllers/test_reports.py``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from webhook.kube.matching import Policy, compile_selector
from webhook.kube.policy_reports import (
    OPENREPORTS,
    WGPOLICY,
    Scope,
    candidates,
    digest,
    kept,
    report_object,
    report_view,
    result,
    summary,
)
from webhook.snapshots.audit import (
    admitted,
    running,
    selector_text,
    template_changed_at,
    template_never_judged,
)

SCOPE = Scope("v1", "Pod", "ns", "p1", "0b3f6a2e-0000-4000-8000-000000000001")
KEY = "snapready.io/report-digest"


def results() -> list[Any]:
    return [
        result("llm", "gvisor-runtime", "fail", "high", "spec.runtimeClassName: use gvisor"),
        result("llm", "restore-prediction", "skip", "info", "nothing", {"prediction": "none"}),
    ]


def test_the_digest_ignores_time_and_follows_content() -> None:
    """Timestamps are not content: the same findings judged later are the same report."""
    first = report_object(OPENREPORTS, SCOPE, results(), digest_key=KEY, seconds=1)
    later = report_object(OPENREPORTS, SCOPE, results(), digest_key=KEY, seconds=99)
    assert first["metadata"]["annotations"] == later["metadata"]["annotations"]
    changed = [*results()[:1], result("llm", "restore-prediction", "pass", "info", "hit")]
    assert digest(SCOPE, changed) != digest(SCOPE, results())


def test_an_openreports_report_is_top_level_named_after_and_owned_by_its_object() -> None:
    body = report_object(OPENREPORTS, SCOPE, results(), digest_key=KEY, seconds=7)
    assert (body["apiVersion"], body["kind"]) == ("openreports.io/v1alpha1", "Report")
    assert "spec" not in body
    assert body["metadata"]["name"] == SCOPE.uid
    assert body["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "p1", "uid": SCOPE.uid}
    ]
    assert body["source"] == "snapready"
    assert body["summary"] == {"pass": 0, "fail": 1, "warn": 0, "error": 0, "skip": 1}
    assert body["results"][0]["timestamp"] == {"seconds": 7, "nanos": 0}
    assert "properties" not in body["results"][0]
    assert body["results"][1]["properties"] == {"prediction": "none"}


def test_a_wgpolicy_report_names_its_source_per_result_only() -> None:
    """wgpolicyk8s.io/v1alpha2 has no report-level ``source`` (its schema would prune it)."""
    body = report_object(WGPOLICY, SCOPE, results(), digest_key=KEY, seconds=7)
    assert (body["apiVersion"], body["kind"]) == ("wgpolicyk8s.io/v1alpha2", "PolicyReport")
    assert "source" not in body
    assert {r["source"] for r in body["results"]} == {"snapready"}


def test_the_kept_results_are_the_configured_statuses() -> None:
    assert [r.rule for r in kept(results(), ["fail", "warn"])] == ["gvisor-runtime"]
    assert kept(results(), ["pass"]) == ()
    assert summary([]) == {"pass": 0, "fail": 0, "warn": 0, "error": 0, "skip": 0}


def test_messages_and_properties_are_bounded() -> None:
    item = result("llm", "r", "warn", "medium", "x" * 5000, {"k": "y" * 5000, "gone": None})
    assert len(item.message) == 1024 and item.message.endswith("...")
    assert dict(item.properties) == {"k": "y" * 509 + "..."}


def test_the_cache_keeps_digest_and_summary() -> None:
    body = report_object(OPENREPORTS, SCOPE, results(), digest_key=KEY, seconds=7)
    body["metadata"]["uid"] = "report-uid"
    view = report_view(body, KEY)
    assert view is not None
    assert (view.name, view.uid, view.digest) == (SCOPE.uid, "report-uid", digest(SCOPE, results()))
    assert view.counts == (0, 1, 0, 0, 1)
    assert report_view({"metadata": {"name": "x"}}, KEY) is None


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        pytest.param("auto", ["openreports", "wgpolicyk8s"], id="auto-tries-openreports-first"),
        pytest.param("wgpolicyk8s", ["wgpolicyk8s"], id="a-named-api-only"),
        pytest.param("off", [], id="off-tries-none"),
    ],
)
def test_discovery_candidates(choice: str, expected: list[str]) -> None:
    assert [api.name for api in candidates(choice)] == expected


# --- snapshots.audit ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "text"),
    [
        pytest.param({}, "", id="empty-selects-everything"),
        pytest.param({"matchLabels": {"app": "llm"}}, "app in (llm)", id="match-labels"),
        pytest.param(
            {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["b", "a"]}]},
            "tier notin (a,b)",
            id="not-in-sorted",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}, "gpu", id="exists"
        ),
        pytest.param(
            {"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]},
            "!gpu",
            id="does-not-exist",
        ),
        pytest.param({"matchLabels": {"app": ""}}, "app=", id="an-empty-value"),
        pytest.param(
            {"matchExpressions": [{"key": "k", "operator": "In", "values": ["", "a"]}]},
            "",
            id="an-empty-value-in-a-set-widens-the-list",
        ),
    ],
)
def test_selector_text(selector: dict[str, Any], text: str) -> None:
    assert selector_text(compile_selector(selector)) == text


def test_admitted_needs_both_stamps() -> None:
    stamped = {
        "labels": {"snapready.io/selected": "true"},
        "annotations": {"snapready.io/spec-hash": "v1:sha256:" + "a" * 64},
    }
    assert admitted(stamped, "snapready.io/")
    assert not admitted({**stamped, "annotations": {}}, "snapready.io/")
    assert not admitted({**stamped, "labels": {}}, "snapready.io/")


def test_running_leaves_out_finished_and_deleting_pods() -> None:
    assert running({"status": {"phase": "Running"}})
    assert not running({"status": {"phase": "Succeeded"}})
    assert not running({"metadata": {"deletionTimestamp": "2026-12-01T10:00:00Z"}})


def _entry(time: str, fields: dict[str, Any], subresource: str = "") -> dict[str, Any]:
    entry = {"manager": "m", "operation": "Update", "time": time, "fieldsV1": fields}
    if subresource:
        entry["subresource"] = subresource
    return entry


def test_a_template_changes_when_an_entry_owns_a_field_under_it() -> None:
    """Scaling (``f:spec.f:replicas``) and status do not change the template; an image does."""
    obj = {
        "metadata": {
            "creationTimestamp": "2026-12-01T09:00:00Z",
            "managedFields": [
                _entry("2026-12-01T10:00:00Z", {"f:spec": {"f:template": {"f:spec": {}}}}),
                _entry("2026-12-01T11:00:00Z", {"f:spec": {"f:replicas": {}}}),
                _entry("2026-12-01T12:00:00Z", {"f:status": {}}, "status"),
            ],
        }
    }
    assert template_changed_at(obj, ("spec", "template")) == datetime(2026, 12, 1, 10, tzinfo=UTC)
    bare = {"metadata": {"creationTimestamp": "2026-12-01T09:00:00Z"}}
    assert template_changed_at(bare, ("spec", "template")) == datetime(2026, 12, 1, 9, tzinfo=UTC)


def test_a_template_is_never_judged_when_every_policy_came_later() -> None:
    def made(at: str) -> Policy:
        return Policy("p", "ns", compile_selector({}), "s", created=at)

    changed = datetime(2026, 12, 1, 10, tzinfo=UTC)
    assert template_never_judged(changed, [made("2026-12-01T10:00:01Z")])
    assert not template_never_judged(changed, [made("2026-12-01T10:00:00Z")])  # same second
    later, earlier = made("2026-12-01T11:00:00Z"), made("2026-12-01T09:00:00Z")
    assert not template_never_judged(changed, [later, earlier])
    assert not template_never_judged(changed, [made("")])  # unknown: never guessed
    assert not template_never_judged(None, [later])
