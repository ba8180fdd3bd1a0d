"""Fixtures of the cluster tier: cluster sources on a real API server (``support/kube_real``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_settings
from tests.envtest.controlplane import ControlPlane
from tests.envtest.plugin import wait_for
from tests.support.identity import IdentityFactory, require_token
from tests.support.kube_real import SelectedRule, SpyTransport, spied_source
from tests.support.reports import install_report_crds
from webhook.admission.engine import Engine
from webhook.base.config import Settings
from webhook.cluster.api.caches import ClusterSource
from webhook.snapshots.state import ClusterState

FAST = {"backoff_initial_seconds": 0.05, "backoff_max_seconds": 0.5}
"""Retry quickly: the tests wait for recoveries with a deadline."""


def kube_settings(kubeconfig: Path, **source: Any) -> Settings:
    """Cluster-mode settings for ``kubeconfig`` (fast backoff; ``source`` overrides).

    No leader election: these tests are about the caches, and must not take the shared control
    plane's default Lease. ``kubeconfig`` must be a ServiceAccount's (``require_token``): snapready
    never runs as admin in a real-API test.
    """
    return make_settings(
        source={"kind": "kube", "kubeconfig": require_token(kubeconfig), **FAST, **source},
        leader={"enabled": False},
        # Without election every such source writes: track outcomes in no test's namespace.
        outcomes={"namespaces": ["t-untracked"]},
    )


@dataclass
class Running:
    """A started cluster source, its recording transport and an engine reading it."""

    source: ClusterSource
    spy: SpyTransport
    engine: Engine

    def state(self) -> ClusterState:
        """The source's current state."""
        return self.source.state()

    def status(self, cache: str) -> str:
        """One cache's status as ``/readyz`` shows it."""
        return str(self.source.state().details.get(cache))


StartCluster = Callable[..., Running]


@pytest.fixture
def start_cluster(
    control_plane: ControlPlane, namespace: str, snapready_identity: IdentityFactory
) -> Iterator[StartCluster]:
    """Start ``ClusterSource``s on a real API server (default: the shared one, as snapready's
    ServiceAccount in the test's namespace with the chart's default RBAC).

    ``start_cluster(kubeconfig=None, wait=True, **source_settings)``; the engine's only rule is
    ``SelectedRule``. Every source is stopped after the test (held watches released first).
    """
    started: list[Running] = []
    default: list[Path] = []

    def factory(kubeconfig: Path | None = None, wait: bool = True, **source: Any) -> Running:
        if kubeconfig is None:
            if not default:
                default.append(snapready_identity(namespace).kubeconfig)
            kubeconfig = default[0]
        settings = kube_settings(kubeconfig, **source)
        cluster_source, spy = spied_source(settings)
        engine = Engine(settings=settings, state=cluster_source.state, rules=(SelectedRule(),))
        running = Running(cluster_source, spy, engine)
        started.append(running)
        if wait:
            wait_for("every cache synced", cluster_source.synced, timeout=20)
        return running

    yield factory
    for running in started:
        for path in running.spy.held():
            running.spy.release(path)
        assert running.source.stop(timeout=5.0), "a cache thread did not end"


@pytest.fixture(scope="session")
def report_crds(control_plane: ControlPlane) -> list[str]:
    """The OpenReports and wg-policy report CRDs (``tests/data/reports/``), Established."""
    api_client = control_plane.api_client()
    try:
        return install_report_crds(api_client)
    finally:
        api_client.close()  # type: ignore[no-untyped-call]
