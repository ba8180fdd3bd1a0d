"""Kubernetes API-server defaulting for the fields the fingerprint hashes (pure, no I/O).

A manifest on disk lacks the values the API server fills in before any admission webhook runs, so
``webhook.distill`` applies the same defaults; then ``snapready hash`` on a manifest and the webhook
on the admitted pod compute the same fingerprint. Only defaults that land in a distilled field are
here. Sources (kubernetes/kubernetes): ``pkg/apis/core/v1/defaults.go`` (``SetDefaults_*``), the
generated walker ``pkg/apis/core/v1/zz_generated.defaults.go`` (which also applies the declarative
``+default=`` markers of ``staging/src/k8s.io/api/core/v1/types.go``). The same defaulters run for
Pods and for the pod templates of apps/v1 and batch/v1 controllers.

Checked against the captured reviews (``tests/data/reviews/``): review 03 (user manifest in its
``last-applied-configuration`` annotation) and review 13 (a Deployment template) show the
container, port, ``dnsPolicy``, pod ``securityContext`` and ``httpGet`` defaults; the
service-account volume shows ``defaultMode: 420`` and ``fieldRef.apiVersion: v1``. The
volume-source defaults for configMap, secret, hostPath, emptyDir, iSCSI, RBD, Azure Disk, ScaleIO
and ephemeral claims are not in any capture and rest on the source alone.

Every function works on a canonical copy owned by the caller (``webhook.distill``), after empty
values were dropped, so "absent" is the only unset state and ``setdefault`` matches Go's
``if obj.X == "" / == nil`` checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from webhook.types import RawObject

TERMINATION_MESSAGE_PATH: Final = "/dev/termination-log"
"""``v1.TerminationMessagePathDefault``."""
DEFAULT_FILE_MODE: Final = 420
"""0644 octal: ``v1.{ConfigMap,Secret,DownwardAPI,Projected}VolumeSourceDefaultMode``."""

# Per-volume-source scalar defaults: {source key: {field: default}}.
_VOLUME_SOURCE_DEFAULTS: Final[Mapping[str, Mapping[str, Any]]] = {
    # SetDefaults_ConfigMapVolumeSource / SetDefaults_SecretVolumeSource /
    # SetDefaults_DownwardAPIVolumeSource / SetDefaults_ProjectedVolumeSource: DefaultMode 0644.
    "configMap": {"defaultMode": DEFAULT_FILE_MODE},
    "secret": {"defaultMode": DEFAULT_FILE_MODE},
    "downwardAPI": {"defaultMode": DEFAULT_FILE_MODE},
    "projected": {"defaultMode": DEFAULT_FILE_MODE},
    # SetDefaults_HostPathVolumeSource: Type = HostPathUnset ("").
    "hostPath": {"type": ""},
    # ISCSIVolumeSource.iscsiInterface `+default="default"` (was SetDefaults_ISCSIVolumeSource).
    "iscsi": {"iscsiInterface": "default"},
    # RBDVolumeSource pool/user/keyring `+default=` markers (was SetDefaults_RBDVolumeSource).
    "rbd": {"pool": "rbd", "user": "admin", "keyring": "/etc/ceph/keyring"},
    # AzureDiskVolumeSource `+default=` markers (was SetDefaults_AzureDiskVolumeSource).
    "azureDisk": {
        "cachingMode": "ReadWrite",
        "fsType": "ext4",
        "readOnly": False,
        "kind": "Shared",
    },
    # ScaleIOVolumeSource `+default=` markers (was SetDefaults_ScaleIOVolumeSource).
    "scaleIO": {"storageMode": "ThinProvisioned", "fsType": "xfs"},
}


def default_pod_spec(spec: RawObject) -> None:
    """Pod-level defaults (``SetDefaults_PodSpec``): ``dnsPolicy: ClusterFirst``,
    ``securityContext: {}``.

    ``restartPolicy``, ``terminationGracePeriodSeconds`` and ``schedulerName`` are defaulted there
    too but are not distilled.
    """
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})


def default_container(container: RawObject) -> None:
    """Container defaults, for app and init containers alike.

    - ``SetDefaults_Container``: ``terminationMessagePath: /dev/termination-log``,
      ``terminationMessagePolicy: File`` (``imagePullPolicy`` too, not distilled).
    - ``ContainerPort.protocol`` ``+default="TCP"`` (inline in ``SetObjectDefaults_Pod``).
    - ``SetDefaults_HTTPGetAction`` on ``lifecycle.postStart/preStop.httpGet``: ``path: /``,
      ``scheme: HTTP``.
    """
    container.setdefault("terminationMessagePath", TERMINATION_MESSAGE_PATH)
    container.setdefault("terminationMessagePolicy", "File")
    for port in _dicts(container.get("ports")):
        port.setdefault("protocol", "TCP")
    lifecycle = container.get("lifecycle")
    if isinstance(lifecycle, dict):
        for handler in (lifecycle.get("postStart"), lifecycle.get("preStop")):
            http_get = handler.get("httpGet") if isinstance(handler, dict) else None
            if isinstance(http_get, dict):
                http_get.setdefault("path", "/")
                http_get.setdefault("scheme", "HTTP")


def default_volume(volume: RawObject) -> None:
    """Volume defaults; ``volume`` holds ``name`` and (at most) one source key.

    - ``SetDefaults_Volume``: a volume with no source becomes ``emptyDir: {}``.
    - scalar source defaults from ``_VOLUME_SOURCE_DEFAULTS``.
    - ``SetDefaults_ObjectFieldSelector``: ``fieldRef.apiVersion: v1`` in downwardAPI items, also
      inside projected sources.
    - ``SetDefaults_ServiceAccountTokenProjection``: ``expirationSeconds: 3600`` (one hour).
    - ``SetDefaults_PersistentVolumeClaimSpec``: ``volumeMode: Filesystem`` in an ephemeral volume's
      claim template.
    """
    if all(key == "name" for key in volume):
        volume["emptyDir"] = {}
    for source_key, defaults in _VOLUME_SOURCE_DEFAULTS.items():
        source = volume.get(source_key)
        if isinstance(source, dict):
            for field, value in defaults.items():
                source.setdefault(field, value)
    _default_field_refs(volume.get("downwardAPI"))
    projected = volume.get("projected")
    if isinstance(projected, dict):
        for source in _dicts(projected.get("sources")):
            _default_field_refs(source.get("downwardAPI"))
            token = source.get("serviceAccountToken")
            if isinstance(token, dict):
                token.setdefault("expirationSeconds", 3600)
    ephemeral = volume.get("ephemeral")
    template = ephemeral.get("volumeClaimTemplate") if isinstance(ephemeral, dict) else None
    claim_spec = template.get("spec") if isinstance(template, dict) else None
    if isinstance(claim_spec, dict):
        claim_spec.setdefault("volumeMode", "Filesystem")


def _default_field_refs(downward: Any) -> None:
    """``fieldRef.apiVersion: v1`` on every item of a downwardAPI source."""
    if not isinstance(downward, dict):
        return
    for item in _dicts(downward.get("items")):
        field_ref = item.get("fieldRef")
        if isinstance(field_ref, dict):
            field_ref.setdefault("apiVersion", "v1")


def _dicts(value: Any) -> list[RawObject]:
    """The dict items of ``value`` if it is a list, else ``[]``."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
