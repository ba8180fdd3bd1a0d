"""Helper-file injection: the ``snapready-helpers`` volume, native sidecar and read-only mounts.

Contract with the image (Dockerfile target ``helpers``): a busybox-based image that holds exactly
the two files of ``webhook/assets/helpers/`` (``rehydrate``, mode 0755, and
``snapready_rehydrate.py``) in ``/opt/snapready/helpers/``. The injected container is a native
sidecar (the first init container, ``restartPolicy: Always``) whose command copies the files into
the emptyDir ``snapready-helpers`` (each through a temporary name and a rename) and then waits,
doing nothing, until the pod ends. Every app container and every other native sidecar mounts the
emptyDir read-only at ``/snapready``; existing init containers keep their order.

Why a sidecar and not a run-to-completion init container: a GKE Pod snapshot holds the pod's
emptyDirs inside the gVisor sandbox (GKE Sandbox's admission hints them as pod-shared tmpfs and
its runsc shim fills in the kubelet's folder, ``pkg/shim/v1/utils/volumes.go``), and runsc files
that tmpfs under the name of the first container that mounted it (``runsc/boot/vfs.go
configureRestore``). A restore brings back only the containers that were running at the
checkpoint (containerd deletes an exited container's task), so with an init container as the
first mounter the restore failed (``Memory file for "snapready-helpers:/snapready" not found``):
``tests/gvisor/test_pod_sandbox.py`` shows it with runsc itself. The sidecar is still running at
the checkpoint and restored with the pod.

Why no ``postStart`` hook or startup probe (either would make the kubelet start the app
containers only once the copy is done): the kubelet does not know a pod is being restored and
runs them on the restored sidecar, but runsc resumes a sandbox only when its last container is
restored and refuses an exec before that (``container ... not started``), and the kubelet would
not create the app containers until the hook returned. So on a first start an app container
could in principle reach ``/snapready`` before the copy (a few milliseconds for two small files;
creating and starting the next container takes longer): it would then fail once and be
restarted by the kubelet.

Everything injected is part of the fingerprint (docs/gke-facts.md#section-3: volumes, init
containers, mounts, securityContext are hashed), so every value here is a constant or comes from
settings: changing any of them changes every fingerprint and orphans existing snapshots. The
sidecar carries the fields the API server would otherwise default (``imagePullPolicy``,
``terminationMessagePath/Policy``) so that what we hash is what gets stored, and so that a
reinvocation recognises its own output by equality.
"""

from __future__ import annotations

import posixpath
from typing import Any

from webhook.base.config import Settings
from webhook.base.keys import HELPERS_NAME, INJECT, LEGACY_HELPERS_COMMAND
from webhook.base.types import RawObject
from webhook.kube.token_volume import SERVICE_ACCOUNT_VOLUME_PREFIX
from webhook.mutation.patch import Draft
from webhook.pod.context import PodContext, indexed_dicts

MOUNT_PATH = "/snapready"
"""Where the helpers appear in every app container (reserved)."""
IMAGE_HELPERS_DIR = "/opt/snapready/helpers"
"""Directory of the helper files inside the helpers image (Dockerfile target ``helpers``)."""
COPY_SCRIPT = (
    "set -e; "
    f"for f in {IMAGE_HELPERS_DIR}/*; do n=${{f##*/}}; "
    f'cp "$f" "{MOUNT_PATH}/.$n.new"; mv -f "{MOUNT_PATH}/.$n.new" "{MOUNT_PATH}/$n"; done'
)
"""The copy (busybox sh): each file through a temporary name and a rename, so a process that
already runs a helper keeps reading the file it opened (a rename replaces the name, not the
file) when the copy runs again after a sidecar restart. A failed copy ends the sidecar (the
kubelet restarts it), where it can be seen."""
HOLD_SCRIPT = "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"
"""Then wait for the pod to end. The shell is the container's PID 1, which the kernel sends no
signal it has not asked for: the trap lets SIGTERM end it at once instead of at the end of the
grace period."""
SIDECAR_COMMAND = ("/bin/sh", "-c", f"{COPY_SCRIPT}; set +e; {HOLD_SCRIPT}")
"""The sidecar's command: copy, then wait."""
RESOURCES = {"cpu": "50m", "memory": "16Mi"}
"""Requests and limits of the sidecar (equal, so a Guaranteed pod stays Guaranteed). A native
sidecar's resources count for the pod's whole life (added to the app containers'); a sleeping
busybox shell and a copy of two small files need a few MiB, and the CPU limit keeps the copy
from being throttled where the limit is enforced per container (runc)."""
NONROOT_ID = 65532
"""The conventional "nonroot" uid/gid of distroless images: busybox would otherwise run as root,
which ``runAsNonRoot`` refuses. The emptyDir is created world-writable (mode 0777)."""


