"""Origin records: what each PodSnapshot was taken from, written onto it once by the leader.

When a PodSnapshot appears (GKE names its origin pod in ``podsnapshot.gke.io/origin-pod``),
the leader builds an ``OriginRecord``: the origin pod's fingerprint and per-field digests (from
the live pod, read once with a GET; from the pod cache if it is gone), its grouping-label values
under the snapshot's policy, and the facts of the node it ran on (pool, machine family, instance
type, arch, GKE node version, accelerator, GPU driver label). Unknown parts stay null. It is
written as the annotation ``<prefix>origin`` with a JSON merge patch on metadata only (field
manager ``snapready-origin``). Every replica reads the records back from its snapshot cache, so
the admission path never makes an API call. Followers write nothing, and every write is
lease-fenced (``cluster.fence``). Compare-before-write (issue 27): the leader GETs the PodSnapshot
right before writing and leaves a good record alone, so a hand-over (the new leader's cache
behind the old leader's write) never writes a record twice. An ``origin-pod`` value that is not a
pod name is unknown (``kube.snapshots.is_pod_name``): the record says so, written once.

Signed (issue 27, ``kube.signing``): with a keyring, the record goes with
``<prefix>origin-signature``, an HMAC binding it to the PodSnapshot's uid. A record that fails the
check (forged, copied from another snapshot, signed with a removed key) is believed by no
replica, counted (``rejected``), logged, reported with a Warning ``SnapshotOriginRejected`` on the
PodSnapshot, and rewritten from the live origin pod (or the pod cache), once per forged value.
An unsigned record that snapready's own field manager wrote (a version before signing) is
rewritten without the Event. A record signed with an older key is re-signed (a JSON Patch that
tests the value first), so a rotated-out key can be removed once they are all re-signed.

Consumed configuration (issue 25, ``kube.config_refs``): the record also names the Secrets and
ConfigMaps the live origin pod reads, each with its resourceVersion and last change time from a
metadata-only GET (never a value); unknown (null) when the pod is gone or the reads are refused.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Protocol

import orjson

from webhook.base.types import RawObject, mapping
from webhook.cluster.events import Event, EventRecorder, Regarding
from webhook.cluster.fence import NotLeader
from webhook.cluster.syncing import Conflict, NotServed, TransportError, Worker, describe
from webhook.kube.config_refs import ConfigMeta, config_meta, consumed, refs_of
from webhook.kube.gke import (
    ACCELERATOR,
    ARCHITECTURE,
    GPU_DRIVER_VERSION,
    INSTANCE_TYPE,
    MACHINE_FAMILY,
)
from webhook.kube.outcomes import parse_time
from webhook.kube.signing import Keyring, Rejection, sign, verify
from webhook.kube.snapshots import ConfigRef, OriginRecord, SnapshotView, workload_of
from webhook.kube.state import ClusterState
from webhook.pod.distill import fingerprint
from webhook.pod.fields import field_digests
from webhook.pod.restore import group_of

log = logging.getLogger("snapready.origins")
FIELD_MANAGER = "snapready-origin"
SNAPSHOT_API = "podsnapshot.gke.io/v1"


class OriginTransport(Protocol):
    """A GET, a JSON Patch and a JSON merge patch (RFC 6902, 7386) with a field manager."""

    def get(self, path: str) -> RawObject: ...

    def patch(self, path: str, ops: Sequence[RawObject], *, field_manager: str) -> RawObject: ...

    def merge_patch(self, path: str, patch: RawObject, *, field_manager: str) -> RawObject: ...


def node_facts(state: ClusterState, node_name: str | None) -> dict[str, str | None]:
    """The origin node's facts from the node cache; every key None when the node is unknown."""
    view = state.nodes.get(node_name) if node_name else None
    if view is None:
        return {}
    return {
        "pool": view.pool,
        "family": view.label(MACHINE_FAMILY),
        "instanceType": view.label(INSTANCE_TYPE),
        "arch": view.label(ARCHITECTURE),
        "version": view.version,
        "accelerator": view.label(ACCELERATOR),
        "gpuDriver": view.label(GPU_DRIVER_VERSION),
    }


