"""EmptyDirs a restore cannot bring back: those a run-to-completion init container mounts first.

Source: gVisor itself (``gvisor.dev/gvisor`` as pinned in ``gvisor/go.mod``), in the pod layout of
GKE: GKE's runsc shim keeps a pod's emptyDirs inside the sandbox as pod-shared tmpfs
(``pkg/shim/v1/utils/volumes.go``), runsc files each one under the name of the first container that
mounted it (``runsc/boot/vfs.go configureRestore``), and a restore brings back only the containers
still running at the checkpoint (containerd deletes an exited container's task). An init container
that has exited leaves its emptyDir without an owner: runsc refuses the restore (``Memory file for
"<init>:<path>" not found``), disk or memory medium, whether or not app containers use the volume;
a native sidecar mounting it first does not (``tests/gvisor/test_pod_sandbox.py``,
``docs/concepts/helpers.md``). A failed restore crash-loops, with no cold-start fallback
(docs/gke-facts.md#section-9). Not for an emptyDir the pod forces to stay a host bind mount
(``FORCE_SHARED_PREFIX``), and meaningless for ``rootfs-only`` policies (callers skip those: their
restores load no memory). Rule ``init-emptydir`` reports each such mount; ``pod.restore.predict``
turns a matching snapshot into a ``miss`` for such a pod. Pure module.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.base.text import clip
from webhook.base.types import RawObject, mapping
from webhook.pod.context import indexed_dicts, list_of_dicts

FORCE_SHARED_PREFIX = "dev.gvisor.empty-dir."
"""``dev.gvisor.empty-dir.<volume>.force-shared: "true"`` keeps an emptyDir a host bind mount
(GKE's runsc shim, ``emptyDirForceShared``): not in the sandbox, not filed under a container."""


@dataclass(frozen=True)
class OwnerlessMount:
    """The first mount of an emptyDir, made by a run-to-completion init container.

    Attributes:
        index: the init container's position in ``spec.initContainers`` as written
            (``PodContext.indexed``).
        mount_index: the mount's position in its ``volumeMounts`` as written.
        container: the init container (raw). volume: the emptyDir's name.
    """

    index: int
    mount_index: int
    container: RawObject
    volume: str


def go_true(value: Any) -> bool:
    """Go's ``strconv.ParseBool`` true, as GKE's shim reads the force-shared annotation."""
    return value in ("1", "t", "T", "TRUE", "true", "True")


def _may_own(init_containers: list[tuple[int, RawObject]]) -> bool:
    """Whether a run-to-completion init container mounts anything: most pods have none
    (snapready's own is a native sidecar), and are answered without a walk."""
    return any(
        c.get("restartPolicy") != "Always" and c.get("volumeMounts") for _, c in init_containers
    )


def ownerless_mounts(
    init_containers: list[tuple[int, RawObject]],
    containers: list[tuple[int, RawObject]],
    volumes: list[RawObject],
    annotations: Mapping[str, Any],
) -> Iterator[OwnerlessMount]:
    """Each emptyDir's first mount, when an init container without ``restartPolicy: Always``
    makes it, taking containers in the kubelet's start order (init containers, then app
    containers). Containers as ``indexed_dicts`` gives them (positions as written), volumes as
    ``list_of_dicts``; names that are not strings are skipped (the API server refuses them);
    ``_may_own`` answers most pods without a walk."""
    if not _may_own(init_containers):
        return
    pending = {
        name
        for volume in volumes
        if "emptyDir" in volume
        and isinstance(name := volume.get("name"), str)
        and not go_true(annotations.get(f"{FORCE_SHARED_PREFIX}{name}.force-shared"))
    }
    for kind, items in (("initContainers", init_containers), ("containers", containers)):
        for index, container in items:
            if not pending:
                return
            for mount_index, mount in indexed_dicts(container.get("volumeMounts")):
                volume = mount.get("name")
                if not isinstance(volume, str) or volume not in pending:
                    continue
                pending.discard(volume)
                if kind == "initContainers" and container.get("restartPolicy") != "Always":
                    yield OwnerlessMount(index, mount_index, container, volume)


def restore_blocker(spec: Mapping[str, Any], annotations: Mapping[str, Any]) -> str | None:
    """Why gVisor refuses to restore this pod even from a matching snapshot (its first
    ownerless emptyDir, one line), or None. ``spec``: the pod's spec (raw); ``annotations``:
    its annotations (the force-shared ones are read)."""
    inits = indexed_dicts(spec.get("initContainers"))
    if not _may_own(inits):
        return None  # the common case, before the other lists are built
    found = next(
        ownerless_mounts(
            inits,
            indexed_dicts(spec.get("containers")),
            list_of_dicts(spec.get("volumes")),
            annotations,
        ),
        None,
    )
    if found is None:
        return None
    name = found.container.get("name")
    return (
        f"init container {clip(name, 63)!r} mounts emptyDir {clip(found.volume, 63)!r} first and "
        "has exited by the checkpoint (init-emptydir)"
    )


def blocker_of(pod: Mapping[str, Any]) -> str | None:
    """``restore_blocker`` of a raw pod object (its spec and annotations; odd shapes: none)."""
    metadata = mapping(pod.get("metadata"))
    return restore_blocker(mapping(pod.get("spec")), mapping(metadata.get("annotations")))


ORIGIN = "origin"
"""``Refusal.by`` when the snapshot's origin pod is what gVisor cannot restore."""
NO_POD_CAN = "no pod can restore from it"
"""How ``Refusal.text`` says an origin's blocker (the rollout warning, the audit)."""
REFUSED = "gVisor cannot restore "
"""How every ``Refusal.reason`` begins: the leader tells a pod's refused match by its
``<prefix>restore-reason`` (``cluster.api.stamped_pods``)."""


@dataclass(frozen=True)
class Refusal:
    """Why gVisor refuses to restore a pod from a snapshot that matches it.

    Attributes:
        blocker: the ``restore_blocker`` sentence (one line, names clipped to 63).
        by: ``pod`` (the new pod's own init container) or ``origin`` (the snapshot's origin
            pod's, from its record: container ``restartPolicy`` is not in the distilled spec,
            so the two can differ while the fingerprints match, and either refuses).
        snapshot: the matching snapshot's name (clipped to 63).
    """

    blocker: str
    by: str
    snapshot: str

    def detail(self) -> str:
        """The blocker, and for an origin's, whose it is and what to do."""
        if self.by == ORIGIN:
            return f"its origin pod's {self.blocker}; delete that PodSnapshot"
        return self.blocker

    def text(self) -> str:
        """For a warning, after ``(<snapshot>): ``: ``detail``, saying for an origin's that no
        pod restores from that snapshot."""
        return f"{NO_POD_CAN}: {self.detail()}" if self.by == ORIGIN else self.blocker

    @property
    def reason(self) -> str:
        """The ``<prefix>restore-reason`` line."""
        if self.by == ORIGIN:
            return f"{REFUSED}snapshot {self.snapshot}: {self.detail()}"
        return f"{REFUSED}the pod: {self.blocker}; it matches snapshot {self.snapshot}"


def refusal(pod: str | None, origin: str | None, snapshot: str) -> Refusal | None:
    """Why gVisor cannot restore the pod from ``snapshot``, which matches it, or None.
    ``pod``: the new pod's ``restore_blocker``; ``origin``: the one the snapshot's record holds
    for its origin pod (None: none, or not known)."""
    if pod is not None:
        return Refusal(pod, "pod", clip(snapshot, 63))
    if origin is not None:
        return Refusal(origin, ORIGIN, clip(snapshot, 63))
    return None
