"""Origin records: what each PodSnapshot was taken from, in a SnapshotRecord the leader writes once.

When a PodSnapshot appears, the leader builds an ``OriginRecord``: the origin pod's fingerprint
and per-field digests (from the live pod, read once with a GET; from the pod cache if it is
gone), its grouping-label values under the snapshot's policy, and the facts of the node it was
taken on. The pod and the node are GKE's word: the PodSnapshot's ``podsnapshot.gke.io/origin-pod``
and ``podsnapshot.gke.io/origin-node`` annotations (only GKE may write a PodSnapshot; the origin
pod's ``spec.nodeName`` only where GKE names no node), with the node's facts from the node
cache (pool, machine family, instance type, arch, GKE node version, accelerator, GPU driver
label) and GKE's ``gke-pod-snapshot-triggered-by`` label. Unknown parts stay null.

The record is written as a ``SnapshotRecord`` (``snapshots.records``): named after the
PodSnapshot, owned by it (garbage-collected with it), created with field manager
``snapready-origin``. It is never written on the PodSnapshot: GKE's ValidatingAdmissionPolicy
refuses that (docs/gke-facts.md#section-10). Every replica reads the records from its cache, so the
admission path never makes an API call. Followers write nothing, and every write is
lease-fenced (``cluster.api.fence``). Compare-before-write: the leader GETs the record right before
creating it and leaves one written for this PodSnapshot's uid alone, so a hand-over never
writes a record twice. A leftover record of an earlier PodSnapshot of the same name (its uid
differs) is deleted (with a uid precondition) and written anew.

Upgrade (records of a snapready before SnapshotRecords): a readable ``<prefix>origin``
annotation on the PodSnapshot, last written by snapready's field manager and naming GKE's origin
pod, is converted once into a SnapshotRecord (``convertedFrom: annotation``), so nothing
recorded before is lost; anything else is rebuilt from the pod. A record that disappears while
its PodSnapshot stays (deleted by hand) is written again from the one this replica believed.

Consumed configuration (``snapshots.config_refs``): the record also names the Secrets and ConfigMaps
the live origin pod reads, each with its resourceVersion and last change time from a
metadata-only GET (never a value); unknown (null) when the pod is gone or the reads are refused.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from webhook.base.keys import ORIGIN, SPEC_HASH
from webhook.base.types import RawObject, mapping
from webhook.cluster.api.syncing import Conflict, NotServed, TransportError, describe
from webhook.cluster.controllers.base import Reconciler
from webhook.cluster.controllers.origins.build import (
    LEGACY_FIELD_MANAGER,
    build_record,
    created_before,
    ours,
    permanent,
)
from webhook.cluster.controllers.origins.consumed import ConsumedConfig
from webhook.pod.emptydirs import blocker_of
from webhook.snapshots.records import (
    GROUP,
    PLURAL,
    VERSION,
    RecordAction,
    record_object,
    record_path,
    record_view,
)
from webhook.snapshots.state import ClusterState
from webhook.snapshots.views import OriginRecord, SnapshotView, parse_time

log = logging.getLogger("snapready.origins")
__all__ = ["LEGACY_FIELD_MANAGER", "OriginRecorder", "OriginTransport"]


class OriginTransport(Protocol):
    """A GET, a create and a DELETE with a uid precondition (lease-fenced in production)."""

    def get(self, path: str) -> RawObject: ...

    def create(self, path: str, body: RawObject) -> RawObject: ...

    def delete(self, path: str, *, uid: str = "") -> RawObject: ...


APPLY = "apply chart/crds/ (kubectl apply --server-side -f chart/crds/)"


class OriginRecorder(Reconciler):
    """Writes a SnapshotRecord for every PodSnapshot without one (leader only); wakes on cache
    changes and every minute.

    Args:
        transport: GET pods and PodSnapshots, create and delete SnapshotRecords (lease-fenced).
        state: the current cluster state (snapshots with their records, pods, nodes, policies).
        snapshot_api: the served PodSnapshot API path (``/apis/podsnapshot.gke.io/v1``), or
            None while not served.
        records_served: whether the SnapshotRecord API (``snapready.io/v1alpha1``) is served.
        is_leader: whether this replica may write now.
        prefix: annotation prefix (``<prefix>origin``: the annotation of older versions).
        metadata: a metadata-only GET (``KubeTransport.metadata_only``) for the Secrets and
            ConfigMaps the origin pod consumed; None: not recorded.
        mine: whether a namespace is this installation's (``outcomes.namespaces``).
    """

    def __init__(
        self,
        transport: OriginTransport,
        *,
        state: Callable[[], ClusterState],
        snapshot_api: Callable[[], str | None],
        records_served: Callable[[], bool],
        is_leader: Callable[[], bool],
        prefix: str,
        lock: threading.Lock,
        on_change: Callable[[], None],
        recheck_seconds: float = 60.0,
        metadata: OriginTransport | None = None,
        mine: Callable[[str], bool] = lambda _namespace: True,
    ) -> None:
        super().__init__("originRecords", lock, on_change, period=recheck_seconds)
        self.mine, self.records_served = mine, records_served
        self.transport, self.state, self.snapshot_api = transport, state, snapshot_api
        self.is_leader, self.prefix, self.recheck = is_leader, prefix, recheck_seconds
        self.consumed = ConsumedConfig(metadata)
        self.actions: Counter[str] = Counter()
        """Records by ``RecordAction`` (``snapready_snapshot_records_total``)."""
        self._handled: dict[tuple[str, str], str] = {}
        """(namespace, name) -> the PodSnapshot uid last handled: each is handled once."""
        self._known: dict[str, OriginRecord] = {}
        """PodSnapshot uid -> the last record every replica believed (a removed one is
        written again from it)."""
        self._unserved_said = False
        self.dropped: tuple[str, ...] = ()
        """``spec`` keys of a record the API server did not keep: its SnapshotRecord CRD is
        older than this snapready (a structural schema prunes unknown fields)."""

    @property
    def written(self) -> int:
        """Records written so far, of every action."""
        return sum(self.actions.values())

    @property
    def key(self) -> str:
        """The annotation older versions wrote on PodSnapshots (read to convert it)."""
        return self.prefix + ORIGIN

    @property
    def stamp(self) -> str:
        """The pod annotation admission stamps the fingerprint in (``<prefix>spec-hash``)."""
        return self.prefix + SPEC_HASH

    def reconcile(self) -> None:
        """Record on every wake-up (a cache changed, leadership gained) and every ``recheck``
        seconds (``record_missing``)."""
        self.record_missing()

    def _writable(self, state: ClusterState) -> str | None:
        """The PodSnapshot API path when this replica may write records now, else None."""
        api = self.snapshot_api()
        if not self.is_leader() or api is None or not state.snapshots_known:
            return None
        if not self.records_served():
            if not self._unserved_said:
                self._unserved_said = True
                log.warning(
                    "the SnapshotRecord API (%s/%s) is not served: origin records are not "
                    "written (install the chart's CRD, chart/crds/)",
                    GROUP,
                    VERSION,
                )
                self.set_status("SnapshotRecord CRD not installed")
            return None
        return api

    def record_missing(self) -> int:
        """Write a record for every snapshot of this installation without one (leader only);
        how many were written.

        Each PodSnapshot (by uid) is handled once: a permanent refusal (a 4xx such as 403 or
        422) is logged and not retried for that PodSnapshot (no storm); a transient one
        (5xx, unreachable, a lost Lease, 409) is retried on the next pass. A snapshot being
        deleted gets no record.
        """
        state = self.state()
        api = self._writable(state)
        if api is None:
            return 0
        count = 0
        present: set[str] = set()
        for (namespace, name), view in sorted(state.snapshots.by_name.items()):
            if not self.mine(namespace):
                continue
            present.add(view.uid)
            if view.origin is not None:
                self._known[view.uid] = view.origin  # what snapready knows, if it is removed
                self._handled.pop((namespace, name), None)
                continue
            if view.deleting_since or self._handled.get((namespace, name)) == view.uid:
                continue
            if not self.is_leader():
                break
            self._handled[(namespace, name)] = view.uid
            try:
                count += self._write(api, view, state)
            except (TransportError, NotServed) as exc:
                refused = permanent(exc)
                log.warning(
                    "origin record of %s/%s not written%s: %s",
                    namespace,
                    name,
                    " (not retried until it changes)" if refused else "",
                    describe(exc),
                )
                if not refused:
                    self._handled.pop((namespace, name), None)  # retried on the next pass
        self._forget(present, state)
        if count:
            stale = f"; CRD older than snapready, drops spec.{', spec.'.join(self.dropped)}: "
            self.set_status(f"{self.written} written" + (stale + APPLY if self.dropped else ""))
        return count

    def _check_kept(self, sent: RawObject, stored: RawObject) -> None:
        """Say once, loudly, when the API server pruned keys of a record it stored: an
        upgrade that skipped ``kubectl apply -f chart/crds/`` (``helm upgrade`` applies no
        CRD) loses what those fields carry, e.g. ``restoreBlocker``, and every prediction
        that needs it is made as if nothing stopped the restore."""
        kept = stored.get("spec") if isinstance(stored, dict) else None
        if not isinstance(kept, dict):
            return  # nothing to compare (the answer holds no object)
        dropped = tuple(sorted(k for k in mapping(sent.get("spec")) if k not in kept))
        if dropped and dropped != self.dropped:
            log.error(
                "the API server dropped spec.%s of a SnapshotRecord: its CRD is older than "
                "this snapready; %s",
                ", spec.".join(dropped),
                APPLY,
            )
        self.dropped = dropped

    def _forget(self, present: set[str], state: ClusterState) -> None:
        """Drop what is kept about PodSnapshots that are gone (memory stays bounded by them)."""
        for uid in [u for u in self._known if u not in present]:
            del self._known[uid]
        for key in [k for k in self._handled if k not in state.snapshots.by_name]:
            del self._handled[key]

    def _write(self, api: str, view: SnapshotView, state: ClusterState) -> int:
        """Create the record of ``view`` unless the live one is already this snapshot's; 1 when
        written. Compare-before-write: the live object decides, not the cache."""
        path = record_path(view.namespace, view.name)
        try:
            live: RawObject | None = self.transport.get(path)
        except NotServed:  # 404: no record yet
            live = None
        if live is not None:
            existing = record_view(live)
            if existing is not None and existing.snapshot_uid == view.uid:
                log.info("origin record of %s/%s already written", view.namespace, view.name)
                return 0
            # A record of an earlier PodSnapshot of this name (the garbage collector has not
            # removed it yet): replaced, never believed for this one.
            stale_uid = str(mapping(live.get("metadata")).get("uid") or "")
            with contextlib.suppress(NotServed):  # 404: the garbage collector was faster
                self.transport.delete(path, uid=stale_uid)
        action: RecordAction = "written"
        known = self._known.get(view.uid)
        if known is not None:
            record, action = known, "restored"
            log.warning(
                "origin record of %s/%s was removed: written again from the one snapready held",
                view.namespace,
                view.name,
            )
        else:
            record, converted = self._build(api, view, state)
            action = "converted" if converted else "written"
        body = record_object(
            record, view, api.removeprefix("/apis/"), converted=action == "converted"
        )
        collection = f"/apis/{GROUP}/{VERSION}/namespaces/{view.namespace}/{PLURAL}"
        try:
            created = self.transport.create(collection, body)
        except Conflict:  # created meanwhile (a predecessor's write): it stands
            log.info("origin record of %s/%s already written", view.namespace, view.name)
            return 0
        self._check_kept(body, created)
        self.actions[action] += 1
        log.info(
            "origin record written for PodSnapshot %s/%s (%s)", view.namespace, view.name, action
        )
        return 1

    def _build(
        self, api: str, view: SnapshotView, state: ClusterState
    ) -> tuple[OriginRecord, bool]:
        """The record of ``view`` and whether it was converted from an older snapready's
        annotation (read from the live PodSnapshot only when the cache saw one). The origin pod
        is read once (a GET) for both.

        An annotation is converted only when snapready's old field manager last wrote it, it
        names GKE's origin pod, and its fingerprint equals the origin pod's stamped
        ``<prefix>spec-hash`` (live, else cached) where that pod is still known: a field
        manager's name can be claimed by anyone who could patch PodSnapshots then, a stamped
        hash cannot (the ownership webhook guards it). With the origin pod gone from both, the
        annotation is all there is, and it is converted (docs/security.md names this).
        """
        pod = self._origin_pod(view)
        if view.legacy:
            path = f"{api}/namespaces/{view.namespace}/podsnapshots/{view.name}"
            metadata = mapping(self.transport.get(path).get("metadata"))
            old = OriginRecord.from_json(mapping(metadata.get("annotations")).get(self.key))
            cached = state.pods.get(f"{view.namespace}/{view.origin_pod}")
            if pod is not None:
                stamped = self._stamp(pod)
            else:
                stamped = cached.spec_hash if cached is not None else None
            if (
                old is not None
                and metadata.get("uid") == view.uid
                and old.pod == view.origin_pod
                and ours(metadata, self.key)
                and (not stamped or stamped == old.spec_hash)
            ):
                # the live origin pod checked out: its blocker is known
                blocker = blocker_of(pod) if pod is not None else None
                converted = replace(
                    old,
                    node_name=view.origin_node or old.node_name,
                    node_from="gke" if view.origin_node else old.node_from,
                    triggered_by=view.triggered_by,
                    blocker=blocker,
                )
                return converted, True
            log.warning(
                "the %s annotation on PodSnapshot %s/%s was not written by snapready for this "
                "snapshot's origin pod: not converted, rebuilt from the pod",
                self.key,
                view.namespace,
                view.name,
            )
        return self._rebuild(view, state, pod), False

    def _origin_pod(self, view: SnapshotView) -> RawObject | None:
        """The live pod GKE names as the origin (one GET), None when none is named or it is
        gone (404)."""
        if not view.origin_pod:
            return None
        try:
            return self.transport.get(f"/api/v1/namespaces/{view.namespace}/pods/{view.origin_pod}")
        except NotServed:
            return None

    def _stamp(self, pod: RawObject) -> str | None:
        """The fingerprint admission stamped on ``pod`` (``<prefix>spec-hash``), or None."""
        value = mapping(mapping(pod.get("metadata")).get("annotations")).get(self.stamp)
        return value if isinstance(value, str) and value else None

    def _rebuild(
        self, view: SnapshotView, state: ClusterState, pod: RawObject | None
    ) -> OriginRecord:
        """A record from the live origin ``pod`` (None: gone), if it already existed when the
        PodSnapshot was created (a pod created later, or re-created under that name, is not
        its origin) and still has the fingerprint admission stamped on it; else from the pod
        cache under the same creation rule; else a record of an unknown origin."""
        taken = parse_time(view.created)
        if pod is not None and not created_before(
            mapping(pod.get("metadata")).get("creationTimestamp"), taken
        ):
            log.warning(
                "origin pod %s of PodSnapshot %s/%s was created after the snapshot: not its "
                "origin, recorded as unknown",
                view.origin_pod,
                view.namespace,
                view.name,
            )
            return build_record(replace(view, origin_pod=None), None, state)
        if pod is None:
            cached = (
                state.pods.get(f"{view.namespace}/{view.origin_pod}") if view.origin_pod else None
            )
            if cached is not None and not created_before(cached.created, taken):
                return build_record(replace(view, origin_pod=None), None, state)
            return build_record(view, None, state)
        record = build_record(view, pod, state, self.consumed.read(view.namespace, pod, state))
        stamped = self._stamp(pod)
        if stamped is not None and record.spec_hash != stamped:
            # Changed in place since admission (an image patch, a dev.gvisor.* annotation):
            # what it looked like at the checkpoint is unknown, never guessed from today's pod.
            log.warning(
                "origin pod %s of PodSnapshot %s/%s changed since admission (its fingerprint "
                "is no longer its stamped %s): fingerprint recorded as unknown",
                view.origin_pod,
                view.namespace,
                view.name,
                self.stamp,
            )
            record = replace(record, spec_hash=None, fields={}, blocker=None)
        return record
