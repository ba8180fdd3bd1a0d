"""``cluster.api.watched``: the caches and the one-shot reader of ``status``/``explain`` read one
table.

Every cache's paths are a ``Collection``'s; every list the reader sends is one of those paths
(scoped to a namespace when asked). The paths themselves are pinned: they are what the API server
sees and what ``manifests/rbac.yaml`` grants (``test_rbac``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from webhook.base.config import Settings
from webhook.base.types import RawObject
from webhook.cluster.api.caches import resources
from webhook.cluster.api.snapshot_reader import (
    read_gke_events,
    read_live,
    read_pools,
    read_records,
    read_storage_configs,
)
from webhook.cluster.api.syncing import NotServed
from webhook.cluster.api.watched import (
    COMPUTE_CLASSES,
    CONFIGS,
    DISRUPTION_BUDGETS,
    GKE_EVENTS,
    NAMESPACES,
    NODES,
    POLICIES,
    RECORDS,
    SECRETS,
    SNAPSHOTS,
    STORAGE_CONFIGS,
    Collection,
    stamped_pods,
)

PREFIX = "snapready.io/"


class Recorder:
    """A transport that answers every list with no items and remembers the paths; paths under
    ``unserved`` answer 404 (an API that is not installed)."""

    def __init__(self, unserved: tuple[str, ...] = ()) -> None:
        self.paths: list[str] = []
        self.unserved = unserved

    def list(
        self, path: str, *, page_size: int, each: Callable[[RawObject], None] | None = None
    ) -> tuple[list[RawObject], str]:
        self.paths.append(path)
        if path.startswith(self.unserved):
            raise NotServed(path)
        return [], "1"

    def get(self, path: str) -> RawObject:
        raise NotServed(path)

    def metadata_only(self) -> Recorder:
        return self


def cached_paths() -> set[str]:
    return {path for resource in resources(PREFIX) for path in resource.paths}


def test_every_cache_reads_its_watched_collection() -> None:
    table = (
        POLICIES,
        STORAGE_CONFIGS,
        NAMESPACES,
        NODES,
        SNAPSHOTS,
        RECORDS,
        stamped_pods(PREFIX),
        GKE_EVENTS,
        COMPUTE_CLASSES,
        DISRUPTION_BUDGETS,
    )
    by_name = {collection.name: collection for collection in table}
    caches = resources(PREFIX)
    assert [r.name for r in caches] == [c.name for c in table]
    for resource in caches:
        assert resource.paths == by_name[resource.name].paths(), resource.name


def test_the_reader_lists_what_the_caches_watch() -> None:
    transport: Any = Recorder()
    notes: list[str] = []
    read_live(transport, None, Settings(), classes=True)
    read_records(transport, None, 500, notes)
    read_gke_events(transport, None, 500, notes)
    read_pools(transport, 500, notes)
    read_storage_configs(transport, 500, notes)
    assert set(transport.paths) <= cached_paths()
    assert {path.split("?")[0].rsplit("/", 1)[1] for path in transport.paths} == {
        "podsnapshotpolicies",
        "podsnapshots",
        "nodes",
        "pods",
        "snapshotrecords",
        "events",
        "podsnapshotstorageconfigs",
        "computeclasses",  # explain predicts a ComputeClass-pinned pod as admission does
    }
    assert not notes


def test_the_reader_falls_back_to_v1alpha1_like_the_caches() -> None:
    transport: Any = Recorder(unserved=("/apis/podsnapshot.gke.io/v1/",))
    read_live(transport, "ns", Settings(), pods=False)
    assert transport.paths[:2] == [
        "/apis/podsnapshot.gke.io/v1/namespaces/ns/podsnapshotpolicies",
        "/apis/podsnapshot.gke.io/v1alpha1/namespaces/ns/podsnapshotpolicies",
    ]


@pytest.mark.parametrize(
    ("collection", "namespace", "fields", "path"),
    [
        pytest.param(
            POLICIES,
            None,
            "",
            "/apis/podsnapshot.gke.io/v1/podsnapshotpolicies",
            id="policies-of-every-namespace-prefer-v1",
        ),
        pytest.param(
            SNAPSHOTS,
            "team-a",
            "",
            "/apis/podsnapshot.gke.io/v1/namespaces/team-a/podsnapshots",
            id="snapshots-of-one-namespace",
        ),
        pytest.param(
            RECORDS,
            None,
            "",
            "/apis/snapready.io/v1alpha1/snapshotrecords",
            id="snapready-records",
        ),
        pytest.param(
            stamped_pods(PREFIX),
            "team-a",
            "",
            "/api/v1/namespaces/team-a/pods?labelSelector=snapready.io%2Fselected%3Dtrue",
            id="only-stamped-pods",
        ),
        pytest.param(
            GKE_EVENTS,
            None,
            "",
            "/api/v1/events?fieldSelector=reason%3DGKEPodSnapshotting",
            id="only-gke-snapshot-events",
        ),
        pytest.param(
            GKE_EVENTS,
            "team-a",
            "involvedObject.name=llm-0",
            "/api/v1/namespaces/team-a/events"
            "?fieldSelector=reason%3DGKEPodSnapshotting%2CinvolvedObject.name%3Dllm-0",
            id="one-pods-gke-events",
        ),
        pytest.param(
            SECRETS,
            "team-a",
            "",
            "/api/v1/namespaces/team-a/secrets",
            id="secrets-of-one-namespace-metadata-only",
        ),
        pytest.param(
            DISRUPTION_BUDGETS,
            "team-a",
            "",
            "/apis/policy/v1/namespaces/team-a/poddisruptionbudgets",
            id="budgets-of-one-namespace",
        ),
    ],
)
def test_paths_are_pinned(
    collection: Collection, namespace: str | None, fields: str, path: str
) -> None:
    assert collection.path(namespace, fields=fields) == path


def test_snapshot_apis_are_tried_v1_first() -> None:
    assert STORAGE_CONFIGS.paths() == (
        "/apis/podsnapshot.gke.io/v1/podsnapshotstorageconfigs",
        "/apis/podsnapshot.gke.io/v1alpha1/podsnapshotstorageconfigs",
    )


def test_the_config_watch_reads_the_collections_the_reader_lists() -> None:
    """The per-namespace Secret/ConfigMap reflectors (``controllers.config_watch``) and the reader's
    ``read_configs`` list one table: ``watched.CONFIGS``."""
    from webhook.cluster.controllers.config_watch import KINDS, _resource  # noqa: PLC0415

    assert KINDS is CONFIGS
    found = [(r.name, r.paths) for r in (_resource("ns", k, c) for k, c in KINDS)]
    assert found == [
        ("secrets/ns", ("/api/v1/namespaces/ns/secrets",)),
        ("configmaps/ns", ("/api/v1/namespaces/ns/configmaps",)),
    ]
