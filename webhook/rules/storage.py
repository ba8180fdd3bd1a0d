"""Storage rules: ``gcsfuse`` (deny) and ``stale-state`` (warn).

- ``gcsfuse``: the Cloud Storage FUSE CSI driver is not supported with Pod snapshots
  (docs/gke-facts.md#section-6). GKE's sidecar injector may run before or after this webhook, so all
  three signals count: the annotation ``gke-gcsfuse/volumes: "true"`` (the injector accepts
  ``true``/``True``, gcs-fuse-csi-driver pkg/webhook/parsers.go), a CSI volume of driver
  ``gcsfuse.csi.storage.gke.io``, and a container or init container named
  ``gke-gcsfuse-sidecar`` (a native sidecar since GKE 1.29). Holds for ``rootfs-only`` too.
- ``stale-state``: persistent volumes are not in a snapshot, and env values from Secrets are
  restored from memory as they were at checkpoint time (docs/gke-facts.md#section-1, #section-3 and
  #section-7). Advisory; ``rootfs-only`` restores no memory, so it does not apply there.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from webhook.base.types import Finding
from webhook.pod.context import PodContext, list_of_dicts

GCSFUSE_ANNOTATION = "gke-gcsfuse/volumes"
GCSFUSE_DRIVER = "gcsfuse.csi.storage.gke.io"
GCSFUSE_SIDECAR = "gke-gcsfuse-sidecar"
_FIX = "use a PVC or copy the data into an emptyDir"


class GcsFuse:
    """``gcsfuse``: one deny finding per GCS FUSE signal, at the field that carries it."""

    rule_ids: tuple[str, ...] = ("gcsfuse",)

    def __call__(self, pod: PodContext) -> Iterable[Finding]:
        """Findings for the annotation, each gcsfuse CSI volume and each sidecar container."""
        if pod.annotations.get(GCSFUSE_ANNOTATION) in ("true", "True"):
            path = pod.metadata_field("annotations", GCSFUSE_ANNOTATION)
            text = f"Cloud Storage FUSE is not supported by Pod snapshots; {_FIX}"
            yield Finding(path, "gcsfuse", text)
        for index, volume in pod.indexed("volumes"):
            csi = volume.get("csi")
            if isinstance(csi, dict) and csi.get("driver") == GCSFUSE_DRIVER:
                path = pod.spec_field("volumes", index, "csi", "driver")
                text = f"GCS FUSE CSI volumes are not supported by Pod snapshots; {_FIX}"
                yield Finding(path, "gcsfuse", text)
        for kind in ("initContainers", "containers"):
            for index, container in pod.indexed(kind):
                if container.get("name") == GCSFUSE_SIDECAR:
                    path = pod.spec_field(kind, index, "name")
                    text = f"the GCS FUSE sidecar is not supported by Pod snapshots; {_FIX}"
                    yield Finding(path, "gcsfuse", text)


def _secret_env(container: dict[str, object]) -> tuple[list[str], str]:
    """Names of env vars set from Secrets (``valueFrom.secretKeyRef``; an ``envFrom.secretRef``
    shows as ``*<secret name>``) and the field that holds the first of them."""
    names: list[str] = []
    for env in list_of_dicts(container.get("env")):
        source = env.get("valueFrom")
        if isinstance(source, dict) and isinstance(source.get("secretKeyRef"), dict):
            names.append(str(env.get("name")))
    field = "env" if names else "envFrom"
    for env_from in list_of_dicts(container.get("envFrom")):
        ref = env_from.get("secretRef")
        if isinstance(ref, dict):
            names.append(f"*{ref.get('name')}")
    return names, field


def _short(names: list[str], limit: int = 3, width: int = 24) -> str:
    """At most ``limit`` names of at most ``width`` chars each (warnings stay under 256)."""
    shown = ", ".join(n if len(n) <= width else n[: width - 3] + "..." for n in names[:limit])
    return shown + (f" +{len(names) - limit} more" if len(names) > limit else "")


class StaleState:
    """``stale-state``: PVC-backed volumes and env from Secrets (advisory, whole-pod only)."""

    rule_ids: tuple[str, ...] = ("stale-state",)

    def __call__(self, pod: PodContext) -> Iterable[Finding]:
        """One warning per persistent volume and one per container with Secret env."""
        if pod.rootfs_only:
            return []
        return [*self._volumes(pod), *self._secret_env(pod)]

    @staticmethod
    def _volumes(ctx: PodContext) -> Iterator[Finding]:
        for index, volume in ctx.indexed("volumes"):
            for source, label in (("persistentVolumeClaim", "PVC"), ("ephemeral", "ephemeral PVC")):
                if source in volume:
                    text = (
                        f"{label} volumes are not in the snapshot and may disagree with restored "
                        "memory; reload their state after restore"
                    )
                    path = ctx.spec_field("volumes", index, source)
                    yield Finding(path, "stale-state", text, "warn")

    @staticmethod
    def _secret_env(ctx: PodContext) -> Iterator[Finding]:
        for kind in ("initContainers", "containers"):
            for index, container in ctx.indexed(kind):
                names, field = _secret_env(container)
                if names:
                    text = (
                        f"env {_short(names)} from Secrets keeps its checkpoint-time value after "
                        "restore; re-read /proc/gvisor/spec_environ"
                    )
                    path = ctx.spec_field(kind, index, field)
                    yield Finding(path, "stale-state", text, "warn")
