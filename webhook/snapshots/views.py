"""PodSnapshots, their origin records, and the snapshot pods snapready stamped: compact views.

GKE creates a ``PodSnapshot`` (``podsnapshot.gke.io``) per checkpoint: ``spec.policyName``, the
annotations ``podsnapshot.gke.io/origin-pod`` (the pod it was taken from, same namespace) and
``podsnapshot.gke.io/origin-node`` (the node), the label ``gke-pod-snapshot-triggered-by`` (a
manual trigger's name), the condition ``Ready`` and ``status.lastAccessTime``
(docs/gke-facts.md#section-2 and #section-10). Only GKE may write a PodSnapshot, so these are GKE's
word. snapready's ``OriginRecord`` (what the snapshot was taken from: the origin pod's fingerprint
and per-field digests, its node's facts, its grouping labels) lives in a ``SnapshotRecord`` of its
own (``snapshots.records``) and is folded into ``SnapshotView.origin``. Unknown parts are null,
never guessed. Pure module; ``snapshots.index`` indexes the views, ``snapshots.pod_records``
keeps the stamped pods. ``parse_time`` reads the API server's RFC 3339 times (GKE's clock) for
the whole package.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

import orjson

from webhook.base.types import RawObject, mapping, shared
from webhook.kube.gke import ORIGIN_NODE, ORIGIN_POD, TRIGGERED_BY

RECORD_VERSION = 1
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
"""A DNS-1123 subdomain (apimachinery ``IsDNS1123Subdomain``; <= 253 characters): a pod name."""


def is_pod_name(value: str) -> bool:
    """Whether ``value`` can name a pod (DNS-1123 subdomain): never ``..``, ``?``, ``%2F``."""
    return len(value) <= 253 and _SUBDOMAIN.fullmatch(value) is not None


NODE_KEYS = ("pool", "family", "instanceType", "arch", "version", "accelerator", "gpuDriver")
"""The origin node facts a record holds (``status.nodeInfo.kubeletVersion`` and GKE labels)."""


@dataclass(frozen=True, slots=True)
class WorkloadRef:
    """A pod's owning workload: ``kind``, ``name`` and ``uid`` (empty when not known)."""

    kind: str
    name: str
    uid: str = ""

    def text(self) -> str:
        """``Deployment decode`` (for messages)."""
        return f"{self.kind} {self.name}"


POD_TEMPLATE_HASH = "pod-template-hash"
"""Label the Deployment controller puts on a ReplicaSet's pods; the ReplicaSet is named
``<deployment>-<hash>`` (k8s pkg/controller/deployment/sync.go)."""


def workload_of(metadata: Mapping[str, Any]) -> WorkloadRef | None:
    """The top controller of a pod from its own metadata (no lookup): the ``controller: true``
    ownerReference, except that a ReplicaSet whose pods carry ``pod-template-hash`` stands for
    its Deployment (name without the ``-<hash>`` suffix; uid unknown without a ReplicaSet
    lookup, so empty). A Job of a CronJob stays the Job. None for a bare pod."""
    owners = metadata.get("ownerReferences")
    if not isinstance(owners, list):
        return None
    ref = next((o for o in owners if isinstance(o, dict) and o.get("controller") is True), None)
    if ref is None or not isinstance(ref.get("kind"), str) or not isinstance(ref.get("name"), str):
        return None
    kind, name, uid = ref["kind"], ref["name"], str(ref.get("uid") or "")
    labels = metadata.get("labels")
    template_hash = labels.get(POD_TEMPLATE_HASH) if isinstance(labels, dict) else None
    if kind == "ReplicaSet" and isinstance(template_hash, str):
        suffix = f"-{template_hash}"
        if name.endswith(suffix) and len(name) > len(suffix):
            return WorkloadRef("Deployment", name[: -len(suffix)])
    return WorkloadRef(kind, name, uid)


CONFIG_KINDS = ("Secret", "ConfigMap")


@dataclass(frozen=True)
class ConfigRef:
    """A Secret or ConfigMap the origin pod consumed, as it was when the record was written.

    Attributes:
        kind: ``Secret`` or ``ConfigMap``; ``name``: its name (the pod's namespace).
        version: its ``metadata.resourceVersion`` then; None when it did not exist (an
            ``optional: true`` reference).
        changed_at: the newest ``managedFields[].time`` then (RFC 3339), None when unknown:
            a change after the checkpoint but before the record was written still counts.
    """

    kind: str
    name: str
    version: str | None
    changed_at: str | None = None

    def to_json(self) -> dict[str, str | None]:
        """``{"kind", "name", "rv", "at"}``."""
        return {"kind": self.kind, "name": self.name, "rv": self.version, "at": self.changed_at}


