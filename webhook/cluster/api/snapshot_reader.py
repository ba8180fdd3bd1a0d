"""The one-shot reader of the cluster: what ``snapready status`` and ``explain`` read, once.

The commands run from a laptop (or a pod) against a cluster, with no cache: every call is a plain
paginated list or GET through ``transport.KubeTransport`` (raw JSON) of the collections the
caches watch (``cluster.api.watched``: same paths, same API versions, same selectors), converted by
the same functions the caches use (``parse_policy``, ``snapshot_view`` with the
``<prefix>origin`` record, ``node_view`` + ``node_pools``, ``gke_event`` + ``index_events``), so
the answers tell the same story as the admission-time annotations and the leader's Events.
PodSnapshot APIs are tried as ``v1``, then ``v1alpha1``, like the caches.

GKE's restore evidence: ``read_gke_events`` lists only core/v1 Events of reason
``GKEPodSnapshotting`` (field selector, never all Events; one pod's with ``involvedObject.name``
too); a refused or failed list is a note, never an error: outcomes are then decided from the
pods' conditions and the recorded ``<prefix>restore-outcome`` alone.

Errors: ``ConfigError`` (no such pod), ``NotServed`` (404), ``TransportError`` (anything else:
unreachable, 403, 5xx), ``Gone`` (a list's continue token expired): ``READ_ERRORS``; what can
be left out (nodes, records, Events, Secret/ConfigMap metadata, storage configs) is a note in
``Live.notes`` instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import quote

from webhook.base.config import Settings
from webhook.base.errors import ConfigError
from webhook.base.keys import ORIGIN
from webhook.base.text import clip
from webhook.base.types import RawObject, mapping
from webhook.cluster.api.syncing import Gone, NotServed, TransportError
from webhook.cluster.api.watched import (
    COMPUTE_CLASSES,
    CONFIGS,
    GKE_EVENTS,
    NODES,
    POLICIES,
    RECORDS,
    SNAPSHOTS,
    STORAGE_CONFIGS,
    Collection,
    stamped_pods,
)
from webhook.kube.matching import Policy
from webhook.snapshots.config_refs import ConfigMeta, config_meta, watched_namespaces
from webhook.snapshots.evidence import (
    GKE_EVENT_REASON,
    GkeEvent,
    PodEvents,
    gke_event,
    index_events,
)
from webhook.snapshots.facts import compute_class_facts, node_pools, node_view
from webhook.snapshots.index import SnapshotIndex
from webhook.snapshots.records import RecordView, join_all, record_view
from webhook.snapshots.state import (
    ComputeClassFacts,
    NodePoolFacts,
    NodeView,
    StorageConfig,
    parse_policy,
    parse_storage_config,
)
from webhook.snapshots.views import SnapshotView, snapshot_view

if TYPE_CHECKING:  # the kubernetes client is imported only when a command connects
    from webhook.cluster.api.transport import KubeTransport

READ_ERRORS = (TransportError, NotServed, Gone)
"""What reading the API server may raise (``Gone``: a list's continue token expired)."""


@dataclass
class Live:
    """One reading of the cluster (a namespace, or all of them when ``namespace`` is None).

    Attributes:
        policies: parsed PodSnapshotPolicies (unreadable ones skipped, named in ``notes``).
        snapshots: every PodSnapshot view; ``index``: the same, indexed like the cache.
        pools: node pool facts from the live Nodes (empty when nodes cannot be listed);
            ``nodes``: the same Nodes' views by name (which pool and version a pod runs on).
        pods: raw stamped pods (label ``<prefix>selected=true``).
        events: GKE's ``GKEPodSnapshotting`` Events by pod (``read_gke_events``); None when
            not read or the list failed (a note says so).
        snapshot_uids: ``metadata.uid`` of each PodSnapshot by (namespace, name) (``--sizes``).
        gcs_paths: GKE's ``status.storageStatus.gcs.observedGCSPath`` of each PodSnapshot that
            has one, by (namespace, name) (``--sizes``).
        records: whether snapready's SnapshotRecords could be read (``read_records``);
            without them every snapshot's origin is unknown (a note says why).
        configs: the Secrets and ConfigMaps (metadata only) of the namespaces whose snapshots
            name consumed configuration (``read_configs``), for ``stale-config``.
        notes: what could not be read and what that leaves out.
    """

    namespace: str | None
    policies: list[Policy] = field(default_factory=list)
    snapshots: list[SnapshotView] = field(default_factory=list)
    index: SnapshotIndex = field(default_factory=SnapshotIndex)
    pools: dict[str, NodePoolFacts] = field(default_factory=dict)
    nodes: dict[str, NodeView] = field(default_factory=dict)
    pods: list[RawObject] = field(default_factory=list)
    events: PodEvents | None = None
    notes: list[str] = field(default_factory=list)
    snapshot_uids: dict[tuple[str, str], str] = field(default_factory=dict)
    gcs_paths: dict[tuple[str, str], str] = field(default_factory=dict)
    records: bool = False
    configs: dict[str, Mapping[tuple[str, str], ConfigMeta]] = field(default_factory=dict)
    compute_classes: dict[str, ComputeClassFacts] | None = None
    """ComputeClass facts by name (``read_compute_classes``); None when not served or not
    readable (a note says so): as the webhook's cache, so ``explain`` predicts as admission."""


def list_served(
    transport: KubeTransport, collection: Collection, namespace: str | None, page_size: int
) -> list[RawObject] | None:
    """Every object of ``collection`` in ``namespace`` (None: every namespace) under its first
    served API (PodSnapshot CRDs: ``v1``, else ``v1alpha1``); None when none is served (the
    CRDs are not installed)."""
    for path in collection.paths(namespace):
        try:
            items, _ = transport.list(path, page_size=page_size)
        except NotServed:
            continue
        return items
    return None


def read_live(
    transport: KubeTransport,
    namespace: str | None,
    settings: Settings,
    *,
    pods: bool = True,
    classes: bool = False,
) -> Live:
    """Policies, snapshots, node pools, (``pods``) stamped pods of ``namespace`` and
    (``classes``, what ``explain``'s prediction reads) the ComputeClasses.

    Raises:
        TransportError: the API server cannot be reached or refuses a list (nodes excepted:
            without them node checks are skipped and a note says so).
    """
    page = settings.source.list_page_size
    live = Live(namespace)
    raw_policies = list_served(transport, POLICIES, namespace, page)
    if raw_policies is None:
        live.notes.append("the podsnapshot.gke.io API is not served: no policies, no snapshots")
    for obj in raw_policies or []:
        try:
            live.policies.append(parse_policy(obj, prefix=settings.prefix, where=_where(obj)))
        except ConfigError as exc:
            live.notes.append(f"skipped an unreadable policy: {exc}")
    origin = settings.annotation(ORIGIN)
    views: list[SnapshotView] = []
    for obj in list_served(transport, SNAPSHOTS, namespace, page) or []:
        view = snapshot_view(obj, origin_annotation=origin)
        if view is not None:
            views.append(view)
            uid = (obj.get("metadata") or {}).get("uid")
            if isinstance(uid, str):
                live.snapshot_uids[view.namespace, view.name] = uid
            gcs = mapping(mapping(mapping(obj.get("status")).get("storageStatus")).get("gcs"))
            if isinstance(gcs.get("observedGCSPath"), str):
                live.gcs_paths[view.namespace, view.name] = gcs["observedGCSPath"]
    records = read_records(transport, namespace, page, live.notes) if views else []
    live.records = records is not None
    live.snapshots = join_all(views, records or [])
    live.index = SnapshotIndex.build(live.snapshots)
    live.configs = read_configs(transport, live.snapshots, page, live.notes)
    live.pools = read_pools(transport, page, live.notes, live.nodes)
    if classes:
        live.compute_classes = read_compute_classes(transport, page, live.notes)
    if pods:
        path = stamped_pods(settings.prefix).path(namespace)
        live.pods, _ = transport.list(path, page_size=page)
    return live


def read_records(
    transport: KubeTransport, namespace: str | None, page_size: int, notes: list[str]
) -> list[RecordView] | None:
    """snapready's SnapshotRecords of ``namespace`` (all namespaces: None), or None with a
    note when they cannot be read (the CRD is not installed, or the user may not list them:
    reading is aggregated to the ``view`` ClusterRole)."""
    try:
        items, _ = transport.list(RECORDS.path(namespace), page_size=page_size)
    except NotServed:
        notes.append(
            "the SnapshotRecord API (snapready.io/v1alpha1) is not served: origins unknown "
            "(install the chart's CRD)"
        )
        return None
    except TransportError as exc:
        notes.append(f"cannot read SnapshotRecords ({clip(str(exc), 120)}): origins unknown")
        return None
    return [view for view in map(record_view, items) if view is not None]


def read_configs(
    transport: KubeTransport, views: Sequence[SnapshotView], page_size: int, notes: list[str]
) -> dict[str, Mapping[tuple[str, str], ConfigMeta]]:
    """The Secrets and ConfigMaps of each namespace whose snapshots name consumed
    configuration, listed metadata-only (never a value); a refused list leaves that namespace
    out (not judged ``stale-config``) with a note."""
    out: dict[str, Mapping[tuple[str, str], ConfigMeta]] = {}
    namespaces = sorted(watched_namespaces(views))
    metadata = transport.metadata_only() if namespaces else transport
    for namespace in namespaces:
        found: dict[tuple[str, str], ConfigMeta] = {}
        try:
            for kind, collection in CONFIGS:
                items, _ = metadata.list(collection.path(namespace), page_size=page_size)
                for obj in items:
                    meta, name = config_meta(obj), (obj.get("metadata") or {}).get("name")
                    if meta is not None and isinstance(name, str):
                        found[(kind, name)] = meta
        except (NotServed, TransportError) as exc:
            notes.append(
                f"cannot list Secret/ConfigMap metadata in {namespace} ({clip(str(exc), 120)}): "
                "stale-config not judged there"
            )
            continue
        out[namespace] = found
    return out


def read_compute_classes(
    transport: KubeTransport, page_size: int, notes: list[str]
) -> dict[str, ComputeClassFacts] | None:
    """ComputeClass facts by name (``snapshots.facts.compute_class_facts``); None when the API
    is not served (not GKE) or cannot be listed (a note: pods pinned to a class are then
    predicted without it)."""
    try:
        items = list_served(transport, COMPUTE_CLASSES, None, page_size)
    except TransportError as exc:
        notes.append(f"cannot list ComputeClasses ({clip(str(exc), 120)}): not judged")
        return None
    if items is None:
        return None
    facts = (compute_class_facts(obj) for obj in items)
    return {found.name: found for found in facts if found is not None}


def read_pools(
    transport: KubeTransport,
    page_size: int,
    notes: list[str],
    by_name: dict[str, NodeView] | None = None,
) -> dict[str, NodePoolFacts]:
    """Node pool facts of the live Nodes; ``{}`` (and a note) when they cannot be listed.
    ``by_name``, when given, is filled with each Node's view by name."""
    try:
        nodes, _ = transport.list(NODES.path(), page_size=page_size)
    except (NotServed, TransportError) as exc:
        notes.append(f"cannot list nodes ({exc}): node versions and pools not checked")
        return {}
    views = []
    for obj in nodes:
        view = node_view(obj)
        if view is not None:
            views.append(view)
            name = (obj.get("metadata") or {}).get("name")
            if by_name is not None and isinstance(name, str):
                by_name[name] = view
    return node_pools(views)


def read_gke_events(
    transport: KubeTransport,
    namespace: str | None,
    page_size: int,
    notes: list[str],
    *,
    pod: str | None = None,
) -> PodEvents | None:
    """GKE's ``GKEPodSnapshotting`` Events of ``namespace`` (every namespace: None), of one
    ``pod`` when given, indexed by pod; None (and a note) when they cannot be listed (403: the
    caller may not list Events), so outcomes are decided without them."""
    more = f"involvedObject.name={pod}" if pod is not None else ""
    path = GKE_EVENTS.path(namespace, fields=more)
    try:
        items, _ = transport.list(path, page_size=page_size)
    except READ_ERRORS as exc:
        notes.append(
            f"cannot list GKE's {GKE_EVENT_REASON} events ({clip(str(exc), 160)}): outcomes "
            "are decided without GKE's events, from the pods' conditions and the recorded "
            "outcomes only"
        )
        return None
    found: list[GkeEvent] = [e for e in (gke_event(item) for item in items) if e is not None]
    return index_events(found)


def read_storage_configs(
    transport: KubeTransport, page_size: int, notes: list[str]
) -> dict[str, StorageConfig] | None:
    """Every PodSnapshotStorageConfig by name; None (and a note) when they cannot be listed
    (403: the caller may not list them; the API not served)."""
    try:
        items = list_served(transport, STORAGE_CONFIGS, None, page_size)
    except READ_ERRORS as exc:
        notes.append(
            f"cannot list podsnapshotstorageconfigs ({clip(str(exc), 160)}): snapshot sizes unknown"
        )
        return None
    if items is None:
        notes.append("podsnapshotstorageconfigs are not served: snapshot sizes unknown")
        return None
    configs: dict[str, StorageConfig] = {}
    for obj in items:
        try:
            config = parse_storage_config(obj)
        except ConfigError as exc:
            notes.append(f"skipped an unreadable storage config: {exc}")
            continue
        configs[config.name] = config
    return configs


def read_pod(transport: KubeTransport, namespace: str, name: str) -> RawObject:
    """GET one pod.

    Raises:
        ConfigError: no such pod (the message names it).
        TransportError: the API server cannot be reached or refuses the GET.
    """
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"
    try:
        return transport.get(path)
    except NotServed:
        raise ConfigError(f"pod {namespace}/{name} not found") from None


def _where(obj: RawObject) -> str:
    metadata = obj.get("metadata")
    meta = metadata if isinstance(metadata, dict) else {}
    return f"PodSnapshotPolicy {meta.get('namespace') or ''}/{meta.get('name')}"
