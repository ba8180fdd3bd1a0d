"""Decisions remembered for the replicas of one pod template: the second pod costs a lookup.

A ReplicaSet (a Deployment's) or a Job that is not Indexed creates its pods from one template, and
the API server sends each of them to ``/mutate`` and ``/validate`` with the same spec, labels and
annotations: the replicas differ only in their identity (``IDENTITY_FIELDS``: name, uid, creation
time, managedFields) and in the name of the service-account token volume the API server adds to
each (``kube-api-access-`` and five random characters: ``ServiceAccountVolumeName`` and
``names.SimpleNameGenerator`` in kubernetes/kubernetes plugin/pkg/admission/serviceaccount;
``kube.token_volume.is_service_account_volume`` tells it, as the fingerprint leaves it out).
Scaling an inference Deployment out is exactly the moment Pod snapshots exist for
(docs/gke-facts.md#section-1), and the one where the webhook sees the most pods per second.
Nothing the Pod handler decides on CREATE reads those identity fields (the rules and mutators
read the spec, the labels, the annotations and the namespace:
``tests/admission/test_replicas.py`` admits renamed copies of every shared review and scans the
package), nor the parts of ``ClusterState`` listed in ``NOT_READ`` (the stamped pods, GKE's
Events, the ``/readyz`` details: the state is rebuilt each time a stamped pod appears, which
would otherwise forget every entry). So a decision is a pure function of:

* the endpoint, the request namespace and the pod without its identity fields (the key: the
  exact JSON bytes orjson writes for them, so equal keys mean equal inputs; no hash to collide),
  the token volume's name replaced by one placeholder wherever it appears: two pods with equal
  keys are the same pod up to that name; a patch naming it (the helpers' init container mounts
  the token) gets each replica's own name back, and a decision naming it anywhere else is not
  remembered;
* every other ``ClusterState`` field, compared by identity (the caches swap a field's object
  when, and only when, it changes: ``webhook.cluster.api.caches``), and the engine's settings,
  rule table and ``offline`` flag.

A StatefulSet's pods (a LeaderWorkerSet's too), an Indexed Job's and a Kubeflow training
job's are not replicas in this sense: each carries a label of its own (``UNIQUE_LABELS``); nor
are a DaemonSet's, each pinned to its node. They are neither looked up nor remembered; the
fingerprint memo (``webhook.pod.memo``) still serves each pod's ``/validate``.

When a state part or an engine part is another object than the entries were made on, every
entry is forgotten; entries are bounded (``SIZE`` and ``MAX_BYTES``, least recently used out
first). What it saves (``make
bench-admit``, "a later replica"): the distilled spec, the fingerprint, the prediction and the
rule table, about 90% of a selected pod's admission (docs/performance.md).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import fields, replace
from operator import attrgetter
from typing import Any, Final, NamedTuple

import orjson

from webhook.base.types import Endpoint, RawObject
from webhook.kube.responses import Decision
from webhook.kube.token_volume import is_service_account_volume
from webhook.snapshots.state import ClusterState

SIZE: Final = 256
"""Decisions remembered (one per endpoint and template in flight: ~5 KiB of key each for review
03's pod): many templates scaling out at once, each twice."""

MAX_BYTES: Final = 8 * 1024 * 1024
"""Bytes of keys (and templated patches) remembered at most: 256 ordinary pods fit 6 times over;
a tenant's 1 MB pods cannot push the webhook past its memory limit (a 512 KiB entry is the
largest remembered)."""

IDENTITY_FIELDS: Final = frozenset(
    {"name", "generateName", "uid", "creationTimestamp", "managedFields", "resourceVersion"}
)
"""Pod metadata that differs between the replicas of one template and that no rule or mutator
reads; everything else of ``metadata`` is part of the key."""

NOT_READ: Final = frozenset({"pods", "gke_events", "details"})
"""``ClusterState`` fields the Pod handler never reads on CREATE (``test_replicas`` runs every
shared review against a state whose fields here raise on any use)."""

UNIQUE_LABELS: Final = (
    "statefulset.kubernetes.io/pod-name",
    "batch.kubernetes.io/job-completion-index",
    "training.kubeflow.org/replica-index",
)
"""Labels whose value a controller makes unique to each pod it runs at a time (with the labels it
sets beside them, which the key holds too): a StatefulSet's
pod name (``StatefulSetPodNameLabel``, k8s.io/api apps/v1; a LeaderWorkerSet's leader and
worker pods are StatefulSet pods too), an Indexed Job's completion index
(the key of ``JobCompletionIndexAnnotation``, k8s.io/api batch/v1, which the Job controller
also sets as a label since Kubernetes 1.28: feature gate PodIndexLabel, on by default) and a
Kubeflow training job's replica index (``ReplicaIndexLabel``, kubeflow/common
pkg/apis/common/v1: PyTorchJob, TFJob, MPIJob... pods of the training operator).
Their pods differ in the key by that label, so no later pod can find their entry (only a
replacement for the same ordinal or index, on an unchanged state): the memo skips them instead
of paying for a key and an entry on every one (``make bench-admit``, "a StatefulSet's pod").
A DaemonSet's pods are skipped too (``_one_per_node``)."""

TOKEN_PLACEHOLDER: Final = b'"kube-api-access-\\u0000"'
"""What the token volume's name is in a key: no name the API server accepts (a DNS label) holds
a NUL."""

_state_parts = attrgetter(*(f.name for f in fields(ClusterState) if f.name not in NOT_READ))


def _one_per_node(metadata: RawObject) -> bool:
    """Whether a DaemonSet controls the pod: its controller pins each pod to its node
    (``spec.affinity.nodeAffinity`` ``matchFields`` ``metadata.name``,
    pkg/controller/daemon/util ``ReplaceDaemonSetPodNodeNameNodeAffinity``), so no two of its
    pods share a key (only a replacement on the same node, on an unchanged state). The owner is
    only a hint to skip the memo: a wrong one costs a pod its memo, never its decision."""
    owners = metadata.get("ownerReferences")
    if not isinstance(owners, list):
        return False
    return any(
        isinstance(o, dict) and o.get("kind") == "DaemonSet" and o.get("controller") is True
        for o in owners
    )


class Key(NamedTuple):
    """A replica key: the bytes looked up, and the token volume's name they hide (JSON-quoted
    bytes, ``b'"kube-api-access-4ln8k"'``), if any."""

    raw: bytes
    token: bytes | None


def token_volume(pod: RawObject) -> bytes | None:
    """The JSON-quoted name of ``pod``'s service-account token volume
    (``kube.token_volume.is_service_account_volume``: the ServiceAccount admission plugin's
    projected volume, which the fingerprint leaves out), or None. Any other volume's name is
    part of the key as it is, whatever it looks like."""
    spec = pod.get("spec")
    volumes = spec.get("volumes") if isinstance(spec, dict) else None
    if not isinstance(volumes, list):
        return None
    for volume in volumes:
        if is_service_account_volume(volume):
            return orjson.dumps(volume["name"])
    return None


class Entry(NamedTuple):
    """One remembered decision, the patch with the token volume's name as ``TOKEN_PLACEHOLDER``
    when the patch names it (the helpers' init container mounts the token:
    ``mutation.helpers``), and the bytes the entry holds."""

    decision: Decision
    patch: bytes | None
    size: int


def _same(now: tuple[Any, ...], then: tuple[Any, ...]) -> bool:
    """Whether two part tuples hold the very same objects, position by position."""
    return len(now) == len(then) and all(a is b for a, b in zip(now, then, strict=True))


def _mounts(pod: RawObject, name: str) -> int:
    """How many ``volumeMounts`` of ``pod``'s containers and init containers mount ``name``."""
    spec = pod.get("spec")
    count = 0
    for group in ("containers", "initContainers"):
        containers = spec.get(group) if isinstance(spec, dict) else None
        for container in containers if isinstance(containers, list) else ():
            mounts = container.get("volumeMounts") if isinstance(container, dict) else None
            for mount in mounts if isinstance(mounts, list) else ():
                count += isinstance(mount, dict) and mount.get("name") == name
    return count


class ReplicaMemo:
    """The remembered decisions of one ``Engine`` (thread-safe; see the module docstring).

    Every entry was made on the same state parts and engine parts (``_align``): when either
    changes, every entry is forgotten, so the memo never keeps an old state's objects (a
    snapshot index of thousands of PodSnapshots) alive. Bounded by ``size`` entries and
    ``max_bytes`` of keys and patches (a pod carries as much as its author wants: 1 MB of
    ``args`` times ``size`` would outgrow the chart's memory limit); a pod whose entry alone
    would exceed ``max_bytes // 16`` is not remembered.
    """

    def __init__(self, size: int = SIZE, max_bytes: int = MAX_BYTES) -> None:
        self.size, self.max_bytes = size, max_bytes
        self._entries: OrderedDict[bytes, Entry] = OrderedDict()
        self._bytes = 0
        self._state: ClusterState | None = None
        self._engine: tuple[Any, ...] = ()
        self._parts: tuple[Any, ...] = ()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(endpoint: Endpoint, namespace: str, pod: RawObject) -> Key | None:
        """The replica key of ``pod`` (a JSON-decoded Pod) for ``endpoint`` in ``namespace``:
        orjson's bytes of the pod without ``IDENTITY_FIELDS``, its service-account token volume
        named ``TOKEN_PLACEHOLDER`` in the volume and in the mounts of it; None when orjson
        cannot write it (values JSON never holds), the pod has no ``metadata`` object, or the
        token volume's name (or the placeholder) appears anywhere else in the pod (a value
        equal to it would be renamed too, and its fingerprint is not the next replica's); None,
        at once, for a pod with one of ``UNIQUE_LABELS`` or a DaemonSet's (no other pod would
        have its key)."""
        metadata = pod.get("metadata")
        if not isinstance(metadata, dict):
            return None
        labels = metadata.get("labels")
        if isinstance(labels, dict) and any(label in labels for label in UNIQUE_LABELS):
            return None
        if _one_per_node(metadata):
            return None
        shared = {k: v for k, v in metadata.items() if k not in IDENTITY_FIELDS}
        rest = {k: v for k, v in pod.items() if k != "metadata"}
        try:
            raw = orjson.dumps((endpoint, namespace, shared, rest))
        except orjson.JSONEncodeError:
            return None
        if TOKEN_PLACEHOLDER in raw:
            return None  # a string the placeholder would be confused with
        token = token_volume(pod)
        if token is None:
            return Key(raw, None)
        if raw.count(token) != 1 + _mounts(pod, token[1:-1].decode()):
            return None  # the name is also a value elsewhere: renaming it could change a result
        return Key(raw.replace(token, TOKEN_PLACEHOLDER), token)

    def get(self, key: Key, state: ClusterState, engine_parts: tuple[Any, ...]) -> Decision | None:
        """The decision remembered for ``key`` on these state and engine parts (compared by
        identity), its patch naming this pod's token volume; else None."""
        with self._lock:
            self._align(state, engine_parts)
            entry = self._entries.get(key.raw)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key.raw)
            self.hits += 1
        if entry.patch is None or key.token is None:
            return entry.decision
        patch = orjson.loads(entry.patch.replace(TOKEN_PLACEHOLDER, key.token))
        return replace(entry.decision, patch=tuple(patch))

    def put(
        self, key: Key, state: ClusterState, engine_parts: tuple[Any, ...], decision: Decision
    ) -> bool:
        """Remember ``decision``, made for ``key`` on ``state`` by an engine with
        ``engine_parts``; True when it was. The pod's token volume name may appear in the patch
        only as a whole JSON string (it is then put back per replica); a decision naming it
        anywhere else (a message, a warning, a finding, inside a longer string) is not
        remembered: another replica's says another name. Nor is an entry over
        ``max_bytes // 16``."""
        patch = None
        if key.token is not None:
            name = key.token[1:-1]
            said = orjson.dumps((decision.message, decision.warnings, decision.audit), default=str)
            if name in said:
                return False
            if decision.patch:
                written = orjson.dumps(decision.patch)
                if name in written:
                    patch = written.replace(key.token, TOKEN_PLACEHOLDER)
                    if name in patch:
                        return False
        size = len(key.raw) + (len(patch) if patch is not None else 0)
        if size > self.max_bytes // 16:
            return False
        with self._lock:
            self._align(state, engine_parts)
            old = self._entries.pop(key.raw, None)
            if old is not None:
                self._bytes -= old.size
            self._entries[key.raw] = Entry(decision, patch, size)
            self._bytes += size
            while len(self._entries) > self.size or self._bytes > self.max_bytes:
                self._bytes -= self._entries.popitem(last=False)[1].size
        return True

    def _align(self, state: ClusterState, engine_parts: tuple[Any, ...]) -> None:
        """Make ``state`` and ``engine_parts`` the memo's (lock held): the entries stay when
        every part is the same object, else they are all forgotten."""
        if state is self._state and _same(engine_parts, self._engine):
            return
        parts = _state_parts(state)
        if not (_same(engine_parts, self._engine) and _same(parts, self._parts)):
            self._entries.clear()
            self._bytes = 0
            self._engine, self._parts = engine_parts, parts
        self._state = state

    def __len__(self) -> int:
        """Decisions remembered now."""
        return len(self._entries)

    def clear(self) -> None:
        """Forget every decision (benchmarks measuring a first replica)."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0
