"""The distilled pod spec and its fingerprint ``v1:sha256:<64 hex>`` (pure: no I/O, no clock).

GKE restores a pod from a snapshot only when the pod's *distilled spec* hashes like the snapshot's.
GKE's algorithm is not published: this is snapready's own fingerprint over the documented fields
(GKE's "About Pod snapshots" field list; one constant per field group below), never GKE's hash.
It answers "would these two pods hash alike?" and "what changed?" (``snapready diff``).

Steps of ``distill(pod)`` (the pod as the API server hands it to admission, or a manifest):

1. Keep the documented fields only, in a fixed order; list order is kept, so reordering
   containers, volumes, ports or mounts is a change.
2. Canonicalise absent/null/empty: ``null``, ``""``, ``[]`` and ``{}`` are the same as absent
   (the API server drops ``null`` and ``omitempty`` empties; an empty struct such as
   ``securityContext: {}`` sets nothing). ``false`` is the same as absent only for fields whose
   Kubernetes default is false (``_FALSE_IS_ABSENT``); pointer booleans where ``false`` differs
   from unset (``automountServiceAccountToken``, ``hostUsers``, ``allowPrivilegeEscalation``...)
   keep it. ``0`` is always kept (``runAsUser: 0`` is root). Inside string maps
   (``volumeAttributes``, labels...) ``""`` values are kept. A volume's source key is kept even
   when empty (``emptyDir: {}`` is the volume type). Integral floats become ints; integers
   beyond +-(2**53-1) (valid int64 values RFC 8785 numbers cannot hold) become decimal strings.
3. Apply Kubernetes defaulting (``webhook.kube.defaults``), so a manifest and the admitted pod
   agree.
4. Drop the service-account token volume: the API server's ServiceAccount admission plugin adds a
   projected volume ``kube-api-access-<5 random chars>`` (sources: a ``serviceAccountToken``, the
   ``kube-root-ca.crt`` configMap, the namespace via downwardAPI, plus an
   ``openshift-service-ca.crt`` configMap on OpenShift) and mounts it in every container. The
   suffix differs for every replica and the pod template has no such volume, so hashing it would
   give every replica its own fingerprint. Its content is fixed by the plugin (and
   ``automountServiceAccountToken``, which is hashed, decides whether it exists), so nothing a
   user controls is lost; a volume so named that projects anything else is hashed
   (``webhook.kube.token_volume.is_service_account_volume``).

The fingerprint is SHA-256 over the RFC 8785 (JCS) canonical JSON of the distilled dict
(``webhook.kube.canonical.canonical_json``: the ``rfc8785`` package with a byte-identical ``orjson``
fast path); the ``v1`` prefix names this algorithm: any change to it is a new prefix or a
reviewed pin change.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any, Final, NamedTuple

import orjson

from webhook.base.types import RawObject, mapping
from webhook.kube.canonical import JCS_INT_MAX, canonical_json
from webhook.kube.defaults import default_container, default_pod_spec, default_volume
from webhook.kube.token_volume import is_service_account_volume

FINGERPRINT_PREFIX: Final = "v1:sha256:"

# metadata.annotations: gVisor runtime settings change the sandbox the snapshot was taken in.
GVISOR_ANNOTATION_PREFIX: Final = "dev.gvisor."
# metadata.labels: each Indexed Job completion index is its own snapshot family.
HASHED_LABELS: Final = ("batch.kubernetes.io/job-completion-index",)
# Pod-level fields that shape the sandbox (namespaces, DNS, identity, OS, runtime).
POD_FIELDS: Final = (
    "dnsPolicy",
    "automountServiceAccountToken",
    "hostNetwork",
    "hostPID",
    "hostIPC",
    "shareProcessNamespace",
    "securityContext",
    "dnsConfig",
    "runtimeClassName",
    "os",
    "hostUsers",
)
# containers[] / initContainers[]: what the process sees at start (env and resources are not in).
CONTAINER_FIELDS: Final = (
    "name",
    "image",
    "command",
    "args",
    "workingDir",
    "ports",
    "volumeMounts",
    "volumeDevices",
    "lifecycle",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "securityContext",
    "stdin",
    "stdinOnce",
    "tty",
)
# ports[]: the listening sockets restored with the memory image (hostPort/hostIP are not in).
PORT_FIELDS: Final = ("name", "containerPort", "protocol")
# volumeMounts[]: the filesystem layout restored processes expect.
MOUNT_FIELDS: Final = (
    "name",
    "readOnly",
    "recursiveReadOnly",
    "mountPath",
    "subPath",
    "mountPropagation",
    "subPathExpr",
)
# volumeDevices[]: only the device name is documented (devicePath is not).
DEVICE_FIELDS: Final = ("name",)
# lifecycle: hooks run around checkpoint/restore boundaries (stopSignal is not documented).
LIFECYCLE_FIELDS: Final = ("postStart", "preStop")
# spec.volumes[]: the name and the whole volume source (hostPath, persistentVolumeClaim,
# configMap, emptyDir, secret, csi, ...): what backs each mount.


# Booleans whose Kubernetes default is false (plain ``bool`` + omitempty, or documented default
# false): ``false`` and absent are the same pod.
_FALSE_IS_ABSENT: Final = frozenset(
    {"stdin", "stdinOnce", "tty", "hostNetwork", "hostPID", "hostIPC", "readOnly", "optional"}
)
# map[string]string fields inside hashed subtrees: their values are data, "" included.
_STRING_MAPS: Final = frozenset({"volumeAttributes", "options", "labels", "annotations"})
_SUBFIELDS: Final = {"ports": PORT_FIELDS, "volumeDevices": DEVICE_FIELDS}
# Lists whose items are identified by a unique name (``webhook.pod.diff`` matches them by name).
NAMED_LISTS: Final = frozenset({"spec.volumes", "spec.initContainers", "spec.containers"})


class Distilled(NamedTuple):
    """A distilled pod (``distill``) and whether orjson's ``PLAIN_JSON`` bytes of it, and of each
    of its parts, are its RFC 8785 bytes when they are ASCII (``jcs_bytes``).

    Attributes:
        value: what ``distill`` returned (treat as read-only).
        plain: every leaf is a str, int, bool or None that ``_canon`` passed (no float kept, no
            type from outside JSON).
    """

    value: RawObject
    plain: bool


def distilled(pod: RawObject) -> Distilled:
    """``distill(pod)`` with what ``jcs_bytes`` needs to know of it (see ``Distilled``)."""
    _odd.seen = False
    value = distill(pod)
    return Distilled(value, not _odd.seen)


def jcs_bytes(value: Any, plain: bool) -> bytes:
    """RFC 8785 bytes of ``value``, a distilled pod or a part of one (``plain`` from its
    ``Distilled``): orjson's ``PLAIN_JSON`` bytes when ``plain`` and they are ASCII (about 1 us
    against ``canonical_json``'s walk), else ``canonical_json``.

    Raises:
        ValueError: as ``canonical_json`` (never for a pod decoded from JSON).
    """
    if plain:
        try:
            canonical = orjson.dumps(value, option=PLAIN_JSON)
        except orjson.JSONEncodeError:  # a non-string key, deeper than 255 levels
            return canonical_json(value)
        if canonical.isascii():
            return canonical
    return canonical_json(value)


def fingerprint(pod: RawObject) -> str:
    """``v1:sha256:<64 lowercase hex>`` of ``distill(pod)`` in RFC 8785 canonical JSON.

    Args:
        pod: a Pod (``{"metadata": ..., "spec": ...}``, other keys ignored) or a pod template.

    Raises:
        ValueError: (``rfc8785.CanonicalizationError``) a value JSON cannot represent (NaN,
            infinity, a non-string key or a non-JSON type from YAML); never for a pod decoded from
            the API server's JSON.
    """
    return fingerprint_of(distilled(pod))


def fingerprint_of(pod: Distilled) -> str:
    """``fingerprint`` of an already distilled pod.

    Raises:
        ValueError: as ``fingerprint``.
    """
    return FINGERPRINT_PREFIX + hashlib.sha256(jcs_bytes(pod.value, pod.plain)).hexdigest()


PLAIN_JSON: Final = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_STRICT_INTEGER
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)
"""orjson options under which its sorted-keys bytes of a distilled pod are the RFC 8785 bytes.

