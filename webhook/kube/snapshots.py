"""PodSnapshots, their origin records, and the snapshot pods snapready stamped: compact views.

GKE creates a ``PodSnapshot`` (``podsnapshot.gke.io``) per checkpoint: ``spec.policyName``, the
annotations ``podsnapshot.gke.io/origin-pod`` (the pod it was taken from, same namespace) and
``podsnapshot.gke.io/origin-node`` (the node), the label ``gke-pod-snapshot-triggered-by`` (a
manual trigger's name), the condition ``Ready`` and ``status.lastAccessTime`` (domain.md
sections 2 and 10). Only GKE may write a PodSnapshot, so these are GKE's word. snapready's
``OriginRecord`` (what the snapshot was taken from: the origin pod's fingerprint and per-field
digests, its node's facts, its grouping labels) lives in a ``SnapshotRecord`` of its own
(``kube.snapshot_records``) and is folded into ``SnapshotView.origin``. Unknown parts are null,
never guessed. ``SnapshotIndex`` answers "which ready snapshots could this pod restore from"
from memory. Pure module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from webhook.base.types import RawObject, mapping
from webhook.kube.gke import ORIGIN_NODE, ORIGIN_POD, TRIGGERED_BY

RECORD_VERSION = 1
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
"""A DNS-1123 subdomain (apimachinery ``IsDNS1123Subdomain``; <= 253 characters): a pod name."""


def is_pod_name(value: str) -> bool:
    """Whether ``value`` can name a pod (DNS-1123 subdomain): never ``..``, ``?``, ``%2F``."""
    return len(value) <= 253 and _SUBDOMAIN.fullmatch(value) is not None


NODE_KEYS = ("pool", "family", "instanceType", "arch", "version", "accelerator", "gpuDriver")
"""The origin node facts a record holds (``status.nodeInfo.kubeletVersion`` and GKE labels)."""


@dataclass(frozen=True)
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
        config: the Secrets and ConfigMaps the origin pod consumed (``kube.config_refs``),
            sorted; None when not recorded (the origin pod was gone, or an older record).
            Never their values: a name, a resourceVersion and a time each.
        node_name: the node it was taken on; ``node_from``: where that came from (``gke``:
            GKE's ``origin-node`` annotation; ``pod``: the origin pod's ``spec.nodeName``);
            None when unknown.
        triggered_by: the PodSnapshotManualTrigger that made it (GKE's label), if any.
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
        origin: its ``SnapshotRecord``'s record (``kube.snapshot_records.joined``), None while
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


CHECKPOINT_AWAITING = "AwaitingCheckpoint"
"""Reason of ``Checkpoint`` and ``Ready`` while the memory image uploads (domain.md section 9)."""


def checkpoint_state(conditions: Any) -> tuple[str, str, str | None]:
    """``(state, message, lastTransitionTime)`` of a PodSnapshot's ``Checkpoint`` condition.

    GKE's sequence (domain.md section 9): ``Checkpoint`` reason ``AwaitingCheckpoint`` while the
    image uploads (-> ``awaiting``), then True ``Succeeded`` (-> ``succeeded``) or False
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

    ``origin`` stays None: records live in SnapshotRecords (``kube.snapshot_records``).
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
        origin_pod = None  # it goes into a request path: anything else is unknown (issue 27)
    origin_node = _str(annotations.get(ORIGIN_NODE))
    if origin_node is not None and not is_pod_name(origin_node):
        origin_node = None  # node names are DNS-1123 subdomains too
    ready, reason = _ready(status.get("conditions"))
    checkpoint, checkpoint_message, checkpoint_at = checkpoint_state(status.get("conditions"))
    return SnapshotView(
        namespace=namespace,
        name=name,
        policy=policy,
        origin_pod=origin_pod,
        ready=ready,
        reason=reason,
        created=_str(metadata.get("creationTimestamp")) or "",
        last_access=_str(status.get("lastAccessTime")),
        checkpoint=checkpoint,
        checkpoint_message=checkpoint_message,
        checkpoint_at=checkpoint_at,
        deleting_since=_str(metadata.get("deletionTimestamp")),
        uid=_str(metadata.get("uid")) or "",
        origin_node=origin_node,
        triggered_by=_str(mapping(metadata.get("labels")).get(TRIGGERED_BY)),
        # Presence only: the leader reads and checks the value when it converts (once).
        legacy=bool(annotations.get(origin_annotation)),
    )


def _ready(conditions: Any) -> tuple[bool, str]:
    for condition in conditions if isinstance(conditions, list) else []:
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return condition.get("status") == "True", str(condition.get("reason") or "")
    return False, ""


