"""``manifests/rbac.yaml``: schema-valid, and exactly what the cluster caches request.

The paths are those the real caches sent to ``FakeApiServer`` (not a list copied from the code),
matched against the ClusterRole with Kubernetes RBAC semantics for resource and non-resource URLs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.conftest import ROOT, make_settings
from tests.support.fake_apiserver import COMPUTE_CLASSES, FakeApiServer
from webhook.cluster.client import open_cluster_source

RBAC = ROOT / "manifests" / "rbac.yaml"


def cluster_role() -> dict[str, Any]:
    """The single ClusterRole document of ``manifests/rbac.yaml``."""
    documents = [doc for doc in yaml.safe_load_all(RBAC.read_text()) if doc]
    assert [doc["kind"] for doc in documents] == ["ClusterRole"]
    role: dict[str, Any] = documents[0]
    return role


def grants(path: str, verb: str, rules: list[dict[str, Any]]) -> bool:
    """Whether ``rules`` allow ``verb`` on an API path (``/api/v1/nodes``, ``/version``)."""
    parts = path.strip("/").split("/")
    if parts[0] == "api" and len(parts) == 3:
        group, resource = "", parts[2]
    elif parts[0] == "apis" and len(parts) == 4:
        group, resource = parts[1], parts[3]
    else:
        return any(path in r.get("nonResourceURLs", []) and verb in r["verbs"] for r in rules)
    return any(
        group in r.get("apiGroups", [])
        and resource in r.get("resources", [])
        and verb in r["verbs"]
        for r in rules
    )


@pytest.mark.parametrize(
    "version",
    [pytest.param("1.30.0", id="valid-on-1-30"), pytest.param("1.36.0", id="valid-on-1-36")],
)
def test_rbac_manifest_is_schema_valid(version: str) -> None:
    kubernetes_validate.validate(cluster_role(), version, strict=True)


def test_rbac_grants_every_request_the_caches_make_and_nothing_more(tmp_path: Path) -> None:
    with FakeApiServer() as api:
        api.routes[COMPUTE_CLASSES] = {"kind": "ComputeClassList", "metadata": {}, "items": []}
        settings = make_settings(source={"kind": "kube", "kubeconfig": api.kubeconfig(tmp_path)})
        source = open_cluster_source(settings)
        try:
            api.wait_for(lambda: source.synced() and len(api.requests(COMPUTE_CLASSES)) >= 2)
        finally:
            source.stop()
    rules = cluster_role()["rules"]
    requested = {(seen.path, "watch" if seen.watch else "list") for seen in api.seen}
    requested = {(p, "get") if p == "/version" else (p, v) for p, v in requested}
    denied = sorted(item for item in requested if not grants(*item, rules))
    assert denied == []
    granted = {(g, res) for r in rules for g in r.get("apiGroups", []) for res in r["resources"]}
    used = {
        ("" if p.startswith("/api/") else p.split("/")[2], p.rsplit("/", 1)[1])
        for p, _ in requested
        if p != "/version"
    }
    assert granted == used, "every granted resource is one the caches read"
    assert all(set(r["verbs"]) <= {"get", "list", "watch"} for r in rules), "read-only"
