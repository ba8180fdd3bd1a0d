"""Issue 33 end to end: snapready installed from the chart writes policy reports on a real API
server, and a pod created with ``dryRun`` (which passes both of snapready's webhooks) gets none.

The chart is rendered with ``reports.api=openreports`` (its ClusterRole grants the report verbs
on ``openreports.io`` only), the server runs with the chart's settings as the chart's
ServiceAccount, tracking only this test's namespace, with a full audit pass every second. The
OpenReports CRD is the project's own (``tests/data/reports/``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import (
    BASE_VALUES,
    GVISOR,
    SPEC_HASH,
    compliant_pod,
    create_namespace,
    ensure,
    must,
    policy,
)
from tests.envtest.controlplane import ControlPlane
from tests.support import kube_raw
from tests.support.reports import get_report, install_report_crds, reports_in, wait_report
from tests.support.webhooks import ClusterSnapready, new_instance, snapready_on_cluster, wait_until

pytestmark = pytest.mark.e2e
LAST_PASS = re.compile(r"last full pass (\S+)")


@pytest.fixture(scope="module")
def served(
    control_plane: ControlPlane,
    podsnapshot_crds: list[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ClusterSnapready, str]]:
    """snapready from the chart, reports on, serving and auditing one namespace."""
    api = control_plane.api_client()
    install_report_crds(api)
    instance = new_instance()
    namespace, storage = f"e2e-reports-{instance}", f"e2e-{instance}"
    scope = {"snapready.test/instance": instance}
    ensure(api, GVISOR)
    must(
        kube_raw.create(
            api,
            {
                "apiVersion": "podsnapshot.gke.io/v1",
                "kind": "PodSnapshotStorageConfig",
                "metadata": {"name": storage, "labels": scope},
                "spec": {"snapshotStorageConfig": {"gcs": {"bucket": f"snapready-{instance}"}}},
            },
        )
    )
    create_namespace(api, namespace, scope)
    must(kube_raw.create(api, policy("llm-policy", {"app": "llm"}, storage), namespace=namespace))
    values = {
        **BASE_VALUES,
        "reports": {
            "api": "openreports",
            "results": ["pass", "fail", "warn", "error", "skip"],
            "auditPeriodSeconds": 1,
            "writesPerSecond": 100,
        },
        "settings": BASE_VALUES["settings"],
    }
    # Every snapready process of the tests tracks no namespace (TEST_ENV): this one its own.
    tracked = {"SNAPREADY_OUTCOMES__NAMESPACES": f'["{namespace}"]'}
    workdir = tmp_path_factory.mktemp("e2e-reports")
    try:
        with snapready_on_cluster(
            control_plane, api, workdir, values=values, env=tracked, instance=instance
        ) as snapready:

            def stamped() -> bool:
                reply = kube_raw.create(
                    api, compliant_pod("probe"), namespace=namespace, dry_run=True
                )
                return reply.ok and SPEC_HASH in reply.annotations()

            wait_until("the mutating webhook to stamp a selected pod", stamped)
            yield snapready, namespace
    finally:
        kube_raw.delete(
            api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
        api.close()  # type: ignore[no-untyped-call]


def reports_status(snapready: ClusterSnapready) -> str:
    _, body = snapready.process.readyz()
    return str(body.get("details", body).get("reports", ""))


def test_a_dry_run_create_passes_the_webhooks_and_gets_no_report(
    control_plane: ControlPlane, served: tuple[ClusterSnapready, str]
) -> None:
    snapready, namespace = served
    api = control_plane.api_client()
    try:
        dry = kube_raw.create(api, compliant_pod("dry"), namespace=namespace, dry_run=True)
        assert dry.ok and SPEC_HASH in dry.annotations()  # admitted and stamped by snapready
        real = must(kube_raw.create(api, compliant_pod("real"), namespace=namespace))
        report = wait_report(api, namespace, real["metadata"]["uid"])
        assert report["scope"]["name"] == "real"
        before = wait_until(
            "a full audit pass", lambda: LAST_PASS.search(reports_status(snapready)), 30
        ).group(1)
        wait_until(
            "two more full audit passes",
            lambda: (m := LAST_PASS.search(reports_status(snapready))) and m.group(1) > before,
            30,
        )
        assert get_report(api, namespace, dry.body["metadata"]["uid"]) is None
        assert [r["scope"]["name"] for r in reports_in(api, namespace)] == ["real"]
        assert reports_status(snapready).startswith("openreports.io/v1alpha1 Report: 1 report;")
    finally:
        api.close()  # type: ignore[no-untyped-call]