SA_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where the ServiceAccount plugin mounts the API token (``DefaultAPITokenMountPath``)."""
HELPERS_INIT_MOUNT = {"name": HELPERS_NAME, "mountPath": MOUNT_PATH}
"""The sidecar's (writable) mount of the helpers volume."""


def helpers_volume() -> RawObject:
    """The injected volume: ``{"name": "snapready-helpers", "emptyDir": {}}``."""
    return {"name": HELPERS_NAME, "emptyDir": {}}


def helpers_mount() -> RawObject:
    """The read-only mount added to every app container and native sidecar."""
    return {"name": HELPERS_NAME, "mountPath": MOUNT_PATH, "readOnly": True}


def token_mount(volumes: Any) -> RawObject | None:
    """The service-account token mount the API server's ServiceAccount plugin would add to our
    sidecar, or None when the pod has no token volume (``automountServiceAccountToken``
    false).

    The plugin (k8s.io/kubernetes plugin/pkg/admission/serviceaccount ``mountServiceAccountToken``)
    runs before webhooks and again after a webhook changed the pod: it mounts the first volume
    named ``kube-api-access-*`` at ``/var/run/secrets/kubernetes.io/serviceaccount`` (read-only)
    in every container lacking a mount there. Giving our sidecar that mount up front
    leaves the re-run nothing to add, so the API server does not call the mutating webhooks a
    second time (``reinvocationPolicy: IfNeeded``). The end state is the one the plugin produces
    anyway, and the token volume and its mounts are not part of the fingerprint
    (``webhook.pod.distill``).
    """
    for _, volume in indexed_dicts(volumes):
        name = volume.get("name")
        if isinstance(name, str) and name.startswith(SERVICE_ACCOUNT_VOLUME_PREFIX):
            return {"name": name, "readOnly": True, "mountPath": SA_MOUNT_PATH}
    return None


def init_container(image: str, token: RawObject | None = None) -> RawObject:
    """The injected native sidecar for ``image`` (fixed, restricted-PSS securityContext), with
    the service-account ``token`` mount when the pod has one (``token_mount``); its command
    copies the helpers, then waits (``SIDECAR_COMMAND``)."""
    return {
        "name": HELPERS_NAME,
        "image": image,
        "restartPolicy": "Always",
        "command": list(SIDECAR_COMMAND),
        "resources": {"limits": dict(RESOURCES), "requests": dict(RESOURCES)},
        "volumeMounts": [dict(HELPERS_INIT_MOUNT), *([dict(token)] if token else [])],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
            "runAsGroup": NONROOT_ID,
            "runAsNonRoot": True,
            "runAsUser": NONROOT_ID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }


def injection_wanted(metadata: RawObject, settings: Settings) -> bool:
    """False when injection is off in settings or the pod says ``<prefix>inject: "false"``."""
    if not settings.injection.enabled:
        return False
    annotations = metadata.get("annotations")
    value = annotations.get(settings.annotation(INJECT)) if isinstance(annotations, dict) else None
    return not (isinstance(value, str) and value.strip().lower() == "false")


def is_ours(existing: Any, desired: Any) -> bool:
    """Whether ``existing`` holds everything of ``desired`` (our volume or one of our mounts).

    Maps: every key of ``desired`` holds a matching value, extra keys tolerated (a field the
    API server or another webhook adds, e.g. ``subPathExpr: ""``); an empty map matches only an
    empty map (``emptyDir: {}`` is not ``emptyDir: {medium: Memory}``). Anything else: equal.
    """
    if isinstance(desired, dict):
        if not desired:
            return bool(existing == {})
        return isinstance(existing, dict) and all(
            key in existing and is_ours(existing[key], value) for key, value in desired.items()
        )
    return bool(existing == desired)