def build_record(
    view: SnapshotView,
    pod: RawObject | None,
    state: ClusterState,
    config: tuple[ConfigRef, ...] | None = None,
) -> OriginRecord:
    """The record of ``view`` from its live origin pod (``None``: gone), the caches and the
    consumed configuration read for it (``config``; None: not known)."""
    policy = next(
        (p for p in state.policies.by_namespace.get(view.namespace, ()) if p.name == view.policy),
        None,
    )
    cached = state.pods.get(f"{view.namespace}/{view.origin_pod}") if view.origin_pod else None
    if pod is not None:
        metadata, spec = mapping(pod.get("metadata")), mapping(pod.get("spec"))
        labels = {k: v for k, v in mapping(metadata.get("labels")).items() if isinstance(v, str)}
        node = spec.get("nodeName")
        spec_hash: str | None = fingerprint(pod)
        fields = field_digests(pod)
        workload = workload_of(metadata)
    elif cached is not None:
        labels, node = dict(cached.labels), cached.node_name
        spec_hash, fields, workload = cached.spec_hash, {}, cached.owner
    else:
        labels, node, spec_hash, fields, workload = {}, None, None, {}, None
    return OriginRecord(
        pod=view.origin_pod,
        spec_hash=spec_hash,
        fields=fields,
        node=node_facts(state, node if isinstance(node, str) else None),
        group=group_of(policy, labels) if policy is not None else {},
        workload=workload,
        config=config if pod is not None else None,
    )


