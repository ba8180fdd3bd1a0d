"""Kubernetes API-server defaulting for the fields the fingerprint hashes (pure, no I/O).

A manifest on disk lacks the values the API server fills in before any admission webhook runs, so
``webhook.pod.distill`` applies the same defaults; then ``snapready hash`` on a manifest and the
webhook on the admitted pod compute the same fingerprint. Only defaults that land in a distilled
field are here. Sources (kubernetes/kubernetes): ``pkg/apis/core/v1/defaults.go``
(``SetDefaults_*``), the generated walker ``pkg/apis/core/v1/zz_generated.defaults.go`` (which also
applies the declarative ``+default=`` markers of ``staging/src/k8s.io/api/core/v1/types.go``). The
same defaulters run for Pods and for the pod templates of apps/v1 and batch/v1 controllers.

Checked against the captured reviews (``tests/data/reviews/``): review 03 (user manifest in its
``last-applied-configuration`` annotation) and review 13 (a Deployment template) show the
container, port, ``dnsPolicy``, pod ``securityContext`` and ``httpGet`` defaults; the
service-account volume shows ``defaultMode: 420`` and ``fieldRef.apiVersion: v1``. The
volume-source defaults for configMap, secret, hostPath, emptyDir, iSCSI, RBD, Azure Disk, ScaleIO
and ephemeral claims are not in any capture and rest on the source alone.

Quantities in volume sources (``emptyDir.sizeLimit``, downwardAPI ``resourceFieldRef.divisor``,
an ephemeral claim template's ``resources``) are written as the API server writes them back
(``webhook.kube.quantity_canonical.canonical_quantity``: ``1024Mi`` becomes ``1Gi``); on a pod the
API server already encoded they are left as they are.

Every function works on a canonical copy owned by the caller (``webhook.pod.distill``), after empty
values were dropped, so "absent" is the only unset state and ``setdefault`` matches Go's
``if obj.X == "" / == nil`` checks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from webhook.base.types import RawObject
from webhook.kube.quantity_canonical import canonical_quantity

ZERO_QUANTITY: Final = "0"
"""How the API server writes a Quantity struct left unset (``resourceFieldRef.divisor``)."""
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
    - ``resourceFieldRef.divisor`` in those items: ``ResourceFieldSelector.Divisor`` is a
      ``resource.Quantity`` struct (not a pointer), which encoding/json never omits, so the API
      server writes an unset divisor as ``"0"`` (``Quantity.MarshalJSON`` of the zero value).
    - ``SetDefaults_ServiceAccountTokenProjection``: ``expirationSeconds: 3600`` (one hour).
    - ``SetDefaults_PersistentVolumeClaimSpec``: ``volumeMode: Filesystem`` in an ephemeral volume's
      claim template; ``SetDefaults_ResourceList`` rounds its ``resources.requests``/``limits``
      up to 1m (``Quantity.RoundUp(-3)``).
    - Quantities (``emptyDir.sizeLimit``, ``divisor``, the claim template's resources) in the form
      the API server writes them (``webhook.kube.quantity_canonical.canonical_quantity``).
    - ``SetDefaults_Volume`` for image volumes (KEP-4639, feature gate ``ImageVolume``, which an
      image volume in a pod implies): ``image.pullPolicy`` is ``Always`` when
      ``parsers.ParseImageName(reference)`` yields the tag ``latest`` (explicit, or no tag and no
      digest), else ``IfNotPresent`` (also for a reference that does not parse).
    """
    if all(key == "name" for key in volume):
        volume["emptyDir"] = {}
    for source_key, source in volume.items():  # a volume has one source: look up only its keys
        defaults = _VOLUME_SOURCE_DEFAULTS.get(source_key)
        if defaults is not None and isinstance(source, dict):
            for field, value in defaults.items():
                source.setdefault(field, value)
    empty_dir = volume.get("emptyDir")
    if isinstance(empty_dir, dict) and "sizeLimit" in empty_dir:
        empty_dir["sizeLimit"] = canonical_quantity(empty_dir["sizeLimit"])
    _default_downward_items(volume.get("downwardAPI"))
    projected = volume.get("projected")
    if isinstance(projected, dict):
        for source in _dicts(projected.get("sources")):
            _default_downward_items(source.get("downwardAPI"))
            token = source.get("serviceAccountToken")
            if isinstance(token, dict):
                token.setdefault("expirationSeconds", 3600)
    ephemeral = volume.get("ephemeral")
    template = ephemeral.get("volumeClaimTemplate") if isinstance(ephemeral, dict) else None
    claim_spec = template.get("spec") if isinstance(template, dict) else None
    if isinstance(claim_spec, dict):
        claim_spec.setdefault("volumeMode", "Filesystem")
        resources = claim_spec.get("resources")
        if isinstance(resources, dict):
            for key in ("limits", "requests"):
                _round_resource_list(resources.get(key))
    image = volume.get("image")
    if isinstance(image, dict) and "pullPolicy" not in image:
        image["pullPolicy"] = image_pull_policy(image.get("reference"))