@dataclass(frozen=True)
class OriginRecord:
    """What a snapshot was taken from (a ``SnapshotRecord``'s spec; before, the
    ``<prefix>origin`` annotation on the PodSnapshot, still read to convert it).

    Attributes:
        pod: origin pod name; None when GKE named none.
        spec_hash: the origin pod's ``v1:sha256:...`` fingerprint; None when unknown.
        fields: field path -> short digest of the origin pod's distilled fields (``pod.fields``).
        node: ``NODE_KEYS`` -> value (None: unknown) of the node the origin pod ran on.
        group: the origin pod's values of its policy's grouping labels (missing label: absent).
        workload: the origin pod's owning workload (``workload_of``: a ReplicaSet's Deployment,
            a Sandbox...), None for a bare pod or an older record.
        config: the Secrets and ConfigMaps the origin pod consumed (``snapshots.config_refs``),
            sorted; None when not recorded (the origin pod was gone, or an older record).
            Never their values: a name, a resourceVersion and a time each.
        node_name: the node it was taken on; ``node_from``: where that came from (``gke``:
            GKE's ``origin-node`` annotation; ``pod``: the origin pod's ``spec.nodeName``);
            None when unknown.
        triggered_by: the PodSnapshotManualTrigger that made it (GKE's label), if any.
        blocker: why gVisor cannot restore any pod from it (``pod.emptydirs.restore_blocker``
            of the origin pod: its run-to-completion init container mounted an emptyDir
            first), or None (no such mount, or not known: the origin pod was gone, or an
            older record).
    """

    pod: str | None
    spec_hash: str | None
    fields: Mapping[str, str] = field(default_factory=dict)
    node: Mapping[str, str | None] = field(default_factory=dict)
    group: Mapping[str, str] = field(default_factory=dict)
    workload: WorkloadRef | None = None
    config: tuple[ConfigRef, ...] | None = None
    node_name: str | None = None
    node_from: str | None = None
    triggered_by: str | None = None
    blocker: str | None = None

    def to_json(self) -> str:
        """Compact JSON with sorted keys (the annotation value; ~1-3 KiB)."""
        document: dict[str, Any] = {
            "v": RECORD_VERSION,
            "pod": self.pod,
            "specHash": self.spec_hash,
            "fields": dict(self.fields),
            "node": {key: self.node.get(key) for key in NODE_KEYS},
            "group": dict(self.group),
            "workload": None
            if self.workload is None
            else {"kind": self.workload.kind, "name": self.workload.name, "uid": self.workload.uid},
        }
        # Always present (null: unknown), as the annotation of the last version that wrote it.
        document["config"] = None if self.config is None else [ref.to_json() for ref in self.config]
        return orjson.dumps(document, option=orjson.OPT_SORT_KEYS).decode()

    @classmethod
    def from_json(cls, text: Any) -> OriginRecord | None:
        """Parse a ``<prefix>origin`` annotation value (written by a snapready before
        SnapshotRecords; converted once); None when it is not a record this version can read."""
        try:
            doc = orjson.loads(text) if isinstance(text, str) else None
        except orjson.JSONDecodeError:
            return None
        if not isinstance(doc, dict) or doc.get("v") != RECORD_VERSION:
            return None
        fields, node, group = doc.get("fields"), doc.get("node"), doc.get("group")
        if not (isinstance(fields, dict) and isinstance(node, dict) and isinstance(group, dict)):
            return None
        return cls(
            pod=_str(doc.get("pod")),
            spec_hash=_str(doc.get("specHash")),
            fields={str(k): str(v) for k, v in fields.items() if isinstance(v, str)},
            node={key: _str(node.get(key)) for key in NODE_KEYS},
            group={str(k): str(v) for k, v in group.items() if isinstance(v, str)},
            workload=_workload(doc.get("workload")),
            config=config_refs(doc.get("config")),
        )


def config_refs(value: Any) -> tuple[ConfigRef, ...] | None:
    """A record's ``config`` list (absent: None); entries of another shape are skipped."""
    if not isinstance(value, list):
        return None
    refs = []
    for entry in value:
        if not isinstance(entry, dict):
            continue
        kind, name = entry.get("kind"), _str(entry.get("name"))
        if kind in CONFIG_KINDS and name is not None:
            refs.append(ConfigRef(kind, name, _str(entry.get("rv")), _str(entry.get("at"))))
    return tuple(refs)


