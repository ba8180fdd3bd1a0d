"""What ``snapready status`` and ``explain`` read from the API server: one GET or list each.

The commands run from a laptop (or a pod) against a cluster, with no cache: every call is a plain
paginated list or GET through ``cluster.client.KubeTransport`` (raw JSON), converted by the same
functions the cluster caches use (``parse_policy``, ``snapshot_view`` with the ``<prefix>origin``
record, ``node_view`` + ``node_pools``, ``pod_record``, ``gke_event`` + ``index_events``), so the
answers tell the same story as the admission-time annotations and the leader's Events.
PodSnapshot APIs are tried as ``v1``, then ``v1alpha1``, like the caches.

GKE's restore evidence: ``read_gke_events`` lists only core/v1 Events of reason
``GKEPodSnapshotting`` (field selector, never all Events; one pod's with ``involvedObject.name``
too); a refused or failed list is a note, never an error: outcomes are then decided from the
pods' conditions and the recorded ``<prefix>restore-outcome`` alone. ``judge`` is the outcome
both commands show: the outcome the leader recorded on the pod when it is a known one (GKE's
Events expire with the API server's ``--event-ttl``, 1 h by default, so older pods rely on it),
else ``snapshots.outcomes.decide`` on the same evidence the leader uses; None: not decided
(pending).

Errors: ``ConfigError`` (kubeconfig), ``NotServed`` (404), ``TransportError`` (anything else:
unreachable, 403, 5xx); the commands turn them into one ``snapready: ...`` line and exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from webhook.base.config import Settings
from webhook.base.errors import ConfigError
from webhook.base.keys import ORIGIN
from webhook.base.text import clip
from webhook.base.types import RawObject, mapping
from webhook.cli.common import add_settings_arguments, fail, print_json, settings_from
from webhook.cluster.caches import SNAPSHOT_API, SNAPSHOT_VERSIONS
from webhook.cluster.records import selected_label_query
from webhook.cluster.syncing import Gone, NotServed, TransportError
from webhook.kube.matching import Policy
from webhook.snapshots.config_refs import ConfigMeta, config_meta, watched_namespaces
from webhook.snapshots.evidence import (
    GKE_EVENT_REASON,
    GkeEvent,
    PodEvents,
    gke_event,
    index_events,
)
from webhook.snapshots.facts import node_pools, node_view
from webhook.snapshots.index import SnapshotIndex
from webhook.snapshots.outcomes import OUTCOMES, Verdict, decide
from webhook.snapshots.pods import PodRecord
from webhook.snapshots.records import GROUP, PLURAL, VERSION, RecordView, join_all, record_view
from webhook.snapshots.state import NodePoolFacts, NodeView, parse_policy
from webhook.snapshots.views import SnapshotView, snapshot_view

if TYPE_CHECKING:  # the kubernetes client is imported only when a command connects
    from webhook.cluster.client import Connection, KubeTransport

FORMAT_VERSION = 1
"""Bumped only on an incompatible change of either command's JSON document."""
READ_ERRORS = (TransportError, NotServed, Gone)
"""What reading the API server may raise (``Gone``: a list's continue token expired)."""


def internal_error(exc: Exception) -> int:
    """The last line of a command: ``snapready: internal error: ...`` and 2, never a traceback."""
    text = str(exc)
    return fail(f"internal error: {type(exc).__name__}" + (f": {clip(text, 200)}" if text else ""))


Reader = Callable[["Connection", Settings], tuple[dict[str, Any], list[str]]]
"""Reads the cluster through the connection and builds a command's report; returns the report
and notes for stderr. May raise ``ConfigError`` (bad input) or ``READ_ERRORS``."""


def run_reader(
    args: argparse.Namespace, read: Reader, render: Callable[[dict[str, Any]], str]
) -> int:
    """What ``status`` and ``explain`` share: settings, connection, read (closing it after),
    output as ``--format`` says, notes on stderr; 0, or 2 with one ``snapready: ...`` line and
    never a traceback."""
    try:
        try:
            settings = settings_from(args)
            connection = open_connection(args, settings)
        except ConfigError as exc:
            return fail(str(exc))
        try:
            report, notes = read(connection, settings)
        except ConfigError as exc:
            return fail(str(exc))
        except READ_ERRORS as exc:
            return fail(read_error(exc, connection))
        finally:
            connection.close()
        if args.format == "json":
            print_json(report)
        else:
            sys.stdout.write(render(report))
        for note in notes:
            sys.stderr.write(f"snapready: note: {note}\n")
        return 0
    except Exception as exc:  # the last line: a message, never a traceback
        return internal_error(exc)


def read_error(exc: Exception, connection: Connection) -> str:
    """One line for a failed read; a connection failure names the server and its root cause
    (urllib3 keeps it as the ``reason`` of the error the transport replaced)."""
    cause = getattr(exc.__context__, "reason", None)
    if isinstance(cause, Exception):
        text = clip(str(cause).rsplit("): ", 1)[-1], 160)
        return f"cannot reach the API server {connection.host} ({connection.where}): {text}"
    return f"cannot read the cluster ({connection.where}): {exc}"


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """``--kubeconfig``, ``--format`` and the settings arguments (``--config``)."""
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        help="kubeconfig (default: $KUBECONFIG, else ~/.kube/config, else in-cluster)",
    )
    parser.add_argument("--format", choices=["text", "json"], default="text", help="output format")
    add_settings_arguments(parser, policies=False)  # the cluster's policies, not files


