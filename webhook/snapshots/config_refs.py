"""Rotated configuration: the Secrets and ConfigMaps an origin pod read, and their changes.

GKE hashes no env and no Secret or ConfigMap content (docs/gke-facts.md#section-3): after a Secret
the origin pod used is rotated, new replicas still restore the old value from the snapshot's memory,
silently. snapready records, in the origin record, which objects the origin pod consumed
(``consumed``) with their ``resourceVersion`` and last change time when the record was written,
never their values, and marks a snapshot ``stale-config`` (``config_changes``) when one of them
changed after the snapshot was taken, was deleted, or appeared after being missing.

What counts as consumed (the ways a pod reads either kind, Kubernetes "Secrets" and
"ConfigMaps" concepts): ``env[].valueFrom.secretKeyRef`` / ``configMapKeyRef`` and
``envFrom[].secretRef`` / ``configMapRef`` of every container, init container and ephemeral
container; volumes ``secret`` / ``configMap``; ``projected.sources[].secret`` / ``configMap``.
Left out: ``imagePullSecrets`` (read by the kubelet, not in the pod's memory) and the
ConfigMaps of the service account admission plugin's ``kube-api-access-*`` projected volume
(``kube-root-ca.crt``, published by kube-controller-manager in every namespace, and platform
additions such as OpenShift's ``openshift-service-ca.crt``: cluster CAs, not the app's
configuration; counting them would watch every namespace). A user volume reading
``kube-root-ca.crt`` counts. Pure module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.base.types import RawObject, mapping
from webhook.kube.token_volume import is_service_account_volume
from webhook.snapshots.views import ConfigRef, SnapshotView

CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


@dataclass(frozen=True)
class ConfigMeta:
    """What the metadata-only watch keeps of one Secret or ConfigMap.

    Attributes:
        version: ``metadata.resourceVersion`` (any change, labels included).
        changed_at: when its content last changed (``last_change``: the newest
            ``managedFields[].time`` of an entry owning ``data``, ``binaryData`` or
            ``stringData``, else ``creationTimestamp``); None when neither is given.
    """

    version: str
    changed_at: str | None


ConfigIndex = Mapping[str, Mapping[tuple[str, str], ConfigMeta]]
"""namespace -> (kind, name) -> ``ConfigMeta``: the watched namespaces' Secrets and ConfigMaps."""


def config_meta(obj: RawObject) -> ConfigMeta | None:
    """The ``ConfigMeta`` of a (PartialObjectMetadata) Secret or ConfigMap; None without a
    resourceVersion. Reads ``metadata`` only: a value that came along is never looked at."""
    metadata = mapping(obj.get("metadata"))
    version = metadata.get("resourceVersion")
    if not isinstance(version, str) or not version:
        return None
    return ConfigMeta(version, last_change(metadata))


CONTENT_FIELDS = ("f:data", "f:binaryData", "f:stringData")
"""The fields that hold a Secret's or ConfigMap's values in ``managedFields[].fieldsV1``."""


def last_change(metadata: Mapping[str, Any]) -> str | None:
    """When the content last changed: the newest ``managedFields[].time`` (RFC 3339 texts of
    one format sort by time) of an entry owning a ``CONTENT_FIELDS`` field, else
    ``creationTimestamp``, else None. A label, annotation or owner edit by another field
    manager does not count. The time is the entry's last update, so an edit of metadata only
    by the manager that also owns the values still counts (the API server keeps one time per
    manager and operation)."""
    times: list[str] = [
        entry["time"]
        for entry in metadata.get("managedFields") or ()
        if isinstance(entry, dict)
        and isinstance(entry.get("time"), str)
        and isinstance(entry.get("fieldsV1"), dict)
        and any(key in entry["fieldsV1"] for key in CONTENT_FIELDS)
    ]
    if times:
        return max(times)
    created = metadata.get("creationTimestamp")
    return created if isinstance(created, str) and created else None


def consumed(pod: RawObject) -> tuple[tuple[str, str], ...]:
    """``(kind, name)`` of every Secret and ConfigMap ``pod`` reads, sorted, each once."""
    spec = mapping(pod.get("spec"))
    found: set[tuple[str, str]] = set()
    for key in CONTAINER_LISTS:
        for container in spec.get(key) or ():
            if isinstance(container, dict):
                found.update(_container_refs(container))
    for volume in spec.get("volumes") or ():
        if isinstance(volume, dict):
            found.update(_volume_refs(volume))
    return tuple(sorted(found))


def _named(kind: str, ref: Any, field: str = "name") -> list[tuple[str, str]]:
    name = ref.get(field) if isinstance(ref, dict) else None
    return [(kind, name)] if isinstance(name, str) and name else []