def _default_downward_items(downward: Any) -> None:
    """``fieldRef.apiVersion: v1`` and ``resourceFieldRef.divisor`` on every downwardAPI item."""
    if not isinstance(downward, dict):
        return
    for item in _dicts(downward.get("items")):
        field_ref = item.get("fieldRef")
        if isinstance(field_ref, dict):
            field_ref.setdefault("apiVersion", "v1")
        resource_ref = item.get("resourceFieldRef")
        if isinstance(resource_ref, dict):
            resource_ref["divisor"] = canonical_quantity(resource_ref.get("divisor", ZERO_QUANTITY))


def _round_resource_list(resources: Any) -> None:
    """``SetDefaults_ResourceList`` and the written form on a ResourceList's values."""
    if isinstance(resources, dict):
        for name, value in resources.items():
            resources[name] = canonical_quantity(value, round_up_to_milli=True)


def image_pull_policy(reference: Any) -> str:
    """The pull policy Kubernetes defaults for an image ``reference`` (container
    ``imagePullPolicy`` and image volume ``pullPolicy`` alike): ``Always`` for the tag ``latest``,
    explicit or implied, else ``IfNotPresent``.

    Source: ``SetDefaults_Container`` / ``SetDefaults_Volume`` (pkg/apis/core/v1/defaults.go) on
    ``parsers.ParseImageName`` (pkg/util/parsers), which ignores parse errors (tag ``""``, so
    ``IfNotPresent``). Never raises; a non-string reference counts as unparseable.
    """
    return "Always" if _image_tag(reference) == "latest" else "IfNotPresent"


# github.com/distribution/reference regexp.go, the grammar ParseNormalizedNamed checks.
_PATH_COMPONENT: Final = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_DOMAIN_COMPONENT: Final = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN_AND_PORT: Final = (
    rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[(?:[a-fA-F0-9:]+)\])(?::[0-9]+)?"
)
_REMOTE_NAME: Final = rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_REFERENCE: Final = re.compile(
    rf"((?:{_DOMAIN_AND_PORT}/)?{_REMOTE_NAME})"  # name
    r"(?::([\w][\w.-]{0,127}))?"  # tag
    r"(?:@([A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][0-9a-fA-F]{32,}))?",  # digest
    re.ASCII,
)
_ANCHORED_NAME: Final = re.compile(rf"(?:({_DOMAIN_AND_PORT})/)?({_REMOTE_NAME})", re.ASCII)
_IDENTIFIER: Final = re.compile(r"[a-f0-9]{64}")
# go-digest algorithms Kubernetes registers (pkg/util/parsers imports crypto/sha256, sha512).
_DIGEST_HEX_LENGTH: Final = {"sha256": 64, "sha384": 96, "sha512": 128}
_LOWER_HEX: Final = re.compile(r"[a-f0-9]+")


def _image_tag(reference: Any) -> str:
    """The tag ``parsers.ParseImageName`` returns: ``latest`` when there is neither a tag nor a
    digest, ``""`` on a parse error (``reference.ParseNormalizedNamed`` of
    github.com/distribution/reference, normalize.go and reference.go)."""
    if not isinstance(reference, str) or _IDENTIFIER.fullmatch(reference):
        return ""
    domain, slash, rest = reference.partition("/")
    if not slash:  # a familiar name such as "ubuntu:22.04"
        domain, remote = "docker.io", "library/" + reference
    elif domain == "index.docker.io":  # the legacy Docker Hub name
        domain, remote = "docker.io", rest
    elif domain == "localhost" or any(c in domain for c in ".:") or domain.lower() != domain:
        remote = rest
    else:
        domain, remote = "docker.io", reference
    if domain == "docker.io" and "/" not in remote:
        remote = "library/" + remote
    repository = remote.split(":", 1)[0]
    if repository.lower() != repository:
        return ""
    match = _REFERENCE.fullmatch(f"{domain}/{remote}")
    if match is None:
        return ""
    name, tag, digest = match.groups()
    name_match = _ANCHORED_NAME.fullmatch(name)
    path = name_match.group(2) if name_match else name
    if len(path) > 255:  # RepositoryNameTotalLengthMax
        return ""
    if digest is not None:
        algorithm, _, encoded = digest.partition(":")
        length = _DIGEST_HEX_LENGTH.get(algorithm)
        if length != len(encoded) or not _LOWER_HEX.fullmatch(encoded):
            return ""  # unsupported algorithm, wrong length or upper-case hex: a parse error
    if tag is None and digest is None:
        return "latest"
    return tag or ""


def _dicts(value: Any) -> list[RawObject]:
    """The dict items of ``value`` if it is a list, else ``[]``."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
