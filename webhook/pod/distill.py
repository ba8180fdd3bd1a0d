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
agree. 4. Drop the service-account token volume: the API server's ServiceAccount admission plugin
adds a
   projected volume ``kube-api-access-<5 random chars>`` (sources: a ``serviceAccountToken``, the
   ``kube-root-ca.crt`` configMap, the namespace via downwardAPI, plus an
   ``openshift-service-ca.crt`` configMap on OpenShift) and mounts it in every container. The
   suffix differs for every replica and the pod template has no such volume, so hashing it would
   give every replica its own fingerprint. Its content is fixed by the plugin (and
   ``automountServiceAccountToken``, which is hashed, decides whether it exists), so nothing a
   user controls is lost.

The fingerprint is SHA-256 over the RFC 8785 (JCS) canonical JSON of the distilled dict
(``webhook.kube.canonical.canonical_json``: the ``rfc8785`` package with a byte-identical ``orjson``
fast path); the ``v1`` prefix names this algorithm: any change to it is a new prefix or a
reviewed pin change.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from webhook.base.types import RawObject
from webhook.kube.canonical import JCS_INT_MAX, canonical_json
from webhook.kube.defaults import default_container, default_pod_spec, default_volume
from webhook.pod.context import join_path

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

SERVICE_ACCOUNT_VOLUME_PREFIX: Final = "kube-api-access-"
"""Name prefix of the API server's projected service-account token volume."""

# Booleans whose Kubernetes default is false (plain ``bool`` + omitempty, or documented default
# false): ``false`` and absent are the same pod.
_FALSE_IS_ABSENT: Final = frozenset(
    {"stdin", "stdinOnce", "tty", "hostNetwork", "hostPID", "hostIPC", "readOnly", "optional"}
)
# map[string]string fields inside hashed subtrees: their values are data, "" included.
_STRING_MAPS: Final = frozenset({"volumeAttributes", "options", "labels", "annotations"})
_SUBFIELDS: Final = {"ports": PORT_FIELDS, "volumeDevices": DEVICE_FIELDS}
# Lists whose items are identified by a unique name (``changed_paths`` matches them by name).
_NAMED_LISTS: Final = frozenset({"spec.volumes", "spec.initContainers", "spec.containers"})


def fingerprint(pod: RawObject) -> str:
    """``v1:sha256:<64 lowercase hex>`` of ``distill(pod)`` in RFC 8785 canonical JSON.

    Args:
        pod: a Pod (``{"metadata": ..., "spec": ...}``, other keys ignored) or a pod template.

    Raises:
        ValueError: (``rfc8785.CanonicalizationError``) a value JSON cannot represent (NaN,
            infinity, a non-string key or a non-JSON type from YAML); never for a pod decoded from
            the API server's JSON.
    """
    return FINGERPRINT_PREFIX + hashlib.sha256(canonical_json(distill(pod))).hexdigest()


def distill(pod: RawObject) -> RawObject:
    """The documented fields of ``pod``, canonicalised and defaulted (see the module docstring).

    Returns a new dict (``pod`` is not modified and shares no mutable part with it), shaped
    ``{"metadata": {"annotations", "labels"}, "spec": {"volumes", "initContainers",
    "containers", <POD_FIELDS>}}`` with empty parts left out. Never raises on odd shapes: a
    non-dict ``metadata``/``spec`` counts as empty.
    """
    metadata = _mapping(pod.get("metadata"))
    spec = _mapping(pod.get("spec"))
    out_meta: RawObject = {}
    annotations = {
        k: _canon(v)
        for k, v in _mapping(metadata.get("annotations")).items()
        if isinstance(k, str) and k.startswith(GVISOR_ANNOTATION_PREFIX) and v is not None
    }
    if annotations:
        out_meta["annotations"] = annotations
    labels = _mapping(metadata.get("labels"))
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
        if _is_service_account_volume(volume):
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
    for key in CONTAINER_FIELDS:
        value = container.get(key)
        if value is None:
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


def _is_service_account_volume(volume: Any) -> bool:
    """The API server's ``kube-api-access-*`` projected volume with a serviceAccountToken source."""
    if not isinstance(volume, dict):
        return False
    name, projected = volume.get("name"), volume.get("projected")
    if not (isinstance(name, str) and name.startswith(SERVICE_ACCOUNT_VOLUME_PREFIX)):
        return False
    sources = projected.get("sources") if isinstance(projected, dict) else None
    return any(isinstance(s, dict) and "serviceAccountToken" in s for s in _list(sources))


