"""The typed manager (``cluster.manager``) and the order of the caches' listeners.

Against ``FakeApiServer`` (recorded API JSON, watch events pushed by the test): what
``start_cluster`` returns, and that a pod listener hears about a pod only once the pod is in the
published ``ClusterState`` (never from the pod resource's ``convert``).
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

from tests.conftest import make_settings
from tests.support.fake_apiserver import FakeApiServer, default_routes, with_resource_version
from webhook.base.config import Settings
from webhook.cluster.api.caches import ClusterSource, resources, timing_from
from webhook.cluster.api.client import api_client
from webhook.cluster.api.hooks import CacheHooks
from webhook.cluster.api.transport import KubeTransport
from webhook.cluster.controllers.audit.worker import AuditWorker
from webhook.cluster.controllers.base import Reconciler
from webhook.cluster.controllers.checkpoints import CheckpointReporter
from webhook.cluster.controllers.config_watch import ConfigWatch
from webhook.cluster.controllers.origins.recorder import OriginRecorder
from webhook.cluster.controllers.restores.tracker import RestoreTracker
from webhook.cluster.controllers.scope import ScopeController
from webhook.cluster.controllers.snapshot_lifecycle import LifecycleWorker
from webhook.cluster.controllers.snapshot_warnings import SnapshotWarnings
from webhook.cluster.manager import Cluster, start_cluster
from webhook.snapshots.pod_records import PodRecord

PODS = "/api/v1/pods"
PREFIX = "snapready.io/"


def pod(name: str) -> dict[str, Any]:
    """A stamped pod as the pod cache lists and watches it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team",
            "uid": f"uid-{name}",
            "labels": {PREFIX + "selected": "true"},
            "annotations": {PREFIX + "policy": "llm-policy"},
        },
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:v1"}]},
        "status": {"phase": "Pending"},
    }


def settings_for(api: FakeApiServer, tmp_path: Path) -> Settings:
    """Cluster mode on the fake API server; no election (no Lease API), static scope."""
    return make_settings(
        source={
            "kind": "kube",
            "kubeconfig": api.kubeconfig(tmp_path),
            "backoff_initial_seconds": 0.01,
            "backoff_max_seconds": 0.05,
        },
        leader={"enabled": False},
        scope={"mode": "static"},
        outcomes={"namespaces": ["t-untracked"]},  # nothing here is this replica's to write
    )


def pod_routes(*listed: dict[str, Any]) -> dict[str, Any]:
    """The recorded routes plus a pod list (``listed``) that can be watched."""
    pods = {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "10"}}
    return {**default_routes(), PODS: {**pods, "items": list(listed)}}


def test_start_cluster_returns_every_controller_typed_and_attached(tmp_path: Path) -> None:
    with FakeApiServer(pod_routes()) as api:
        cluster = start_cluster(settings_for(api, tmp_path))
        try:
            kinds = {
                "scope": ScopeController,
                "origins": OriginRecorder,
                "restores": RestoreTracker,
                "checkpoints": CheckpointReporter,
                "warnings": SnapshotWarnings,
                "lifecycle": LifecycleWorker,
                "audit": AuditWorker,
                "configs": ConfigWatch,
            }
            for field, kind in kinds.items():
                assert isinstance(getattr(cluster, field), kind), field
            assert cluster.elector is None
            assert all(isinstance(c, Reconciler) for c in cluster.controllers)
            assert len(set(map(id, cluster.controllers))) == len(kinds)
            assert set(cluster.controllers) <= set(cluster.source.workers)
            names = {c.name for c in cluster.controllers}
            api.wait_for(lambda: names <= cluster.state().details.keys())
            api.wait_for(cluster.synced)
        finally:
            assert cluster.stop(5.0), "a thread did not end"


def test_the_cluster_has_no_untyped_slot() -> None:
    """Every field of ``Cluster`` names its type: nothing is reached through ``Any``."""
    hints = typing.get_type_hints(Cluster)
    assert hints, "Cluster lost its annotations"
    untyped = [name for name, hint in hints.items() if Any in (hint, *typing.get_args(hint))]
    assert not untyped


def test_pod_listeners_run_after_the_store_update(tmp_path: Path) -> None:
    """Listed and watched pods reach the pod listeners only once ``state().pods`` holds them;
    a deleted one reaches the pod-gone listeners once it is no longer there."""
    with FakeApiServer(pod_routes(pod("listed"))) as api:
        settings = settings_for(api, tmp_path)
        client = api_client(settings)
        source = ClusterSource(
            KubeTransport(client, 5.0),
            prefix=PREFIX,
            timing=timing_from(settings.source),
            on_stop=client.close,
        )
        heard: list[tuple[str, str, bool]] = []

        def cached(record: PodRecord) -> bool:
            return f"{record.namespace}/{record.name}" in source.state().pods

        def pods(record: PodRecord) -> None:
            heard.append(("pod", record.name, cached(record)))

        def gone(record: PodRecord) -> None:
            heard.append(("gone", record.name, cached(record)))

        source.start(CacheHooks(pods=(pods,), pods_gone=(gone,)))
        try:
            api.wait_for(lambda: len(heard) >= 1)
            added = with_resource_version({"type": "ADDED", "object": pod("watched")}, "11")
            api.push(PODS, added)
            api.wait_for(lambda: len(heard) >= 2)
            deleted = with_resource_version({"type": "DELETED", "object": pod("watched")}, "12")
            api.push(PODS, deleted)
            api.wait_for(lambda: len(heard) >= 3)
        finally:
            assert source.stop(5.0)
    assert heard == [("pod", "listed", True), ("pod", "watched", True), ("gone", "watched", False)]


def test_the_pod_resource_converts_without_telling_anyone() -> None:
    """``convert`` only converts (it runs before the store holds the record); the listener
    hangs on ``after``, which the reflector calls once the store was updated."""
    told: list[object] = []
    listed = resources(PREFIX, on_pod=lambda *seen: told.append(seen))
    [pods] = [r for r in listed if r.name == "pods"]
    record = pods.convert(pod("p"))
    assert isinstance(record, PodRecord) and record.name == "p"
    assert told == []
    assert pods.after is not None
    pods.after(None, record)
    assert told == [(None, record)]