``canonical_json`` proves that by walking the value (~7 us for review 03's pod); ``distilled``
knows it from ``distill`` instead (``Distilled.plain``), and ``jcs_bytes`` checks the rest on
the bytes: every leaf of a distilled
pod passed ``_canon``, which turns integral floats into ints, big ints into strings and notes
in ``_odd`` any other float (JCS formats those its own way, NaN and infinities it refuses) and
any leaf that is not a plain str, int, bool or None (an enum or UUID from Python callers, which
orjson writes its own way); integers beyond 2**53, non-string keys and dataclasses, dates and
subclasses raise here; ASCII output means ASCII keys (JCS sorts keys by UTF-16 code units,
orjson by code points). Anything else goes through ``canonical_json``.
``tests/pod/test_distill.py`` checks both agree. ``webhook.pod.memo`` keys by the same bytes."""
_odd = threading.local()
"""``seen``: ``_canon`` met a float it kept, or a leaf of another type than str, int, bool and
None, during this thread's ``distilled``."""
_PLAIN_LEAVES: Final = frozenset({str, int, bool, type(None)})


def distill(pod: RawObject) -> RawObject:
    """The documented fields of ``pod``, canonicalised and defaulted (see the module docstring).

    Returns a new dict (``pod`` is not modified and shares no mutable part with it), shaped
    ``{"metadata": {"annotations", "labels"}, "spec": {"volumes", "initContainers",
    "containers", <POD_FIELDS>}}`` with empty parts left out. Never raises on odd shapes: a
    non-dict ``metadata``/``spec`` counts as empty.
    """
    metadata = mapping(pod.get("metadata"))
    spec = mapping(pod.get("spec"))
    out_meta: RawObject = {}
    annotations = {
        k: _canon(v)
        for k, v in mapping(metadata.get("annotations")).items()
        if isinstance(k, str) and k.startswith(GVISOR_ANNOTATION_PREFIX) and v is not None
    }
    if annotations:
        out_meta["annotations"] = annotations
    labels = mapping(metadata.get("labels"))
    hashed = {k: _canon(labels[k]) for k in HASHED_LABELS if labels.get(k) is not None}
    if hashed:
        out_meta["labels"] = hashed
    out: RawObject = {"metadata": out_meta} if out_meta else {}
    out["spec"] = _distill_spec(spec)
    return out


def _distill_spec(spec: RawObject) -> RawObject:
    """The distilled PodSpec: volumes, init containers, containers, then pod-level fields."""
    out: RawObject = {}
    dropped: set[str] = set()
    volumes = []
    for volume in _list(spec.get("volumes")):
        if is_service_account_volume(volume):
            dropped.add(volume["name"])
        else:
            volumes.append(_volume(volume) if isinstance(volume, dict) else _canon(volume))
    if volumes:
        out["volumes"] = volumes
    for key in ("initContainers", "containers"):
        containers = [
            _container(c, dropped) if isinstance(c, dict) else _canon(c)
            for c in _list(spec.get(key))
        ]
        if containers:
            out[key] = containers
    out.update(_pick(spec, POD_FIELDS))
    default_pod_spec(out)
    return out


def _container(container: RawObject, dropped_volumes: set[str]) -> RawObject:
    """One container's documented fields; mounts of dropped volumes are left out."""
    out: RawObject = {}
    get = container.get
    for key in CONTAINER_FIELDS:
        value = get(key)
        if value is None:
            continue
        if type(value) is str:  # name, image, paths, policies: their own canonical copy
            if value:
                out[key] = value
            continue
        if key in _SUBFIELDS and isinstance(value, list):
            value = [_pick(v, _SUBFIELDS[key]) if isinstance(v, dict) else _canon(v) for v in value]
        elif key == "volumeMounts" and isinstance(value, list):
            value = [
                _pick(m, MOUNT_FIELDS) if isinstance(m, dict) else _canon(m)
                for m in value
                if not (isinstance(m, dict) and _name(m) in dropped_volumes)
            ]
        elif key == "lifecycle" and isinstance(value, dict):
            value = _pick(value, LIFECYCLE_FIELDS)
        else:
            value = _canon(value)
        if not _is_absent(key, value):
            out[key] = value
    default_container(out)
    return out


def _volume(volume: RawObject) -> RawObject:
    """``name`` plus the whole (canonical) volume source; an empty source object is kept."""
    out: RawObject = {}
    for key, value in volume.items():
        if value is None:
            continue
        canon = _canon(value)
        if key == "name" and _is_absent(key, canon):
            continue
        out[key] = canon
    default_volume(out)
    return out


def _pick(source: RawObject, fields: tuple[str, ...]) -> RawObject:
    """The canonical, non-absent values of ``fields`` in ``source``, in ``fields`` order."""
    out: RawObject = {}
    get = source.get
    for key in fields:
        value = get(key)
        if value is None:
            continue
        if type(value) is not str:  # a string is its own canonical copy
            value = _canon(value)
            if _is_absent(key, value):
                continue
        elif not value:
            continue
        out[key] = value
    return out


def _canon(value: Any) -> Any:
    """A canonical copy of a JSON value: absent-equivalent entries dropped from mappings.

    The exact JSON types are tested first (``type(...) is``): a distilled pod is mostly strings
    in plain dicts, and this runs once per value of it (half of ``distill``'s time).
    """
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is dict or (kind is not list and isinstance(value, dict)):
        out: RawObject = {}
        for key, raw in value.items():
            raw_kind = type(raw)
            if raw_kind is str:  # a leaf: absent only when empty
                if raw:
                    out[key] = raw
                continue
            if key in _STRING_MAPS and isinstance(raw, dict):
                item = {k: _canon(v) for k, v in raw.items() if v is not None}
            else:
                item = _canon(raw)
            if not _is_absent(key, item):
                out[key] = item
        return out
    if kind is list or isinstance(value, list):
        return [_canon(item) for item in value]
    if kind is int:
        # int64 fields (runAsUser...) beyond what RFC 8785 numbers can hold become strings
        return value if -JCS_INT_MAX <= value <= JCS_INT_MAX else str(value)
    if isinstance(value, float):
        if value.is_integer() and abs(value) <= JCS_INT_MAX:
            return int(value)
        _odd.seen = True
    elif kind not in _PLAIN_LEAVES:
        _odd.seen = True  # not from JSON: the reference decides
    return value


def _is_absent(key: str, value: Any) -> bool:
    """Whether ``key: value`` in a mapping means the same as leaving ``key`` out."""
    if value is None:
        return True
    if value is False:
        return key in _FALSE_IS_ABSENT
    return isinstance(value, (str, list, dict)) and not value


def _name(item: RawObject) -> str | None:
    """``item["name"]`` if it is a string (odd JSON may hold anything there)."""
    name = item.get("name")
    return name if isinstance(name, str) else None


def _list(value: Any) -> list[Any]:
    """``value`` if it is a list, else ``[]``."""
    return value if isinstance(value, list) else []
