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
