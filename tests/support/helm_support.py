"""Shared by the chart and plain-manifest tests: render with Helm, parse, schema-validate.

Rendering uses the real Helm v4 engine through ``helm-python-sdk`` (``helm_python``: a ctypes
binding of ``libhelm_c``; no ``helm`` binary). Validation uses ``kubernetes-validate --strict``
(its Python API): the JSON schemas of the Kubernetes OpenAPI with ``additionalProperties: false``,
so a misspelt or misplaced field fails.

Kinds that cannot be validated: ``Issuer`` and ``Certificate`` (cert-manager.io),
``ServiceMonitor`` and ``PrometheusRule`` (monitoring.coreos.com) are CustomResourceDefinitions of
other projects; kubernetes-validate ships only the built-in API's schemas, so it has none for them
(``SchemaNotFoundError``). Tests check those objects' fields directly instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python
import kubernetes_validate
import yaml
from kubernetes_validate.utils import SchemaNotFoundError

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "chart"
RBAC = ROOT / "manifests" / "rbac.yaml"
INSTALL = ROOT / "manifests" / "install.yaml"

KUBE_VERSIONS = ("1.30.0", "1.36.0")
"""Oldest Kubernetes minor GKE still serves with Pod snapshots in reach, and Helm's default."""
UNVALIDATABLE_KINDS = frozenset({"Issuer", "Certificate", "ServiceMonitor", "PrometheusRule"})
"""CRD kinds of cert-manager and the Prometheus Operator: no schema in kubernetes-validate."""

Obj = dict[str, Any]


def render(
    values: dict[str, Any] | None = None,
    *,
    name: str = "snapready",
    namespace: str = "snapready",
) -> dict[str, str]:
    """Template path -> rendered text (NOTES.txt included), as ``helm template`` would."""
    with helm_python.Chart.load(CHART) as chart:
        return chart.render(values, name=name, namespace=namespace, is_install=True)


def documents(text: str) -> list[Obj]:
    """Non-empty YAML documents of ``text``."""
    return [doc for doc in yaml.safe_load_all(text) if doc]


def objects(rendered: dict[str, str]) -> list[Obj]:
    """Every Kubernetes object of a render, in template order."""
    found: list[Obj] = []
    for path in sorted(rendered):
        if not path.endswith(".txt"):
            found.extend(documents(rendered[path]))
    return found


def by_kind(objs: list[Obj], kind: str) -> list[Obj]:
    """The objects of one kind."""
    return [obj for obj in objs if obj["kind"] == kind]


def one(objs: list[Obj], kind: str) -> Obj:
    """The single object of ``kind`` (fails when there are none or several)."""
    found = by_kind(objs, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def validate_strict(obj: Obj) -> list[str]:
    """Validate ``obj`` against every ``KUBE_VERSIONS`` schema; return the problems found.

    Raises:
        SchemaNotFoundError: the kind has no schema (see ``UNVALIDATABLE_KINDS``).
    """
    problems: list[str] = []
    for version in KUBE_VERSIONS:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(part) for part in exc.path)
            name = f"{obj['kind']}/{obj['metadata']['name']}"
            problems.append(f"{name} @ {version}: {path}: {exc.message}")
    return problems


def validate_all(objs: list[Obj]) -> tuple[list[str], set[str]]:
    """(problems, kinds without a schema) over ``objs``."""
    problems: list[str] = []
    skipped: set[str] = set()
    for obj in objs:
        try:
            problems += validate_strict(obj)
        except SchemaNotFoundError:
            skipped.add(obj["kind"])
    return problems, skipped


SETTINGS_FILE = "settings.yaml"
"""Key of the server settings file in the chart's settings ConfigMap."""


def settings_configmap(objs: list[Obj]) -> Obj:
    """The ConfigMap holding the server settings (others, e.g. the Grafana dashboard, may exist)."""
    found = [c for c in by_kind(objs, "ConfigMap") if SETTINGS_FILE in c.get("data", {})]
    assert len(found) == 1, f"expected one settings ConfigMap, got {len(found)}"
    return found[0]


def settings_of(objs: list[Obj]) -> Obj:
    """The server settings file the chart's ConfigMap carries, parsed."""
    parsed: Obj = yaml.safe_load(settings_configmap(objs)["data"][SETTINGS_FILE])
    return parsed
