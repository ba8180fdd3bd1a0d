"""Policy reports on the real API server (issue 33): the report CRDs and how a test reads them.

The CRDs are the projects' own (``tests/data/reports/``, provenance in ``PROVENANCE.md``):
OpenReports ``openreports.io/v1alpha1`` Report/ClusterReport and wg-policy
``wgpolicyk8s.io/v1alpha2`` PolicyReport/ClusterPolicyReport, installed once per control plane
(idempotent server-side apply). Installing them makes every other snapready of the run see a
report API; their charts grant no report verb, so they say "off" once and write nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.envtest.plugin import install_crds, wait_for
from webhook.kube.policy_reports import OPENREPORTS, ReportApi

DATA = Path(__file__).resolve().parents[1] / "data" / "reports"
CRD_FILES = tuple(sorted(DATA.glob("*.yaml")))


def install_report_crds(api_client: client.ApiClient) -> list[str]:
    """Both projects' report CRDs, Established; their names."""
    names: list[str] = []
    for path in CRD_FILES:
        names += install_crds(api_client, path)
    return names


def get_report(
    api: client.ApiClient, namespace: str, name: str, which: ReportApi = OPENREPORTS
) -> dict[str, Any] | None:
    """The report ``namespace/name`` as the API server has it, or None (404)."""
    try:
        return cast(
            "dict[str, Any]",
            client.CustomObjectsApi(api).get_namespaced_custom_object(
                which.group, which.version, namespace, which.plural, name
            ),
        )
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def reports_in(
    api: client.ApiClient, namespace: str, which: ReportApi = OPENREPORTS
) -> list[dict[str, Any]]:
    """Every report of ``namespace``."""
    listed = client.CustomObjectsApi(api).list_namespaced_custom_object(
        which.group, which.version, namespace, which.plural
    )
    return list(cast("dict[str, Any]", listed)["items"])


def wait_report(
    api: client.ApiClient,
    namespace: str,
    name: str,
    which: ReportApi = OPENREPORTS,
    timeout: float = 30.0,
) -> dict[str, Any]:
    """Wait until the report ``namespace/name`` exists; it."""
    found = wait_for(
        f"report {namespace}/{name}", lambda: get_report(api, namespace, name, which), timeout
    )
    assert found is not None
    return found


def by_rule(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A report's results by rule id."""
    return {item["rule"]: item for item in report.get("results", [])}