def _newest_first(view: SnapshotView) -> tuple[str, str]:
    """Sort key (with ``reverse=True``): newest ``created`` first, then by name."""
    return (view.created, view.name)


GroupKey = tuple[tuple[str, str], ...]
"""A snapshot group as a dict key: the grouping labels' values, sorted by label key."""
OriginKey = tuple[object, ...]
"""What a prediction compares of a record: its fingerprint, whether it has field digests, and
its node facts. Snapshots of one template on one node pool share it."""


def origin_key(origin: OriginRecord) -> OriginKey:
    """``origin``'s ``OriginKey``."""
    return (origin.spec_hash, bool(origin.fields), *sorted(origin.node.items()))


def distinct_origins(views: Iterable[SnapshotView]) -> tuple[tuple[OriginKey, SnapshotView], ...]:
    """The first (newest, given newest first) view of each distinct ``OriginKey`` among the
    ``views`` whose record knows the origin's fingerprint; the order is kept."""
    seen: dict[OriginKey, SnapshotView] = {}
    for view in views:
        origin = view.origin
        if origin is not None and origin.spec_hash:
            seen.setdefault(origin_key(origin), view)
    return tuple(seen.items())


def group_key(group: Mapping[str, str]) -> GroupKey:
    """``group`` (label key -> value) as a ``GroupKey``."""
    return tuple(sorted(group.items()))


@dataclass(frozen=True)
class ReadyGroups:
    """The Ready snapshots of one policy in one namespace, by recorded snapshot group.

    What a prediction reads, indexed when the cache changes so that admission looks at the
    pod's own group only (issue 35: nothing on the request path iterates the namespace's
    snapshots).

    Attributes:
        by_group: group -> its Ready snapshots with a record, newest first.
        unrecorded: Ready snapshots without a record (group unknown: every pod's candidate),
            newest first.
        ready: how many snapshots are Ready (recorded or not).
        origins: group -> ``distinct_origins`` of its snapshots (what a prediction compares:
            21 snapshots of one template on one pool are one comparison).
        comparable: group -> how many of its snapshots know their origin's fingerprint.
    """

    by_group: Mapping[GroupKey, tuple[SnapshotView, ...]] = field(default_factory=dict)
    unrecorded: tuple[SnapshotView, ...] = ()
    ready: int = 0
    origins: Mapping[GroupKey, tuple[tuple[OriginKey, SnapshotView], ...]] = field(
        default_factory=dict
    )
    comparable: Mapping[GroupKey, int] = field(default_factory=dict)

    @classmethod
    def of(cls, views: Iterable[SnapshotView]) -> ReadyGroups:
        """Group the Ready ones of ``views`` (given newest first; the order is kept)."""
        by_group: dict[GroupKey, list[SnapshotView]] = {}
        unrecorded: list[SnapshotView] = []
        ready = 0
        for view in views:
            if not view.ready:
                continue
            ready += 1
            if view.origin is None:
                unrecorded.append(view)
            else:
                by_group.setdefault(group_key(view.origin.group), []).append(view)
        return cls(
            {k: tuple(v) for k, v in by_group.items()},
            tuple(unrecorded),
            ready,
            {k: distinct_origins(v) for k, v in by_group.items()},
            {k: sum(1 for x in v if x.origin is not None and x.origin.spec_hash)
             for k, v in by_group.items()},
        )  # fmt: skip

    def candidates(self, group: Mapping[str, str]) -> list[SnapshotView]:
        """The Ready snapshots of ``group`` plus the unrecorded ones, newest first."""
        found = self.by_group.get(group_key(group), ())
        if not self.unrecorded:
            return list(found)
        return sorted((*found, *self.unrecorded), key=_newest_first, reverse=True)


NO_READY = ReadyGroups()