def _container_refs(container: Mapping[str, Any]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for env in container.get("env") or ():
        source = mapping(env.get("valueFrom")) if isinstance(env, dict) else {}
        out += _named("Secret", source.get("secretKeyRef"))
        out += _named("ConfigMap", source.get("configMapKeyRef"))
    for env_from in container.get("envFrom") or ():
        if isinstance(env_from, dict):
            out += _named("Secret", env_from.get("secretRef"))
            out += _named("ConfigMap", env_from.get("configMapRef"))
    return out


def _volume_refs(volume: Mapping[str, Any]) -> list[tuple[str, str]]:
    out = _named("Secret", volume.get("secret"), "secretName")
    out += _named("ConfigMap", volume.get("configMap"))
    projected = mapping(volume.get("projected"))
    service_account_volume = is_service_account_volume(volume)  # its CA configMap is not tracked
    for source in projected.get("sources") or ():
        if not isinstance(source, dict):
            continue
        out += _named("Secret", source.get("secret"))
        if not service_account_volume:
            out += _named("ConfigMap", source.get("configMap"))
    return out


@dataclass(frozen=True)
class ConfigChange:
    """A consumed Secret or ConfigMap that is not what the snapshot's memory holds.

    Attributes:
        kind, name: the object; ``what``: ``changed``, ``deleted`` or ``created`` (missing
            when the origin pod ran, an ``optional`` reference, and present now);
        at: when (RFC 3339, the newest ``managedFields`` time), None when unknown (deleted).
    """

    kind: str
    name: str
    what: str
    at: str | None

    def text(self) -> str:
        """``Secret hf-token changed at 2026-05-02T10:00:00Z`` and the like."""
        verb = "changed" if self.what == "changed" else "was " + self.what
        return f"{self.kind} {self.name} {verb}" + (f" at {self.at}" if self.at else "")


def config_changes(view: SnapshotView, configs: ConfigIndex) -> tuple[ConfigChange, ...]:
    """The changes of ``view``'s consumed configuration since it was taken (``()``: none, or
    not known: no record, a record without ``config``, or a namespace not watched yet).

    The memory was captured when the PodSnapshot was created (the ``Checkpoint`` condition's
    time is when the upload ended, minutes later: the earlier of the two counts). An object
    counts as changed when its content changed after the recorded time (``last_change``;
    without change times: when its resourceVersion differs), or when the recorded change time
    is after the capture (changed between checkpoint and record).
    """
    refs = view.origin.config if view.origin is not None else None
    watched = configs.get(view.namespace)
    if not refs or watched is None:
        return ()
    taken = min(t for t in (view.created, view.checkpoint_at) if t) if view.created else ""
    taken = taken or (view.checkpoint_at or "")
    return tuple(change for ref in refs if (change := _change(ref, watched, taken)) is not None)


def _change(
    ref: ConfigRef, watched: Mapping[tuple[str, str], ConfigMeta], taken: str
) -> ConfigChange | None:
    now = watched.get((ref.kind, ref.name))
    if ref.version is None:
        return None if now is None else ConfigChange(ref.kind, ref.name, "created", now.changed_at)
    if now is None:
        return ConfigChange(ref.kind, ref.name, "deleted", None)
    if now.changed_at and ref.changed_at:
        if now.changed_at > ref.changed_at:
            return ConfigChange(ref.kind, ref.name, "changed", now.changed_at)
    elif now.version != ref.version:
        return ConfigChange(ref.kind, ref.name, "changed", now.changed_at)
    if ref.changed_at and taken and ref.changed_at > taken:
        return ConfigChange(ref.kind, ref.name, "changed", ref.changed_at)
    return None


def refs_of(
    pod: RawObject, metas: Mapping[tuple[str, str], ConfigMeta | None]
) -> tuple[ConfigRef, ...]:
    """The ``ConfigRef`` of each object ``pod`` consumes, from the metadata read for the record
    (``metas``: (kind, name) -> its metadata, None: it does not exist)."""
    out = []
    for kind, name in consumed(pod):
        meta = metas.get((kind, name))
        out.append(
            ConfigRef(kind, name, meta.version if meta else None, meta.changed_at if meta else None)
        )
    return tuple(out)


def watched_namespaces(views: Iterable[SnapshotView]) -> frozenset[str]:
    """Namespaces with a snapshot whose record names consumed configuration (the metadata-only
    watch runs there and nowhere else)."""
    return frozenset(v.namespace for v in views if v.origin is not None and v.origin.config)
