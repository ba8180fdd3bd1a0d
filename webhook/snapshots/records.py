"""SnapshotRecords: snapready's own object per PodSnapshot, saying what it was taken from.

GKE refuses every write to a PodSnapshot but its own: its ValidatingAdmissionPolicy
``gke-pod-snapshot-validating-admission-policy`` lets only ``system:pod-snapshot-controller`` and
the node agent ``pod-snapshot-agent`` create, update or patch one (docs/gke-facts.md#section-10;
gke-labs/pod-migration README, "Bypassing GKE Validating Admission Policy for Snapshot
Cleanup"). So an origin record cannot live on the PodSnapshot. It lives in a namespaced
``SnapshotRecord`` (``snapready.io/v1alpha1``, CRD in ``chart/crds/``): one per PodSnapshot,
named after it, owned by it (an ownerReference, so the garbage collector removes the record
with its snapshot), written only by snapready's ServiceAccount (RBAC grants no one else a write
verb; reading is aggregated to ``view``).

A record is believed only for the PodSnapshot whose uid it names (``spec.snapshot.uid``): a
record left over from a deleted snapshot re-created under the same name is not its record.
``RecordJoin`` folds the records into the snapshot index (``SnapshotView.origin``) one changed
object at a time, so a record written at 5,000 snapshots costs one re-sort of one policy's
snapshots, never a rebuild. Pure module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from webhook.base.types import RawObject, mapping, shared
from webhook.snapshots.index import SnapshotIndex
from webhook.snapshots.views import (
    NODE_KEYS,
    ConfigRef,
    OriginRecord,
    SnapshotView,
    WorkloadRef,
    config_refs,
)

GROUP = "snapready.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "SnapshotRecord"
PLURAL = "snapshotrecords"
"""The resource name (``cluster.api.watched`` lists and watches it cluster-wide)."""
FIELD_MANAGER = "snapready-origin"
NODE_FROM = ("gke", "pod")
"""Where a record's node came from: GKE's ``podsnapshot.gke.io/origin-node`` annotation on the
PodSnapshot (GKE's word), or the origin pod's ``spec.nodeName`` (older GKE without it)."""


RecordAction = Literal["written", "converted", "restored"]
"""What the leader did (``snapready_snapshot_records_total{action}``): wrote a new record,
converted an older snapready's annotation, wrote again a record that was removed."""
RECORD_ACTIONS: tuple[RecordAction, ...] = ("written", "converted", "restored")


def record_path(namespace: str, name: str) -> str:
    """The API path of one record (``/apis/snapready.io/v1alpha1/namespaces/NS/...``)."""
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}/{name}"


@dataclass(frozen=True)
class RecordView:
    """The part of one SnapshotRecord the caches keep.

    Attributes:
        namespace, name: identity (the PodSnapshot's).
        snapshot_uid: ``spec.snapshot.uid``, the PodSnapshot it was written for.
        record: the origin record it holds.
        converted: it was converted from a ``<prefix>origin`` annotation of an older snapready.
    """

    namespace: str
    name: str
    snapshot_uid: str
    record: OriginRecord
    converted: bool = False


MAX_FIELDS = 8192
"""``spec.fields`` ``maxProperties`` in the CRD (~10 per container; ``injection.max_containers``
is 500): more, and the digests are dropped (the fingerprint stays)."""
MAX_CONFIG = 2048
"""``spec.config`` ``maxItems`` in the CRD: more, and the consumed configuration is unknown."""
MAX_TEXT = 253
"""``maxLength`` of names and node facts in the CRD: a longer value is unknown (null)."""
MAX_UID = 128
MAX_BLOCKER = 512
"""``spec.restoreBlocker`` ``maxLength`` in the CRD (the sentence clips names to 63)."""


def _bounded(value: str | None, limit: int = MAX_TEXT) -> str | None:
    return value if value is None or len(value) <= limit else None


def record_spec(record: OriginRecord, snapshot: SnapshotView, *, converted: bool) -> RawObject:
    """The ``spec`` of a SnapshotRecord for ``record`` of ``snapshot`` (JSON-ready dict).

    Every key is present (null: unknown), so ``kubectl get -o yaml`` shows what is not known.
    Within the CRD's bounds, so the API server never refuses a record snapready builds: a value
    beyond them (a tenant's 300-character ownerReference, 9,000 field digests) is unknown instead
    (``MAX_FIELDS``, ``MAX_CONFIG``, ``MAX_TEXT``).
    """
    workload = record.workload
    if workload is not None and (
        not workload.kind
        or not workload.name
        or _bounded(workload.kind) is None
        or _bounded(workload.name) is None
        or _bounded(workload.uid, MAX_UID) is None
    ):
        workload = None
    config = record.config
    if config is not None and len(config) > MAX_CONFIG:
        config = None
    fields = dict(record.fields) if len(record.fields) <= MAX_FIELDS else {}
    return {
        "snapshot": {"name": snapshot.name, "uid": snapshot.uid, "policy": snapshot.policy},
        "originPod": _bounded(record.pod),
        "originNode": _bounded(record.node_name),
        "nodeFrom": record.node_from,
        "triggeredBy": _bounded(record.triggered_by),
        "specHash": record.spec_hash,
        "fields": fields,
        "node": {key: _bounded(record.node.get(key)) for key in NODE_KEYS},
        "group": dict(record.group),
        "workload": None
        if workload is None
        else {"kind": workload.kind, "name": workload.name, "uid": workload.uid},
        "config": None if config is None else [ref.to_json() for ref in config],
        "convertedFrom": "annotation" if converted else None,
        "restoreBlocker": _bounded(record.blocker, MAX_BLOCKER),
    }