@dataclass
class SnapshotIndex:
    """Snapshots by namespace and policy, newest first; by namespace and name; and the Ready
    ones of each policy by snapshot group (``ReadyGroups``, what admission reads)."""

    by_policy: dict[tuple[str, str], tuple[SnapshotView, ...]] = field(default_factory=dict)
    by_name: dict[tuple[str, str], SnapshotView] = field(default_factory=dict)
    ready: dict[tuple[str, str], ReadyGroups] = field(default_factory=dict)

    @classmethod
    def build(cls, views: Iterable[SnapshotView]) -> SnapshotIndex:
        """Index ``views`` (newest ``created`` first, then by name for a stable order)."""
        grouped: dict[tuple[str, str], list[SnapshotView]] = {}
        by_name: dict[tuple[str, str], SnapshotView] = {}
        for view in views:
            grouped.setdefault((view.namespace, view.policy), []).append(view)
            by_name[(view.namespace, view.name)] = view
        ordered = {
            key: tuple(sorted(items, key=_newest_first, reverse=True))
            for key, items in grouped.items()
        }
        ready = {key: ReadyGroups.of(items) for key, items in ordered.items()}
        return cls(ordered, by_name, {k: v for k, v in ready.items() if v.ready})

    def updated(self, old: SnapshotView | None, new: SnapshotView | None) -> SnapshotIndex:
        """A new index with ``old`` replaced by ``new`` (None: absent), equal to ``build`` of
        the changed views; only the affected policies' snapshots are sorted and grouped
        again, and this index is left as it is (readers of the current cluster state may
        hold it)."""
        by_policy, by_name = dict(self.by_policy), dict(self.by_name)
        touched: set[tuple[str, str]] = set()
        if old is not None:
            by_name.pop((old.namespace, old.name), None)
            key = (old.namespace, old.policy)
            touched.add(key)
            rest = tuple(v for v in by_policy.get(key, ()) if v.name != old.name)
            if rest:
                by_policy[key] = rest
            else:
                by_policy.pop(key, None)
        if new is not None:
            by_name[(new.namespace, new.name)] = new
            key = (new.namespace, new.policy)
            touched.add(key)
            group = [v for v in by_policy.get(key, ()) if v.name != new.name]
            group.append(new)
            by_policy[key] = tuple(sorted(group, key=_newest_first, reverse=True))
        ready = dict(self.ready)
        for key in touched:
            groups = ReadyGroups.of(by_policy.get(key, ()))
            if groups.ready:
                ready[key] = groups
            else:
                ready.pop(key, None)
        return SnapshotIndex(by_policy, by_name, ready)

    def of_policy(self, namespace: str, policy: str) -> tuple[SnapshotView, ...]:
        """Every snapshot of ``policy`` in ``namespace``, newest first."""
        return self.by_policy.get((namespace, policy), ())

    def ready_of(self, namespace: str, policy: str) -> ReadyGroups:
        """The Ready snapshots of ``policy`` in ``namespace`` by group (``NO_READY``: none)."""
        return self.ready.get((namespace, policy), NO_READY)

    def named(self, namespace: str, name: str) -> SnapshotView | None:
        """The snapshot ``namespace/name``, if known."""
        return self.by_name.get((namespace, name))

    def __len__(self) -> int:
        return len(self.by_name)


@dataclass(frozen=True)
class PodRecord:
    """The part of a stamped pod (label ``<prefix>selected``) the caches keep.

    Attributes:
        namespace, name, uid: identity; ``labels``: all its labels (grouping values).
        spec_hash: its ``<prefix>spec-hash`` annotation; ``fields``: its field digests.
        node_name: ``spec.nodeName`` once scheduled.
        prediction, predicted_snapshot: the ``<prefix>restore-*`` annotations written at
            admission.
        created: ``metadata.creationTimestamp``; ``ready_at``: when condition Ready turned True.
        restored: condition ``PodRestored`` is True; ``restored_message``: its message.
        policy: the ``<prefix>policy`` annotation.
        scheduled_at: when ``PodScheduled`` turned True (GKE's clock for start-up time).
        restored_at: when ``PodRestored`` turned True.
        restore_failure: ``kube.evidence.restore_failure`` of its container statuses.
        outcome: the ``<prefix>restore-outcome`` annotation the leader writes once it decided.
        gated: the pod carries the ``<prefix>restore-settled`` readiness gate.
        settled: that condition's status (``True``/``False``), None while unset.
    """

    namespace: str
    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    spec_hash: str | None = None
    fields: Mapping[str, str] = field(default_factory=dict)
    node_name: str | None = None
    prediction: str | None = None
    predicted_snapshot: str | None = None
    created: str = ""
    ready_at: str | None = None
    restored: bool = False
    restored_message: str = ""
    policy: str | None = None
    scheduled_at: str | None = None
    restored_at: str | None = None
    restore_failure: str | None = None
    outcome: str | None = None
    gated: bool = False
    settled: str | None = None
    phase: str = ""
    """``status.phase`` (``Pending``, ``Running``, ...; empty when not reported yet)."""
    owner: WorkloadRef | None = None
    """The pod's top controller (``workload_of``): its Deployment, StatefulSet, Sandbox..."""


def condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    """The ``status.conditions`` entry of ``type`` ``kind``, or None."""
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    for entry in conditions if isinstance(conditions, list) else []:
        if isinstance(entry, dict) and entry.get("type") == kind:
            return entry
    return None
