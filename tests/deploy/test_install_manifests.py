"""``manifests/install.yaml``: current with the chart, valid Kubernetes, and safe to publish.

install.yaml is the chart with default values except ``certificates.mode=certManager`` and
``reports.api=openreports`` (scripts/render_manifests.py says why: selfSigned would bake a
private key into a public file and change on every render; offline, no report API can be
discovered). So rendering is deterministic and the staleness check compares
exactly, both through the script's ``--check`` and object by object against a fresh render.
Kinds without a schema (cert-manager Issuer/Certificate) are listed in
``tests/support/helm_support.py``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from tests.support.helm_support import (
    CHART,
    INSTALL,
    ROOT,
    UNVALIDATABLE_KINDS,
    Obj,
    by_kind,
    documents,
    objects,
    one,
    render,
    settings_of,
    validate_all,
)

CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
}


@pytest.fixture(scope="module")
def installed() -> list[Obj]:
    """The objects of the committed install.yaml."""
    return documents(INSTALL.read_text())


def _key(obj: Obj) -> tuple[str, str]:
    return obj["kind"], obj["metadata"]["name"]


def test_render_script_reports_the_file_current() -> None:
    result = subprocess.run(
        [sys.executable, "scripts/render_manifests.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr + "\nrun `make manifests` and commit the result"


def test_objects_equal_a_fresh_render_of_the_chart(installed: list[Obj]) -> None:
    values = {"certificates": {"mode": "certManager"}, "reports": {"api": "openreports"}}
    fresh = objects(render(values))
    rendered = {_key(obj): obj for obj in fresh}
    skip = ("Namespace", "CustomResourceDefinition")
    committed = {_key(obj): obj for obj in installed if obj["kind"] not in skip}
    assert committed.keys() == rendered.keys()
    for key, obj in rendered.items():
        assert committed[key] == obj, f"{key} differs: run `make manifests`"


def test_every_object_is_valid_kubernetes(installed: list[Obj]) -> None:
    problems, skipped = validate_all(installed)
    assert problems == []
    assert skipped == {"Issuer", "Certificate"} <= UNVALIDATABLE_KINDS


def test_no_secret_material_is_published(installed: list[Obj]) -> None:
    assert by_kind(installed, "Secret") == []
    assert "PRIVATE KEY" not in INSTALL.read_text()


def test_the_chart_crds_come_first_as_they_are(installed: list[Obj]) -> None:
    """Issue 31: the SnapshotRecord CRD ships in the plain manifests too, byte-for-byte the
    chart's ``crds/`` file, before anything that could write a record."""
    crds = [yaml.safe_load(p.read_text()) for p in sorted((CHART / "crds").glob("*.yaml"))]
    assert [c["metadata"]["name"] for c in crds] == ["snapshotrecords.snapready.io"]
    assert installed[: len(crds)] == crds


def test_namespace_comes_first_and_holds_every_namespaced_object(installed: list[Obj]) -> None:
    installed = [obj for obj in installed if obj["kind"] != "CustomResourceDefinition"]
    namespace = installed[0]
    assert namespace["kind"] == "Namespace"
    for obj in installed[1:]:
        expected = None if obj["kind"] in CLUSTER_SCOPED else namespace["metadata"]["name"]
        assert obj["metadata"].get("namespace") == expected, _key(obj)


def test_webhook_configurations_come_last(installed: list[Obj]) -> None:
    """kubectl applies in file order: the Service and Deployment exist before the API server
    starts calling them."""
    kinds = [obj["kind"] for obj in installed]
    assert kinds[-2:] == ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]


def test_webhooks_reach_the_service_and_get_the_ca_injected(installed: list[Obj]) -> None:
    service = one(installed, "Service")
    certificate_names = {c["metadata"]["name"] for c in by_kind(installed, "Certificate")}
    paths = {
        "MutatingWebhookConfiguration": "/mutate",
        "ValidatingWebhookConfiguration": "/validate",
    }
    ports = {p["port"] for p in service["spec"]["ports"]}
    for kind, path in paths.items():
        config = one(installed, kind)
        namespace, certificate = config["metadata"]["annotations"][
            "cert-manager.io/inject-ca-from"
        ].split("/")
        assert namespace == service["metadata"]["namespace"]
        assert certificate in certificate_names
        for hook in config["webhooks"]:
            target = hook["clientConfig"]["service"]
            assert (target["name"], target["namespace"], target["path"]) == (
                service["metadata"]["name"],
                service["metadata"]["namespace"],
                path,
            )
            assert target["port"] in ports
            assert hook["failurePolicy"] == settings_of(installed)["failure_policy"]