def _workload(value: Any) -> WorkloadRef | None:
    """A record's ``workload`` (absent in records written before it existed: None)."""
    if not isinstance(value, dict):
        return None
    kind, name = _str(value.get("kind")), _str(value.get("name"))
    if kind is None or name is None:
        return None
    return WorkloadRef(kind, name, _str(value.get("uid")) or "")


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class SnapshotView:
    """The part of one PodSnapshot the caches keep.

    Attributes:
        namespace, name: identity; ``policy``: ``spec.policyName``.
        origin_pod: the pod named by ``podsnapshot.gke.io/origin-pod``; None if absent or not
            a valid pod name (``is_pod_name``), so the origin is recorded as unknown, once.
        ready: condition ``Ready`` is ``True``; ``reason``: its reason (or another condition's).
        created: ``metadata.creationTimestamp`` (RFC 3339 text, sorts by time).
        last_access: ``status.lastAccessTime`` or None.
        origin: its ``SnapshotRecord``'s record (``snapshots.records.joined``), None while
            there is none for this PodSnapshot's uid.
        checkpoint: the checkpoint's state from the ``Checkpoint`` condition (``CHECKPOINT``
            table in ``snapshot_view``): ``awaiting``, ``succeeded``, ``failed`` or ``""``
            (no such condition: an older GKE, or not reported yet).
        checkpoint_message: GKE's message of that condition (``runsc error: exit status 128``).
        checkpoint_at: its ``lastTransitionTime`` (RFC 3339) or None.
        deleting_since: ``metadata.deletionTimestamp`` (the snapshot is ``Deleting``), or None.
        uid: ``metadata.uid`` (a record is believed for this uid only; the precondition of a
            prune's DELETE; empty when unknown).
        origin_node: the node GKE names in ``podsnapshot.gke.io/origin-node``, or None.
        triggered_by: GKE's label ``gke-pod-snapshot-triggered-by`` (a manual trigger), or None.
        legacy: it carries a ``<prefix>origin`` annotation, maybe written by an older
            snapready (the leader reads it and converts it to a SnapshotRecord once, when it
            is readable and checks out).
    """

    namespace: str
    name: str
    policy: str
    origin_pod: str | None
    ready: bool
    reason: str
    created: str
    last_access: str | None = None
    origin: OriginRecord | None = None
    checkpoint: str = ""
    checkpoint_message: str = ""
    checkpoint_at: str | None = None
    deleting_since: str | None = None
    uid: str = ""
    origin_node: str | None = None
    triggered_by: str | None = None
    legacy: bool = False

    @cached_property
    def use_key(self) -> UseKey | None:
        """``(namespace, policy, group, fingerprint)`` from its origin record (``UseKey``);
        None when the fingerprint is unknown.
        Computed once per view (views are replaced, never edited): the leader's lifecycle pass
        reads it three times per snapshot per pass (5,000 snapshots at ``make bench-scale``)."""
        origin, group = self.origin, self.group
        if origin is None or group is None or origin.spec_hash is None:
            return None
        return (self.namespace, self.policy, group, origin.spec_hash)

    @cached_property
    def group(self) -> Group | None:
        """Its origin record's group as ``group_key`` (None without a record); once per view."""
        return group_key(self.origin.group) if self.origin is not None else None

    @cached_property
    def last_used(self) -> datetime | None:
        """GKE's ``status.lastAccessTime`` or the creation, whichever is newer (GKE's clock);
        None when neither reads as a time. Computed once per view, as ``use_key``."""
        times = [t for t in (parse_time(self.last_access), parse_time(self.created)) if t]
        return max(times) if times else None

    @cached_property
    def last_used_text(self) -> str:
        """``last_used`` as RFC 3339 UTC seconds (``2026-12-01T10:00:00Z``; "" when unknown),
        for prune notes: written once per view, not once per pass."""
        used = self.last_used
        return used.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if used is not None else ""


Group = tuple[tuple[str, str], ...]
UseKey = tuple[str, str, Group, str]
"""``(namespace, policy, group, fingerprint)``: what a pod or template could restore from
(``snapshots.usage``, ``snapshots.prune``)."""


def group_key(group: Mapping[str, str]) -> Group:
    """A group's values (``OriginRecord.group``) as a sorted, hashable tuple."""
    return tuple(sorted(group.items()))