def _pick(source: RawObject, fields: tuple[str, ...]) -> RawObject:
    """The canonical, non-absent values of ``fields`` in ``source``, in ``fields`` order."""
    out: RawObject = {}
    for key in fields:
        value = source.get(key)
        if value is not None:
            value = _canon(value)
            if not _is_absent(key, value):
                out[key] = value
    return out


def _canon(value: Any) -> Any:
    """A canonical copy of a JSON value: absent-equivalent entries dropped from mappings."""
    if isinstance(value, dict):
        out: RawObject = {}
        for key, raw in value.items():
            if key in _STRING_MAPS and isinstance(raw, dict):
                item = {k: _canon(v) for k, v in raw.items() if v is not None}
            else:
                item = _canon(raw)
            if not _is_absent(key, item):
                out[key] = item
        return out
    if isinstance(value, list):
        return [_canon(item) for item in value]
    if type(value) is int and not -JCS_INT_MAX <= value <= JCS_INT_MAX:
        return str(value)  # int64 fields (runAsUser...) beyond what RFC 8785 numbers can hold
    if isinstance(value, float) and value.is_integer() and abs(value) <= JCS_INT_MAX:
        return int(value)
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


def _mapping(value: Any) -> RawObject:
    """``value`` if it is a dict, else ``{}`` (null/absent/odd shapes)."""
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    """``value`` if it is a list, else ``[]``."""
    return value if isinstance(value, list) else []


def changed_paths(a: RawObject, b: RawObject) -> list[tuple[str, Any, Any]]:
    """The distilled fields that differ between pods ``a`` and ``b``, in distilled-spec order.

    Returns ``[(path, value_in_a, value_in_b), ...]`` with paths like ``spec.containers[0].image``
    (``webhook.pod.context.join_path`` style); an absent value is ``None``. Volumes, init containers
    and containers whose names differ in membership or order give one
    ``<list>[*].name`` entry with both name lists, then the items present on both sides are compared
    by name (the index in the path is A's). Other lists of mappings of equal length are compared
    item by item; a mapping absent on one side is compared key by key; anything else is
    reported whole. Empty when the fingerprints are equal.
    """
    out: list[tuple[str, Any, Any]] = []
    _walk("", distill(a), distill(b), out)
    return out


def _walk(path: str, a: Any, b: Any, out: list[tuple[str, Any, Any]]) -> None:
    """Append the differences between distilled values ``a`` and ``b`` under ``path``."""
    if _same(a, b):
        return
    if path in _NAMED_LISTS:  # an absent list of containers/volumes is an empty one
        a, b = ([] if a is None else a), ([] if b is None else b)
    elif isinstance(a, dict) or isinstance(b, dict):  # descend into a mapping absent on one side
        reported = len(out)
        dict_a, dict_b = ({} if a is None else a), ({} if b is None else b)
        if isinstance(dict_a, dict) and isinstance(dict_b, dict):
            for key in [*dict_a, *(k for k in dict_b if k not in dict_a)]:
                _walk(join_path(path, key), dict_a.get(key), dict_b.get(key), out)
        if len(out) == reported:  # e.g. ``emptyDir: {}`` vs absent, or a mapping vs a scalar
            out.append((path, a, b))
        return
    if not (isinstance(a, list) and isinstance(b, list) and _all_dicts(a) and _all_dicts(b)):
        out.append((path, a, b))
        return
    names_a, names_b = (_names(a), _names(b)) if path in _NAMED_LISTS else (None, None)
    if names_a is not None and names_b is not None and names_a != names_b:
        out.append((f"{path}[*].name", names_a, names_b))
        for index, name in enumerate(names_a):
            if name in names_b:
                _walk(join_path(path, index), a[index], b[names_b.index(name)], out)
    elif len(a) == len(b):
        for index, (item_a, item_b) in enumerate(zip(a, b, strict=True)):
            _walk(join_path(path, index), item_a, item_b, out)
    else:
        out.append((path, a, b))


def _same(a: Any, b: Any) -> bool:
    """JSON equality: like ``==`` but ``true`` is not ``1`` (both hash differently)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _all_dicts(items: list[Any]) -> bool:
    """Every item is a mapping."""
    return all(isinstance(item, dict) for item in items)


def _names(items: list[RawObject]) -> list[str] | None:
    """The ``name`` of every item, or None unless all have a unique string name."""
    names = [item.get("name") for item in items]
    if all(isinstance(n, str) for n in names) and len(set(names)) == len(names):
        return [str(n) for n in names]
    return None