def record_object(
    record: OriginRecord, snapshot: SnapshotView, snapshot_api_version: str, *, converted: bool
) -> RawObject:
    """A whole SnapshotRecord to create: named after ``snapshot``, in its namespace, owned by it
    (``snapshot_api_version``: the served PodSnapshot version, ``podsnapshot.gke.io/v1``).

    The ownerReference has no ``blockOwnerDeletion``: setting it needs update rights on the
    PodSnapshot's finalizers where the OwnerReferencesPermissionEnforcement plugin runs, and
    a record must never hold up GKE's deletion of its snapshot.
    """
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": snapshot.name,
            "namespace": snapshot.namespace,
            "ownerReferences": [
                {
                    "apiVersion": snapshot_api_version,
                    "kind": "PodSnapshot",
                    "name": snapshot.name,
                    "uid": snapshot.uid,
                }
            ],
        },
        "spec": record_spec(record, snapshot, converted=converted),
    }


def record_view(obj: RawObject) -> RecordView | None:
    """A ``RecordView`` of a SnapshotRecord object; None without namespace, name or a
    ``spec.snapshot.uid`` (nothing to believe it for)."""
    metadata, spec = mapping(obj.get("metadata")), mapping(obj.get("spec"))
    namespace, name = _str(metadata.get("namespace")), _str(metadata.get("name"))
    uid = _str(mapping(spec.get("snapshot")).get("uid"))
    if namespace is None or name is None or uid is None:
        return None
    return RecordView(
        namespace, name, uid, record_from_spec(spec), spec.get("convertedFrom") == "annotation"
    )


def record_from_spec(spec: Mapping[str, Any]) -> OriginRecord:
    """The ``OriginRecord`` a SnapshotRecord's ``spec`` holds; entries of another shape are
    dropped (the CRD's schema refuses most of them on the API server, but not every reader
    gets its objects from there)."""
    fields, node, group = (mapping(spec.get(key)) for key in ("fields", "node", "group"))
    workload = mapping(spec.get("workload"))
    kind, name = _str(workload.get("kind")), _str(workload.get("name"))
    node_from = spec.get("nodeFrom")
    # Records of one template repeat its fingerprint, digests, node facts and group: kept once.
    return OriginRecord(
        pod=shared(_str(spec.get("originPod"))),
        spec_hash=shared(_str(spec.get("specHash"))),
        fields={shared(str(k)): shared(v) for k, v in fields.items() if isinstance(v, str)},
        node={key: shared(_str(node.get(key))) for key in NODE_KEYS},
        group={shared(str(k)): shared(v) for k, v in group.items() if isinstance(v, str)},
        workload=None
        if kind is None or name is None
        else WorkloadRef(shared(kind), shared(name), _str(workload.get("uid")) or ""),
        config=config_refs(spec.get("config")),
        node_name=shared(_str(spec.get("originNode"))),
        node_from=node_from if node_from in NODE_FROM else None,
        triggered_by=shared(_str(spec.get("triggeredBy"))),
        blocker=_bounded(_str(spec.get("restoreBlocker")), MAX_BLOCKER),
    )


def joined(view: SnapshotView, record: RecordView | None) -> SnapshotView:
    """``view`` with the origin ``record`` holds, when it was written for this PodSnapshot
    (same uid); otherwise with no origin (unknown until the leader writes one)."""
    origin = record.record if record is not None and record.snapshot_uid == view.uid else None
    if origin is view.origin:
        return view
    return replace(view, origin=origin)


class RecordJoin:
    """The snapshot index with each PodSnapshot's record folded in, kept up to date by key.

    ``touch(key)`` after a PodSnapshot or a record ``namespace/name`` changed, ``touch_all()``
    after a relist; ``refresh(snapshots, records)`` then applies only what changed (one
    ``SnapshotIndex.updated`` per touched key) and returns the joined index. Not thread-safe:
    the caches call it under their lock.
    """

    def __init__(self) -> None:
        self.index = SnapshotIndex()
        self._dirty: set[str] = set()
        self._all = True

    def touch(self, key: str) -> None:
        """Mark one ``namespace/name`` changed."""
        self._dirty.add(key)

    def touch_all(self) -> None:
        """Mark everything changed (a relist of either collection)."""
        self._all = True

    def refresh(self, snapshots: SnapshotIndex, records: Mapping[str, RecordView]) -> SnapshotIndex:
        """The joined index for the current ``snapshots`` and ``records``."""
        if self._all:
            self._all, self._dirty = False, set()
            self.index = SnapshotIndex.build(
                joined(v, records.get(f"{v.namespace}/{v.name}"))
                for v in snapshots.by_name.values()
            )
            return self.index
        dirty, self._dirty = self._dirty, set()
        for key in dirty:
            namespace, _, name = key.partition("/")
            old, base = self.index.named(namespace, name), snapshots.named(namespace, name)
            new = joined(base, records.get(key)) if base is not None else None
            if old is not new:
                self.index = self.index.updated(old, new)
        return self.index


def join_all(views: Iterable[SnapshotView], records: Iterable[RecordView]) -> list[SnapshotView]:
    """``views`` with their records (the CLI's one-shot read: both lists at once)."""
    by_key = {f"{r.namespace}/{r.name}": r for r in records}
    return [joined(v, by_key.get(f"{v.namespace}/{v.name}")) for v in views]


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


__all__ = [
    "API_VERSION",
    "FIELD_MANAGER",
    "GROUP",
    "KIND",
    "PLURAL",
    "RECORD_ACTIONS",
    "VERSION",
    "ConfigRef",
    "RecordAction",
    "RecordJoin",
    "RecordView",
    "join_all",
    "joined",
    "record_from_spec",
    "record_object",
    "record_path",
    "record_spec",
    "record_view",
]
