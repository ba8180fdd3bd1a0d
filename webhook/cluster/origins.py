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
right before writing and leaves a readable record alone, so a hand-over (the new leader's cache
behind the old leader's write) never writes a record twice. An ``origin-pod`` value that is not a
pod name is unknown (``kube.snapshots.is_pod_name``): the record says so, written once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

from webhook.base.types import RawObject, mapping
from webhook.cluster.syncing import NotServed, TransportError, Worker, describe
from webhook.kube.gke import (
    ACCELERATOR,
    ARCHITECTURE,
    GPU_DRIVER_VERSION,
    INSTANCE_TYPE,
    MACHINE_FAMILY,
)
from webhook.kube.snapshots import OriginRecord, SnapshotView, workload_of
from webhook.kube.state import ClusterState
from webhook.pod.distill import fingerprint
from webhook.pod.fields import field_digests
from webhook.pod.restore import group_of

log = logging.getLogger("snapready.origins")
FIELD_MANAGER = "snapready-origin"


class OriginTransport(Protocol):
    """A GET and a JSON merge patch (RFC 7386) with a field manager."""

    def get(self, path: str) -> RawObject: ...

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


def build_record(view: SnapshotView, pod: RawObject | None, state: ClusterState) -> OriginRecord:
    """The record of ``view`` from its live origin pod (``None``: gone) and the caches."""
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
    )


class OriginRecorder(Worker):
    """Writes missing origin records (leader only); wakes on cache changes and every minute.

    Args:
        transport: GET pods, merge-patch PodSnapshots.
        state: the current cluster state (snapshots, pods, nodes, policies).
        snapshot_path: the served PodSnapshot collection path prefix
            (``/apis/podsnapshot.gke.io/v1``), or None while not served.
        is_leader: whether this replica may write now.
        prefix: annotation prefix (``<prefix>origin``).
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
    ) -> None:
        super().__init__("originRecords", lock, on_change)
        self.transport, self.state, self.snapshot_api = transport, state, snapshot_api
        self.is_leader, self.prefix, self.recheck = is_leader, prefix, recheck_seconds
        self.written = 0
        self._attempted: set[tuple[str, str]] = set()
        self._wake = threading.Event()

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

    def record_missing(self) -> int:
        """Write a record on every snapshot without one (leader only); how many were written."""
        state, api = self.state(), self.snapshot_api()
        if not self.is_leader() or api is None or not state.snapshots_known:
            return 0
        count = 0
        for (namespace, name), view in sorted(state.snapshots.by_name.items()):
            if view.origin is not None or (namespace, name) in self._attempted:
                continue
            if not self.is_leader():
                break
            self._attempted.add((namespace, name))  # never loop on one object
            try:
                count += self._write(api, view, state)
            except (TransportError, NotServed) as exc:
                log.warning(
                    "origin record of %s/%s not written: %s", namespace, name, describe(exc)
                )
                self._attempted.discard((namespace, name))  # retried on the next pass
        if count:
            self.written += count
            self.set_status(f"{self.written} written")
        return count

    def _write(self, api: str, view: SnapshotView, state: ClusterState) -> int:
        """Write the record of ``view`` unless the live object has one; 1 when written."""
        path = f"{api}/namespaces/{view.namespace}/podsnapshots/{view.name}"
        live = mapping(mapping(self.transport.get(path).get("metadata")).get("annotations"))
        if OriginRecord.from_json(live.get(self.prefix + "origin")) is not None:
            log.info("origin record of %s/%s already written", view.namespace, view.name)
            return 0
        pod: RawObject | None = None
        if view.origin_pod:
            try:
                pod = self.transport.get(
                    f"/api/v1/namespaces/{view.namespace}/pods/{view.origin_pod}"
                )
            except NotServed:  # 404: the origin pod is gone
                pod = None
        record = build_record(view, pod, state)
        patch = {"metadata": {"annotations": {self.prefix + "origin": record.to_json()}}}
        self.transport.merge_patch(path, patch, field_manager=FIELD_MANAGER)
        log.info("origin record written on PodSnapshot %s/%s", view.namespace, view.name)
        return 1