def is_our_init_container(container: RawObject) -> bool:
    """Whether ``container`` is the sidecar we inject: our name, our command and our volume
    mounted at ``/snapready``.

    Nothing else is compared, because other admission steps legitimately rewrite the rest of it
    between our first call and a reinvocation: the API server re-runs its built-in mutating
    plugins after a webhook mutates (AlwaysPullImages sets ``imagePullPolicy: Always``, the
    ServiceAccount plugin adds its token mount, LimitRanger adds resources), and other webhooks
    rewrite images (registry mirrors) or harden ``securityContext`` (policy engines). A user
    container that happens to share the reserved name will not also run our exact command into
    our volume; one copied from an admitted pod is ours. This is a guard against accidental
    clashes, not a security boundary: the rule table judges this container like any other.
    """
    mounts = container.get("volumeMounts")
    return (
        container.get("name") == HELPERS_NAME
        and _our_command(container)
        and isinstance(mounts, list)
        and any(is_ours(mount, HELPERS_INIT_MOUNT) for mount in mounts)
    )


def _our_command(container: RawObject) -> bool:
    """Our sidecar's command with ``restartPolicy: Always``, or the older run-to-completion copy
    without it: a pod copied from one an earlier version admitted is ours (not a
    ``helper-collision``; ``init-emptydir`` says to remove it), but the older command made a
    sidecar would restart for ever: not ours."""
    sidecar = container.get("restartPolicy") == "Always"
    command = container.get("command")
    return command == list(SIDECAR_COMMAND if sidecar else LEGACY_HELPERS_COMMAND)


def has_named(items: Any) -> bool:
    """Whether the list ``items`` holds an object named ``snapready-helpers``."""
    return any(item.get("name") == HELPERS_NAME for _, item in indexed_dicts(items))


def at_mount_path(mount: RawObject) -> bool:
    """Whether ``mount`` targets ``/snapready`` (``/snapready/`` and ``/snapready/.`` too)."""
    path = mount.get("mountPath")
    return isinstance(path, str) and posixpath.normpath(path) == MOUNT_PATH


def collisions(ctx: PodContext) -> list[str]:
    """Every user object that would collide with the injection, as ``path: problem`` lines.

    Objects that hold what we inject (``is_ours``, ``is_our_init_container``) are not
    collisions. Mounts count only where we add ours: app containers and native sidecars; a
    run-to-completion init container may mount its own volume at ``/snapready``.
    """
    spec = ctx.spec
    found: list[str] = []
    for index, volume in indexed_dicts(spec.get("volumes")):
        if volume.get("name") == HELPERS_NAME and not is_ours(volume, helpers_volume()):
            found.append(f"{ctx.spec_field('volumes', index)}: volume name {HELPERS_NAME!r}")
    for list_name in ("containers", "initContainers"):
        for index, container in indexed_dicts(spec.get(list_name)):
            ours = list_name == "initContainers" and is_our_init_container(container)
            if container.get("name") == HELPERS_NAME and not ours:
                found.append(f"{ctx.spec_field(list_name, index)}: container name {HELPERS_NAME!r}")
            if ours or not gets_mount(list_name, container):
                continue
            for mount_index, mount in indexed_dicts(container.get("volumeMounts")):
                if at_mount_path(mount) and not is_ours(mount, helpers_mount()):
                    where = ctx.spec_field(list_name, index, "volumeMounts", mount_index)
                    found.append(f"{where}: mountPath {MOUNT_PATH}")
    return found


def gets_mount(list_name: str, container: RawObject) -> bool:
    """Whether we mount the helpers into this container: every app container and every native
    sidecar (an init container with ``restartPolicy: Always``), not run-to-completion ones."""
    return list_name == "containers" or container.get("restartPolicy") == "Always"


def inject_helpers(draft: Draft, ctx: PodContext) -> bool:
    """Add the volume, the sidecar (first init container) and the read-only mounts that are
    missing (our sidecar has its writable mount at ``/snapready``, so it gets no second one).

    Call only after ``collisions`` found nothing: an existing object of our name is then ours.
    """
    changed = False
    if not has_named(draft.get("spec", "volumes")):
        changed |= draft.extend(("spec", "volumes"), [helpers_volume()])
    if not has_named(draft.get("spec", "initContainers")):
        image = ctx.settings.injection.helpers_image
        token = token_mount(draft.get("spec", "volumes"))
        changed |= draft.insert(("spec", "initContainers"), 0, init_container(image, token))
    for list_name in ("containers", "initContainers"):
        for index, container in indexed_dicts(draft.get("spec", list_name)):
            if not gets_mount(list_name, container):
                continue
            mounts = indexed_dicts(container.get("volumeMounts"))
            if not any(at_mount_path(mount) for _, mount in mounts):
                path = ("spec", list_name, index, "volumeMounts")
                changed |= draft.extend(path, [helpers_mount()])
    return changed
