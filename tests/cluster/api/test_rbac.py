"""``manifests/rbac.yaml`` is schema-valid.

That its ClusterRole is exactly enough for the cluster caches (every request they make is granted,
read-only, no 403) is tested on the real API server, as a ServiceAccount bound to it:
``test_real_apiserver.py::test_manifest_rbac_is_enough_for_every_cache``.
"""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.conftest import ROOT

RBAC = ROOT / "manifests" / "rbac.yaml"


def documents() -> list[dict[str, Any]]:
    """The documents of ``manifests/rbac.yaml`` (its ClusterRole first)."""
    docs = [doc for doc in yaml.safe_load_all(RBAC.read_text()) if doc]
    assert docs[0]["kind"] == "ClusterRole"
    return docs


@pytest.mark.parametrize(
    "version",
    [pytest.param("1.30.0", id="valid-on-1-30"), pytest.param("1.36.0", id="valid-on-1-36")],
)
def test_rbac_manifest_is_schema_valid(version: str) -> None:
    for document in documents():
        kubernetes_validate.validate(document, version, strict=True)


def grants(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    """Whether a rule grants ``verb`` on ``group``/``resource`` (any resourceNames)."""
    return any(
        group in rule.get("apiGroups", [])
        and resource in rule.get("resources", [])
        and verb in rule.get("verbs", [])
        for rule in rules
    )


def test_every_watched_collection_is_granted_list_and_watch() -> None:
    """The caches' collections (from the code) against the ClusterRole: a new cache without
    its RBAC would leave /readyz false forever on a real cluster (403)."""
    from webhook.cluster.api.caches import resources  # noqa: PLC0415

    rules = documents()[0]["rules"]
    for resource in resources("snapready.io/"):
        path = resource.paths[0].split("?", 1)[0].strip("/").split("/")
        group, plural = ("", path[2]) if path[0] == "api" else (path[1], path[3])
        for verb in ("list", "watch"):
            assert grants(rules, group, plural, verb), f"{verb} {group}/{plural} not granted"


def test_writes_are_granted_and_bounded() -> None:
    """The leader's writes: scope (webhook configurations, by name), origin records (its own
    SnapshotRecords: create, and delete of a leftover; never a write on a PodSnapshot, which
    GKE's guard refuses), origin pods read once, outcomes and gate conditions on pods, the
    Lease (its own Role)."""
    docs = documents()
    rules = docs[0]["rules"]
    assert grants(rules, "snapready.io", "snapshotrecords", "create")
    assert grants(rules, "snapready.io", "snapshotrecords", "delete")
    for verb in ("create", "update", "patch", "delete", "deletecollection", "*"):
        assert not grants(rules, "podsnapshot.gke.io", "podsnapshots", verb), verb
    assert grants(rules, "", "pods", "get")
    assert grants(rules, "events.k8s.io", "events", "create")
    assert grants(rules, "events.k8s.io", "events", "patch")
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        rule = next(r for r in rules if kind in r.get("resources", []))
        assert rule["resourceNames"] == ["snapready"] and set(rule["verbs"]) == {"get", "patch"}
    role = next(d for d in docs if d["kind"] == "Role")
    assert grants(role["rules"], "coordination.k8s.io", "leases", "create")
    assert grants(role["rules"], "coordination.k8s.io", "leases", "update")
    # Pods: the recorded outcome (annotation) and the readiness gate's condition, nothing else.
    assert grants(rules, "", "pods", "patch") and grants(rules, "", "pods/status", "patch")
    for verb in ("create", "update", "delete"):
        assert not grants(rules, "", "pods", verb), f"snapready never {verb}s pods"
    assert not grants(rules, "", "events", "create"), "core Events are GKE's: read only"


def test_secrets_and_configmaps_are_read_only_for_stale_config() -> None:
    """The metadata-only watch of consumed configuration (``controllers.config_watch``) and the
    origin record's metadata GETs: get, list, watch; never a write."""
    rules = documents()[0]["rules"]
    for plural in ("secrets", "configmaps"):
        for verb in ("get", "list", "watch"):
            assert grants(rules, "", plural, verb), f"{verb} {plural} not granted"
        for verb in ("create", "update", "patch", "delete"):
            assert not grants(rules, "", plural, verb), f"snapready never {verb}s {plural}"


def test_reports_are_written_in_one_group_only() -> None:
    """Issue 33: the leader writes policy reports in the one report API group (OpenReports in
    this file, as in install.yaml): its namespaced reports only, with exactly the verbs the
    writer uses (compare before write: get/list/watch; create, merge patch, delete), never
    update, never cluster-scoped reports, never wg-policy's group beside it."""
    rules = documents()[0]["rules"]
    verbs = {"get", "list", "watch", "create", "patch", "delete"}
    for verb in verbs:
        assert grants(rules, "openreports.io", "reports", verb), verb
    for verb in ("update", "deletecollection", "*"):
        assert not grants(rules, "openreports.io", "reports", verb), verb
    groups = {"openreports.io", "wgpolicyk8s.io"}
    report_rules = [r for r in rules if groups & set(r.get("apiGroups", []))]
    assert report_rules == [
        {
            "apiGroups": ["openreports.io"],
            "resources": ["reports"],
            "verbs": ["get", "list", "watch", "create", "patch", "delete"],
        }
    ]
