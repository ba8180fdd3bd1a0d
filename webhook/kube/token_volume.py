"""The service-account token volume the API server adds to a pod: how to tell it. Pure.

The ServiceAccount admission plugin (plugin/pkg/admission/serviceaccount in kubernetes/kubernetes,
``TokenVolumeSource``) adds a projected volume ``kube-api-access-<5 random chars>`` to every pod
that automounts a token, and mounts it at ``/var/run/secrets/kubernetes.io/serviceaccount``. The
fingerprint leaves it out (its name is random per replica: ``webhook.pod.distill``), the replica
memo hides its name (``webhook.admission.replicas``), and the stale-config check does not track
its configMap (``webhook.snapshots.config_refs``): all three must agree on which volume it is.
"""

from __future__ import annotations

from typing import Any, Final

SERVICE_ACCOUNT_VOLUME_PREFIX: Final = "kube-api-access-"
"""Name prefix of the API server's projected service-account token volume."""

TOKEN_CONFIG_MAPS: Final = {
    "kube-root-ca.crt": ("ca.crt", "ca.crt"),
    "openshift-service-ca.crt": ("service-ca.crt", "service-ca.crt"),
}
"""ConfigMaps the token volume projects, with the one (key, path) item each: the cluster CA
(``TokenVolumeSource``; the RootCAConfigMap controller publishes it in every namespace) and, on
OpenShift, its service CA (every captured review of ``tests/data/reviews`` has both)."""


def is_service_account_volume(volume: Any) -> bool:
    """Whether ``volume`` (one item of ``spec.volumes``) is the API server's token volume.

    Its shape is fixed by ``TokenVolumeSource``: a ``serviceAccountToken`` source at path
    ``token`` with no audience, the ``kube-root-ca.crt`` configMap's ``ca.crt``, and the
    namespace through downwardAPI; OpenShift adds its ``openshift-service-ca.crt`` configMap's
    ``service-ca.crt``. A volume only named like it, or projecting anything else (a Secret,
    another configMap or key, a token for another audience, another downwardAPI field), is the
    pod author's: else a pod could mount other content under that name and keep its
    fingerprint (a hostile trial, 2026-12-07). ``defaultMode``, ``mode`` and
    ``expirationSeconds`` are not checked; ``null`` values count as absent (a manifest may
    spell them out; the API server's JSON never does). Never raises.
    """
    if not isinstance(volume, dict):
        return False
    name, projected = volume.get("name"), volume.get("projected")
    if not (isinstance(name, str) and name.startswith(SERVICE_ACCOUNT_VOLUME_PREFIX)):
        return False
    if not isinstance(projected, dict) or (len(volume) != 2 and not _only(volume, _VOLUME_KEYS)):
        return False  # another volume source beside the projection
    sources = projected.get("sources")
    if not isinstance(sources, list):
        return False
    token = False
    for source in sources:
        if source in _WRITTEN_SOURCES:  # as the API server writes them: one C-level compare
            continue
        if not isinstance(source, dict):
            return False
        if len(source) == 1:
            ((kind, value),) = source.items()
        else:
            kind, value = _one(source)
        if not isinstance(value, dict):
            return False
        if kind == "serviceAccountToken":
            if value.get("path") != "token" or value.get("audience"):
                return False
            token = True
        elif kind == "configMap":
            if not _config_map(value):
                return False
        elif kind != "downwardAPI" or not _namespace_only(value.get("items")):
            return False
    return token


_WRITTEN_SOURCES: Final = [
    {"configMap": {"items": [{"key": key, "path": path}], "name": name}}
    for name, (key, path) in TOKEN_CONFIG_MAPS.items()
] + [
    {
        "downwardAPI": {
            "items": [
                {
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                    "path": "namespace",
                }
            ]
        }
    }
]
"""The configMap and downwardAPI projections exactly as ``TokenVolumeSource`` writes them (the
token's own carries a per-cluster ``expirationSeconds``, so it is always checked in full)."""
_VOLUME_KEYS: Final = frozenset({"name", "projected"})
_ITEM_KEYS: Final = frozenset({"key", "path", "mode"})
_FIELD_ITEM_KEYS: Final = frozenset({"path", "fieldRef", "mode"})


def _only(mapping: dict[Any, Any], allowed: frozenset[str]) -> bool:
    """Whether every key of ``mapping`` with a non-null value is in ``allowed``."""
    return all(key in allowed or value is None for key, value in mapping.items())


def _one(source: dict[Any, Any]) -> tuple[Any, Any]:
    """The one ``(kind, value)`` of a projection with a non-null value, else ``(None, None)``
    (none, or several: the API server refuses both)."""
    present = [(key, value) for key, value in source.items() if value is not None]
    return present[0] if len(present) == 1 else (None, None)


def _config_map(value: dict[str, Any]) -> bool:
    """Whether a configMap projection is one of ``TOKEN_CONFIG_MAPS`` with its one item."""
    item = TOKEN_CONFIG_MAPS.get(value.get("name"))  # type: ignore[arg-type]
    items = value.get("items")
    return (
        item is not None
        and isinstance(items, list)
        and len(items) == 1
        and isinstance(items[0], dict)
        and (items[0].get("key"), items[0].get("path")) == item
        and _only(items[0], _ITEM_KEYS)
    )


def _namespace_only(items: Any) -> bool:
    """Whether downwardAPI ``items`` project the pod's namespace and nothing else."""
    if items is None:
        return True  # projects nothing
    return isinstance(items, list) and all(
        isinstance(item, dict)
        and isinstance(ref := item.get("fieldRef"), dict)
        and ref.get("fieldPath") == "metadata.namespace"
        and _only(item, _FIELD_ITEM_KEYS)
        for item in items
    )