class OriginRecorder(Worker):
    """Writes missing origin records, signed, and repairs forged ones (leader only); wakes on
    cache changes and every minute.

    Args:
        transport: GET pods, patch PodSnapshots (lease-fenced).
        state: the current cluster state (snapshots, pods, nodes, policies).
        snapshot_api: the served PodSnapshot API path (``/apis/podsnapshot.gke.io/v1``), or
            None while not served.
        is_leader: whether this replica may write now.
        prefix: annotation prefix (``<prefix>origin``, ``<prefix>origin-signature``).
        keyring: signs and verifies records (``kube.signing``); None: records are unsigned.
        events: reports a rejected record (Warning ``SnapshotOriginRejected`` on the
            PodSnapshot); None: the log line and the metric only.
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
        is_leader: Callable[[], bool],
        prefix: str,
        lock: threading.Lock,
        on_change: Callable[[], None],
        recheck_seconds: float = 60.0,
        keyring: Keyring | None = None,
        events: EventRecorder | None = None,
        metadata: OriginTransport | None = None,
        mine: Callable[[str], bool] = lambda _namespace: True,
    ) -> None:
        super().__init__("originRecords", lock, on_change)
        self.mine = mine
        self.transport, self.state, self.snapshot_api = transport, state, snapshot_api
        self.is_leader, self.prefix, self.recheck = is_leader, prefix, recheck_seconds
        self.keyring, self.events, self.metadata = keyring, events, metadata
        self.written = 0
        self.rejected: Counter[str] = Counter()
        """Rejected records by ``kube.signing.Rejection`` (``snapready_origin_rejected_total``)."""
        self._handled: dict[tuple[str, str], str] = {}
        """(namespace, name) -> the state last handled (``_token``): each is handled once."""
        self._known: dict[str, OriginRecord] = {}
        """PodSnapshot uid -> the last record every replica believed (a repair restores it)."""
        self._reported: set[tuple[str, str]] = set()
        """(uid, rejected value's digest) already reported: one Event and count each."""
        self._config_refused = False
        self._wake = threading.Event()

    @property
    def key(self) -> str:
        """The record annotation; its signature is ``<key>-signature``."""
        return self.prefix + "origin"

    def notify(self) -> None:
        """Look for new snapshots soon (a cache changed, or leadership was gained)."""
        self._wake.set()

    def stop(self) -> None:
        """Stop, waking the loop."""
        super().stop()
        self._wake.set()

    def run(self) -> None:
        """Record on every wake-up (changes) and every ``recheck`` seconds."""
        self.set_status("idle", synced=True)  # records never gate readiness
        while not self.stopping:
            self._wake.wait(self.recheck)
            self._wake.clear()
            if not self.stopping:
                self.record_missing()

    def _token(self, view: SnapshotView) -> str | None:
        """What there is to do about ``view``, as a token handled once (None: nothing): a
        rejected value (its mark), a missing record, a record of an older key."""
        if view.origin_rejected is not None:
            return "rejected:" + view.origin_mark
        if view.origin is None:
            return "missing"
        if self.keyring is not None and view.origin_key != self.keyring.active:
            return "resign:" + str(view.origin_key)
        return None

    def record_missing(self) -> int:
        """Write a record on every snapshot without a believed one, repair forged or removed
        ones and re-sign those of older keys (leader only); how many were written.

        Each (snapshot, state) is handled once: a forged value, re-applied or kept while its
        repair fails for good (a 4xx such as 422: the annotations are too large), is neither
        retried nor reported again until it changes; a transient failure (5xx, unreachable,
        a lost Lease, 409) is retried on the next pass.
        """
        state, api = self.state(), self.snapshot_api()
        if not self.is_leader() or api is None or not state.snapshots_known:
            return 0
        count = 0
        present: set[str] = set()
        for (namespace, name), view in sorted(state.snapshots.by_name.items()):
            if not self.mine(namespace):
                continue
            present.add(view.uid)
            if view.origin is not None and view.origin_rejected is None and view.uid:
                self._known[view.uid] = view.origin  # what snapready knows, for a repair
            token = self._token(view)
            if token is None:
                self._handled.pop((namespace, name), None)
                continue
            if self._handled.get((namespace, name)) == token:
                continue
            if not self.is_leader():
                break
            self._handled[(namespace, name)] = token
            try:
                count += self._write(api, view, state)
            except (TransportError, NotServed) as exc:
                permanent = _permanent(exc)
                log.warning(
                    "origin record of %s/%s not written%s: %s",
                    namespace,
                    name,
                    " (not retried until it changes)" if permanent else "",
                    describe(exc),
                )
                if not permanent:
                    self._handled.pop((namespace, name), None)  # retried on the next pass
        self._forget(present, state)
        if count:
            self.written += count
            self.set_status(f"{self.written} written")
        return count

    def _forget(self, present: set[str], state: ClusterState) -> None:
        """Drop what is kept about PodSnapshots that are gone (memory stays bounded by them)."""
        for uid in [u for u in self._known if u not in present]:
            del self._known[uid]
        self._reported = {(uid, mark) for uid, mark in self._reported if uid in present}
        for key in [k for k in self._handled if k not in state.snapshots.by_name]:
            del self._handled[key]

    def _write(self, api: str, view: SnapshotView, state: ClusterState) -> int:
        """Write (or re-sign) the record of ``view`` unless the live object has a good one;
        1 when written. Compare-before-write: the live object decides, not the cache."""
        path = f"{api}/namespaces/{view.namespace}/podsnapshots/{view.name}"
        live = mapping(self.transport.get(path).get("metadata"))
        annotations, uid = mapping(live.get("annotations")), str(live.get("uid") or "")
        value, signature = annotations.get(self.key), annotations.get(self.key + "-signature")
        readable = isinstance(value, str) and OriginRecord.from_json(value) is not None
        rejected: Rejection | None = None
        if isinstance(value, str) and self.keyring is not None:
            key_id, rejected = verify(
                self.keyring,
                signature,
                uid=uid,
                namespace=view.namespace,
                name=view.name,
                value=value,
            )
            if rejected is None and not readable:  # signed by a newer version: leave it be
                log.info("origin record of %s/%s is of another version", view.namespace, view.name)
                return 0
            if rejected is None:
                if key_id == self.keyring.active:
                    log.info("origin record of %s/%s already written", view.namespace, view.name)
                    return 0
                return self._resign(path, view, uid, value)
        elif readable:
            log.info("origin record of %s/%s already written", view.namespace, view.name)
            return 0
        known = self._known.get(uid)
        if rejected is None and value is None and known is not None:
            rejected = "removed"  # snapready's record was there and someone deleted it
        mark = view.origin_mark or _digest(value, signature)
        if rejected == "unknown-key":
            # Signed with a key this replica lacks: a rotation half done (another replica
            # holds it) or made up. Not believed here, counted and logged once, never
            # rewritten: two replicas of different keys would otherwise rewrite each other.
            if (uid, mark) not in self._reported:
                self._reported.add((uid, mark))
                self.rejected[rejected] += 1
                log.warning(
                    "origin record of %s/%s is signed with a key this replica does not hold: "
                    "not believed, left as it is",
                    view.namespace,
                    view.name,
                )
            return 0
        if rejected is not None:
            legacy = rejected == "unsigned" and _legacy(live, self.key, str(value))
            self._reject(view, rejected, uid=uid, mark=mark, legacy=legacy)
        record = known if known is not None else self._rebuild(view, live, state)
        text = record.to_json()
        written: dict[str, str | None] = {self.key: text, self.key + "-signature": None}
        if self.keyring is not None:
            written[self.key + "-signature"] = sign(
                self.keyring, uid=uid, namespace=view.namespace, name=view.name, value=text
            )
        # The uid makes the patch fail on a PodSnapshot re-created under the same name.
        patch = {"metadata": {"uid": uid, "annotations": written}}
        self.transport.merge_patch(path, patch, field_manager=FIELD_MANAGER)
        log.info("origin record written on PodSnapshot %s/%s", view.namespace, view.name)
        return 1

    def _rebuild(self, view: SnapshotView, live: RawObject, state: ClusterState) -> OriginRecord:
        """A record from the pod ``origin-pod`` names, if it already existed when the
        PodSnapshot was created (a pod created later, or re-created under that name, is not
        its origin: anyone who may patch PodSnapshots could name one); else from the pod
        cache under the same rule; else a record of an unknown origin."""
        taken = parse_time(str(live.get("creationTimestamp") or ""))
        pod: RawObject | None = None
        if view.origin_pod:
            try:
                pod = self.transport.get(
                    f"/api/v1/namespaces/{view.namespace}/pods/{view.origin_pod}"
                )
            except NotServed:  # 404: the origin pod is gone
                pod = None
        if pod is not None and not _before(
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
        config = self._config(view.namespace, pod, state) if pod is not None else None
        if pod is None:
            cached = (
                state.pods.get(f"{view.namespace}/{view.origin_pod}") if view.origin_pod else None
            )
            if cached is not None and not _before(cached.created, taken):
                return build_record(replace(view, origin_pod=None), None, state)
        return build_record(view, pod, state, config)

    def _resign(self, path: str, view: SnapshotView, uid: str, value: str) -> int:
        """Sign a verified record again with the active key; the JSON Patch tests that the
        record is still the one verified, so a concurrent edit is never signed."""
        assert self.keyring is not None
        pointer = "/metadata/annotations/" + _escape(self.key)
        signature = sign(
            self.keyring, uid=uid, namespace=view.namespace, name=view.name, value=value
        )
        ops = [
            {"op": "test", "path": "/metadata/uid", "value": uid},
            {"op": "test", "path": pointer, "value": value},
            {"op": "add", "path": pointer + "-signature", "value": signature},
        ]
        self.transport.patch(path, ops, field_manager=FIELD_MANAGER)
        log.info(
            "origin record of %s/%s re-signed with key %s",
            view.namespace,
            view.name,
            self.keyring.active,
        )
        return 1

    def _reject(
        self, view: SnapshotView, why: Rejection, *, uid: str, mark: str, legacy: bool
    ) -> None:
        """Count, log and report a record that fails the check, once per (snapshot, value):
        a Warning ``SnapshotOriginRejected``, or for ``legacy`` (unsigned, without the
        ``config`` key every signed record has, written by snapready's field manager: a
        version before signing, or someone claiming its name) a Normal ``SnapshotOriginUnsigned``.
        """
        if (uid, mark) in self._reported:
            return
        self._reported.add((uid, mark))
        self.rejected[why] += 1
        regarding = Regarding(SNAPSHOT_API, "PodSnapshot", view.namespace, view.name)
        if legacy:
            log.info(
                "origin record of %s/%s is unsigned (written before signing?): rewritten",
                view.namespace,
                view.name,
            )
            note = (
                f"the origin record on PodSnapshot {view.name} is unsigned (a snapready "
                "version before signing, or someone claiming its field manager): ignored and "
                "rewritten, signed"
            )
            if self.events is not None:
                self.events.emit(
                    Event(regarding, "Normal", "SnapshotOriginUnsigned", "Verify", note)
                )
            return
        what = "was removed" if why == "removed" else f"is not snapready's ({why})"
        note = (
            f"the origin record on PodSnapshot {view.name} {what}: ignored and rewritten from "
            "what snapready knows; someone who may edit PodSnapshots in this namespace changed it"
        )
        log.warning("origin record of %s/%s rejected (%s)", view.namespace, view.name, why)
        if self.events is not None:
            self.events.emit(Event(regarding, "Warning", "SnapshotOriginRejected", "Verify", note))

    def _config(
        self, namespace: str, pod: RawObject, state: ClusterState
    ) -> tuple[ConfigRef, ...] | None:
        """The consumed Secrets and ConfigMaps of ``pod`` with their metadata now (from the
        metadata watch when it covers the namespace, else one metadata-only GET each); None
        when they cannot be read (no metadata transport, or 403: logged once)."""
        if self.metadata is None:
            return None
        watched = state.configs.get(namespace)
        metas: dict[tuple[str, str], ConfigMeta | None] = {}
        for kind, name in consumed(pod):
            if watched is not None:
                metas[(kind, name)] = watched.get((kind, name))
                continue
            plural = "secrets" if kind == "Secret" else "configmaps"
            try:
                metas[(kind, name)] = config_meta(
                    self.metadata.get(f"/api/v1/namespaces/{namespace}/{plural}/{name}")
                )
            except NotServed:
                metas[(kind, name)] = None
            except TransportError as exc:
                if not self._config_refused:
                    log.warning(
                        "the configuration origin pods read is not recorded (%s): "
                        "stale-config is not judged",
                        describe(exc),
                    )
                    self._config_refused = True
                return None
        return refs_of(pod, metas)


def _escape(key: str) -> str:
    """An annotation key as a JSON Pointer token (RFC 6901: ``~`` -> ``~0``, ``/`` -> ``~1``)."""
    return key.replace("~", "~0").replace("/", "~1")


def _legacy(metadata: RawObject, key: str, value: str) -> bool:
    """An unsigned record written by a snapready before records were signed: without the
    ``config`` key every signed record has, and last written by snapready's own field manager.
    Only spares the Warning (anyone may claim a field manager's name and drop a key): the
    record is rewritten either way."""
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError:
        return False
    return isinstance(doc, dict) and "config" not in doc and _ours(metadata, key)


def _ours(metadata: RawObject, key: str) -> bool:
    """Whether ``managedFields`` says snapready's field manager last wrote annotation ``key``."""
    needle = "f:" + key
    for entry in metadata.get("managedFields") or ():
        if isinstance(entry, dict) and entry.get("manager") == FIELD_MANAGER:
            annotations = mapping(mapping(entry.get("fieldsV1")).get("f:metadata")).get(
                "f:annotations"
            )
            if isinstance(annotations, dict) and needle in annotations:
                return True
    return False


def _digest(value: object, signature: object) -> str:
    """16 hex digits for a (value, signature) pair, like ``SnapshotView.origin_mark``."""
    text = (value if isinstance(value, str) else "") + "\n"
    text += signature if isinstance(signature, str) else ""
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=8).hexdigest()


def _before(created: object, taken: datetime | None) -> bool:
    """Whether a pod created at ``created`` (RFC 3339, whole seconds) existed when the snapshot
    was created (the same second counts: both times are truncated); unknown times are not
    before (the origin is then unknown, never guessed)."""
    moment = parse_time(created) if isinstance(created, str) else None
    return moment is not None and taken is not None and moment <= taken


def _permanent(exc: Exception) -> bool:
    """A refusal that repeats until the object changes (HTTP 4xx but 409 Conflict and 429)."""
    if isinstance(exc, Conflict | NotLeader):
        return False
    text = str(exc)
    return text.startswith("HTTP 4") and not text.startswith("HTTP 429")