def parse_time(text: str | None) -> datetime | None:
    """An RFC 3339 timestamp as the API server writes it (``2026-12-01T10:00:00Z``), or None."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


CHECKPOINT_AWAITING = "AwaitingCheckpoint"
"""Reason of ``Checkpoint`` and ``Ready`` while the memory image uploads
(docs/gke-facts.md#section-9)."""


def checkpoint_state(conditions: Any) -> tuple[str, str, str | None]:
    """``(state, message, lastTransitionTime)`` of a PodSnapshot's ``Checkpoint`` condition.

    GKE's sequence (docs/gke-facts.md#section-9): ``Checkpoint`` reason ``AwaitingCheckpoint`` while
    the image uploads (-> ``awaiting``), then True ``Succeeded`` (-> ``succeeded``) or False
    ``Failed`` (-> ``failed``, message e.g. ``runsc error: exit status 128``). Without a
    ``Checkpoint`` condition a ``Ready`` reason ``AwaitingCheckpoint`` still means ``awaiting``.
    Anything else: ``""`` (unknown).
    """
    entries = [c for c in conditions if isinstance(c, dict)] if isinstance(conditions, list) else []
    for entry in entries:
        if entry.get("type") != "Checkpoint":
            continue
        reason, status = str(entry.get("reason") or ""), entry.get("status")
        message = str(entry.get("message") or "")[:512]
        at = _str(entry.get("lastTransitionTime"))
        if reason == CHECKPOINT_AWAITING:
            return "awaiting", message, at
        if status == "True":
            return "succeeded", message, at
        if status == "False" and reason == "Failed":
            return "failed", message, at
        return "", message, at
    for entry in entries:
        if entry.get("type") == "Ready" and entry.get("reason") == CHECKPOINT_AWAITING:
            return "awaiting", str(entry.get("message") or "")[:512], None
    return "", "", None


def snapshot_view(obj: RawObject, *, origin_annotation: str) -> SnapshotView | None:
    """Compact view of a PodSnapshot; None without namespace, name or ``spec.policyName``.

    ``origin`` stays None: records live in SnapshotRecords (``snapshots.records``).
    ``legacy`` says whether an ``<origin_annotation>`` (an older snapready's) is there to
    convert; its value is neither parsed nor kept here (the leader reads it when it converts).
    """
    metadata, spec = mapping(obj.get("metadata")), mapping(obj.get("spec"))
    status = mapping(obj.get("status"))
    namespace, name = _str(metadata.get("namespace")), _str(metadata.get("name"))
    policy = _str(spec.get("policyName"))
    if namespace is None or name is None or policy is None:
        return None
    annotations = mapping(metadata.get("annotations"))
    origin_pod = _str(annotations.get(ORIGIN_POD))
    if origin_pod is not None and "/" in origin_pod:  # "namespace/name": only our namespace
        where, _, pod_name = origin_pod.rpartition("/")
        origin_pod = pod_name or None if where == namespace else None
    if origin_pod is not None and not is_pod_name(origin_pod):
        # It goes into a request path: anything else is unknown (docs/security.md).
        origin_pod = None
    origin_node = _str(annotations.get(ORIGIN_NODE))
    if origin_node is not None and not is_pod_name(origin_node):
        origin_node = None  # node names are DNS-1123 subdomains too
    ready, reason = _ready(status.get("conditions"))
    checkpoint, checkpoint_message, checkpoint_at = checkpoint_state(status.get("conditions"))
    return SnapshotView(  # strings snapshots repeat are kept once (``shared``)
        namespace=shared(namespace),
        name=name,
        policy=shared(policy),
        origin_pod=shared(origin_pod),
        ready=ready,
        reason=shared(reason),
        created=_str(metadata.get("creationTimestamp")) or "",
        last_access=_str(status.get("lastAccessTime")),
        checkpoint=checkpoint,
        checkpoint_message=shared(checkpoint_message),
        checkpoint_at=checkpoint_at,
        deleting_since=_str(metadata.get("deletionTimestamp")),
        uid=_str(metadata.get("uid")) or "",
        origin_node=shared(origin_node),
        triggered_by=shared(_str(mapping(metadata.get("labels")).get(TRIGGERED_BY))),
        # Presence only: the leader reads and checks the value when it converts (once).
        legacy=bool(annotations.get(origin_annotation)),
    )


def _ready(conditions: Any) -> tuple[bool, str]:
    for condition in conditions if isinstance(conditions, list) else []:
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return condition.get("status") == "True", str(condition.get("reason") or "")
    return False, ""
