"""What snapready reads from the API server: one table of collections, for every reader.

The caches (``caches.resources``: list, then watch) and the one-shot reader of
``snapready status``/``explain`` (``cluster.api.snapshot_reader``: one paginated list) name their
collections here, so the commands read the same objects through the same API versions as the
leader, and ``manifests/rbac.yaml`` grants exactly these (``tests/cluster/api/test_rbac.py``).
A ``Collection`` knows its API paths (preferred first: PodSnapshot CRDs as ``v1``, then
``v1alpha1``, which older GKE clusters served alone) and the selectors every read of it carries
(stamped pods only; GKE's ``GKEPodSnapshotting`` Events only, never all Events).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from webhook.base.keys import SELECTED
from webhook.snapshots.evidence import GKE_EVENT_REASON
from webhook.snapshots.records import GROUP, PLURAL, VERSION

SNAPSHOT_API = "/apis/podsnapshot.gke.io"
SNAPSHOT_VERSIONS = ("v1", "v1alpha1")
"""The PodSnapshot API versions, preferred first."""
VERSION_PATH = "/version"
"""The API server's version document (``gitVersion``: the GKE version)."""
CORE = ("/api/v1",)
_SNAPSHOT_APIS = tuple(f"{SNAPSHOT_API}/{version}" for version in SNAPSHOT_VERSIONS)


@dataclass(frozen=True)
class Collection:
    """One listed (and, by the caches, watched) resource.

    Attributes:
        name: the cache's name, also the ``/readyz`` details key (``gkeevents``).
        apis: the group-version paths it may be served under, preferred first.
        plural: the resource in the path, when it differs from ``name`` (``events``).
        labels: the label selector every read carries, unencoded ("" for none).
        fields: the field selector every read carries, unencoded ("" for none).
    """

    name: str
    apis: tuple[str, ...]
    plural: str = ""
    labels: str = ""
    fields: str = ""

    def paths(self, namespace: str | None = None, *, fields: str = "") -> tuple[str, ...]:
        """The collection's path under each API, preferred first: of ``namespace`` (None: every
        namespace), with its selectors URL-encoded; ``fields``: more field-selector terms
        (``involvedObject.name=<pod>``), ANDed with the collection's own."""
        where = f"/namespaces/{quote(namespace, safe='')}" if namespace else ""
        query = self.query(fields)
        return tuple(f"{api}{where}/{self.plural or self.name}{query}" for api in self.apis)

    def path(self, namespace: str | None = None, *, fields: str = "") -> str:
        """The preferred path (``paths``' first), for a collection served under one API."""
        return self.paths(namespace, fields=fields)[0]

    def query(self, fields: str = "") -> str:
        """``?labelSelector=...&fieldSelector=...`` (URL-encoded), or "" without selectors."""
        parts = ["labelSelector=" + quote(self.labels, safe="")] if self.labels else []
        selector = ",".join(term for term in (self.fields, fields) if term)
        if selector:
            parts.append("fieldSelector=" + quote(selector, safe=""))
        return "?" + "&".join(parts) if parts else ""


POLICIES = Collection("podsnapshotpolicies", _SNAPSHOT_APIS)
STORAGE_CONFIGS = Collection("podsnapshotstorageconfigs", _SNAPSHOT_APIS)
NAMESPACES = Collection("namespaces", CORE)
NODES = Collection("nodes", CORE)
SNAPSHOTS = Collection("podsnapshots", _SNAPSHOT_APIS)
RECORDS = Collection(PLURAL, (f"/apis/{GROUP}/{VERSION}",))
"""snapready's own SnapshotRecords, one per PodSnapshot (GKE refuses writes to PodSnapshots)."""
GKE_EVENTS = Collection("gkeevents", CORE, plural="events", fields=f"reason={GKE_EVENT_REASON}")
"""GKE's restore evidence: only core/v1 Events of reason ``GKEPodSnapshotting``."""
COMPUTE_CLASSES = Collection("computeclasses", ("/apis/cloud.google.com/v1",))
DISRUPTION_BUDGETS = Collection("poddisruptionbudgets", ("/apis/policy/v1",))
SECRETS = Collection("secrets", CORE)
CONFIG_MAPS = Collection("configmaps", CORE)
CONFIGS = (("Secret", SECRETS), ("ConfigMap", CONFIG_MAPS))
"""The configuration a snapshot's origin pod may have read, by kind: listed (and watched by
``cluster.controllers.config_watch``) metadata-only, ``PartialObjectMetadata``, per namespace whose
snapshots name consumed configuration (``snapshots.config_refs``)."""


def stamped_pods(prefix: str) -> Collection:
    """The pods snapready stamped: label ``<prefix>selected=true`` (``pods`` of the caches)."""
    return Collection("pods", CORE, labels=f"{prefix}{SELECTED}=true")
