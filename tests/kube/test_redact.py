"""``webhook.kube.redact``: the debug-log copy of an object carries no user secret and stays
bounded.

Each row puts a secret where Kubernetes objects carry user secrets (or shaped like a credential
anywhere) and checks it is gone from the redacted copy; identifiers the logs need are kept.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from webhook.kube.redact import REDACTED, redact


@pytest.mark.parametrize(
    ("value", "secret"),
    [
        pytest.param(
            {"spec": {"containers": [{"env": [{"name": "A", "value": "s3cr3t-env"}]}]}},
            "s3cr3t-env",
            id="removes-env-values",
        ),
        pytest.param(
            {"spec": {"containers": [{"env": {"A": "s3cr3t-env-map"}}]}},
            "s3cr3t-env-map",
            id="removes-env-given-as-a-map",
        ),
        pytest.param(
            {"metadata": {"annotations": {"vault.example/token": "s.abc"}}},
            "s.abc",
            id="removes-secret-named-annotation",
        ),
        pytest.param(
            {"metadata": {"annotations": {"x/y": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig"}}},
            "eyJhbGciOiJIUzI1NiJ9",
            id="removes-jwt-looking-annotation-value",
        ),
        pytest.param(
            {
                "metadata": {
                    "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}x"}
                }
            },
            "{}x",
            id="removes-last-applied-configuration",
        ),
        pytest.param(
            {"spec": {"containers": [{"args": ["--api-key=k3y-value"]}]}},
            "k3y-value",
            id="removes-credential-args",
        ),
        pytest.param(
            {"kind": "Secret", "data": {"pw": "aHVudGVyMg=="}, "stringData": {"pw": "plain-pw"}},
            "plain-pw",
            id="removes-secret-data",
        ),
        pytest.param(
            {"spec": {"x": {"password": "pw-under-any-key"}}},
            "pw-under-any-key",
            id="removes-values-under-secret-looking-keys",
        ),
    ],
)
def test_redact_removes_secret_values(value: dict[str, Any], secret: str) -> None:
    assert secret not in json.dumps(redact(value))


def containers(kind: str, **fields: Any) -> dict[str, Any]:
    """A pod spec with one container of ``kind`` holding ``fields``."""
    return {"spec": {kind: [{"name": "c", **fields}]}}


@pytest.mark.parametrize(
    ("value", "secret"),
    [
        pytest.param(
            containers("containers", args=["--token", "plain-value-1"]),
            "plain-value-1",
            id="flag-value-as-separate-arg",
        ),
        pytest.param(
            containers("initContainers", command=["tool", "--aws-key", "plain-value-2"]),
            "plain-value-2",
            id="init-container-command-item",
        ),
        pytest.param(
            containers("ephemeralContainers", args=["login", "plain-value-3"]),
            "plain-value-3",
            id="ephemeral-container-arg",
        ),
        pytest.param(
            containers(
                "containers",
                livenessProbe={"exec": {"command": ["sh", "-c", "curl -u admin:plain-value-4"]}},
            ),
            "plain-value-4",
            id="probe-exec-command",
        ),
        pytest.param(
            containers(
                "containers",
                startupProbe={
                    "httpGet": {"httpHeaders": [{"name": "X-Api", "value": "plain-value-5"}]}
                },
            ),
            "plain-value-5",
            id="probe-http-header-value",
        ),
        pytest.param(
            containers(
                "containers",
                lifecycle={
                    "preStop": {"httpGet": {"httpHeaders": [{"name": "a", "value": "pv6"}]}}
                },
            ),
            "pv6",
            id="lifecycle-http-header-value",
        ),
        pytest.param(
            containers("containers", env=[{"name": "A", "valueFrom": {"x": "plain-value-7"}}]),
            "plain-value-7",
            id="env-value-from",
        ),
        pytest.param(
            {"metadata": {"annotations": {"example.com/note": "plain-value-8"}}},
            "plain-value-8",
            id="annotation-not-on-the-allow-list",
        ),
        pytest.param(
            {"spec": {"volumes": [{"csi": {"volumeAttributes": {"a": "plain-value-9"}}}]}},
            "plain-value-9",
            id="csi-volume-attributes",
        ),
        pytest.param(
            containers("containers", workingDir="/x/AKIAIOSFODNN7EXAMPLE"),
            "AKIAIOSFODNN7EXAMPLE",
            id="aws-key-id-in-any-field",
        ),
        pytest.param(
            {"metadata": {"labels": {"x": "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA"}}},
            "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA",
            id="base64-looking-label-value",
        ),
        pytest.param(
            {"spec": {"x": "postgres://app:hunter22@db:5432/app"}},
            "hunter22",
            id="url-with-password-in-any-field",
        ),
        pytest.param(
            {"spec": {"x": "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE"}},
            "MHcCAQEE",
            id="pem-private-key-in-any-field",
        ),
    ],
)
def test_debug_redaction_replaces_every_user_supplied_secret_place(
    value: dict[str, Any], secret: str
) -> None:
    assert secret not in json.dumps(redact(value))


def test_redaction_keeps_allow_listed_annotations_and_identifiers() -> None:
    spec_hash = "v1:sha256:" + "ab" * 32
    image = "us-docker.pkg.dev/p/r/app@sha256:" + "cd" * 32
    value = {
        "metadata": {
            "name": "llm-server-b867fccc6-x2x9z",
            "uid": "0f3c2a1b-1111-2222-3333-444455556666",
            "annotations": {"snapready.io/spec-hash": spec_hash, "dev.gvisor.flag": "true"},
        },
        "spec": {"containers": [{"name": "c", "image": image, "args": ["a", "b", "c"]}]},
    }
    out = redact(value)
    assert out["metadata"] == value["metadata"]
    assert out["spec"]["containers"][0]["image"] == image
    assert out["spec"]["containers"][0]["args"] == [REDACTED] * 3


def test_redact_keeps_ordinary_fields_and_bounds_size() -> None:
    deep: Any = "leaf"
    for _ in range(sys.getrecursionlimit() // 2):
        deep = {"d": deep}
    value = {
        "metadata": {"name": "web-1", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}] * 1000, "deep": deep},
    }
    out = redact(value)
    assert out["metadata"] == {"name": "web-1", "labels": {"app": "web"}}
    assert out["spec"]["containers"][0] == {"name": "c", "image": "nginx:1.27"}
    assert len(out["spec"]["containers"]) < 1000
    assert len(json.dumps(out)) < 100_000