def open_connection(args: argparse.Namespace, settings: Settings) -> Connection:
    """``--kubeconfig``, else ``source.kubeconfig`` of the settings, else kubectl's defaults.

    Raises:
        ConfigError: the configuration cannot be loaded.
    """
    kubeconfig = args.kubeconfig or settings.source.kubeconfig
    if kubeconfig is not None and not Path(kubeconfig).is_file():
        raise ConfigError(f"kubeconfig {kubeconfig}: no such file")
    from webhook.cluster.client import connect  # noqa: PLC0415 - keep `snapready hash` fast

    return connect(kubeconfig, request_timeout=settings.source.request_timeout_seconds)


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


def _scoped(base: str, resource: str, namespace: str | None) -> str:
    where = f"/namespaces/{quote(namespace, safe='')}" if namespace else ""
    return f"{base}{where}/{resource}"


def list_snapshot_api(
    transport: KubeTransport, resource: str, namespace: str | None, page_size: int
) -> list[RawObject] | None:
    """Every object of a ``podsnapshot.gke.io`` resource (``v1``, else ``v1alpha1``); None when
    neither version is served (the CRDs are not installed)."""
    for version in SNAPSHOT_VERSIONS:
        try:
            items, _ = transport.list(
                _scoped(f"{SNAPSHOT_API}/{version}", resource, namespace), page_size=page_size
            )
        except NotServed:
            continue
        return items
    return None


def read_live(
    transport: KubeTransport, namespace: str | None, settings: Settings, *, pods: bool = True
) -> Live:
    """Policies, snapshots, node pools and (``pods``) stamped pods of ``namespace``.

    Raises:
        TransportError: the API server cannot be reached or refuses a list (nodes excepted:
            without them node checks are skipped and a note says so).
    """
    page = settings.source.list_page_size
    live = Live(namespace)
    raw_policies = list_snapshot_api(transport, "podsnapshotpolicies", namespace, page)
    if raw_policies is None:
        live.notes.append("the podsnapshot.gke.io API is not served: no policies, no snapshots")
    for obj in raw_policies or []:
        try:
            live.policies.append(parse_policy(obj, prefix=settings.prefix, where=_where(obj)))
        except ConfigError as exc:
            live.notes.append(f"skipped an unreadable policy: {exc}")
    origin = settings.annotation(ORIGIN)
    views: list[SnapshotView] = []
    for obj in list_snapshot_api(transport, "podsnapshots", namespace, page) or []:
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
    if pods:
        path = _scoped("/api/v1", "pods", namespace) + "?" + selected_label_query(settings.prefix)
        live.pods, _ = transport.list(path, page_size=page)
    return live


def read_records(
    transport: KubeTransport, namespace: str | None, page_size: int, notes: list[str]
) -> list[RecordView] | None:
    """snapready's SnapshotRecords of ``namespace`` (all namespaces: None), or None with a
    note when they cannot be read (the CRD is not installed, or the user may not list them:
    reading is aggregated to the ``view`` ClusterRole)."""
    try:
        items, _ = transport.list(
            _scoped(f"/apis/{GROUP}/{VERSION}", PLURAL, namespace), page_size=page_size
        )
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
            for kind, plural in (("Secret", "secrets"), ("ConfigMap", "configmaps")):
                items, _ = metadata.list(_scoped("/api/v1", plural, namespace), page_size=page_size)
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


def read_pools(
    transport: KubeTransport,
    page_size: int,
    notes: list[str],
    by_name: dict[str, NodeView] | None = None,
) -> dict[str, NodePoolFacts]:
    """Node pool facts of the live Nodes; ``{}`` (and a note) when they cannot be listed.
    ``by_name``, when given, is filled with each Node's view by name."""
    try:
        nodes, _ = transport.list("/api/v1/nodes", page_size=page_size)
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


def gke_event_query(pod: str | None = None) -> str:
    """``fieldSelector=reason=GKEPodSnapshotting`` (and ``involvedObject.name=<pod>``),
    URL-encoded: only GKE's snapshot Events, never all of them."""
    selector = f"reason={GKE_EVENT_REASON}"
    if pod is not None:
        selector += f",involvedObject.name={pod}"
    return "fieldSelector=" + quote(selector, safe="")


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
    path = _scoped("/api/v1", "events", namespace) + "?" + gke_event_query(pod)
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


def judge(
    record: PodRecord, events: Sequence[GkeEvent], *, now: datetime, settle_seconds: float
) -> tuple[Verdict | None, bool]:
    """The pod's outcome and whether the leader recorded it: the ``<prefix>restore-outcome``
    annotation when it names one of ``OUTCOMES`` (``decide``'s verdict when it agrees, for its
    evidence and times), else ``decide`` (None: not decided yet, pending)."""
    verdict = decide(record, events, now=now, settle_seconds=settle_seconds)
    recorded = record.outcome
    if recorded is None or recorded not in OUTCOMES:
        return verdict, False
    outcome = next(o for o in OUTCOMES if o == recorded)
    if verdict is not None and verdict.outcome == outcome:
        return verdict, True
    at = verdict.at if verdict is not None else None  # the evidence left says otherwise: the
    return Verdict(outcome, "recorded outcome", at), True  # leader saw more (expired events)


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
