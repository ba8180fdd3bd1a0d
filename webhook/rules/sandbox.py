"""GKE Sandbox rules: ``gvisor-runtime``, ``sandbox-compat`` and ``init-emptydir``.

Pod snapshots run only in GKE Sandbox (``spec.runtimeClassName: gvisor``;
docs/gke-facts.md#section-1), and a sandboxed pod cannot use what gVisor does not offer: privileged
containers and hostPath volumes are rejected (deny by default); host namespaces and hostPort are
limited (warn by default). Severities per feature come from ``settings.rules.sandbox_compat``. These
rules hold for ``rootfs-only`` policies too: the snapshot is still taken by gVisor.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from webhook.base.keys import HELPERS_NAME, LEGACY_HELPERS_COMMAND
from webhook.base.sections import SandboxFeature
from webhook.base.types import Finding
from webhook.pod.context import PodContext, indexed_dicts, list_of_dicts
from webhook.pod.emptydirs import ownerless_mounts
from webhook.rules.constraints import fit

_MESSAGES: dict[SandboxFeature, str] = {
    "privileged": "privileged containers cannot run in GKE Sandbox; drop privileged: true "
    "(add only the capabilities you need)",
    "hostPath": "hostPath volumes are not available in GKE Sandbox; use emptyDir, a ConfigMap "
    "or a PersistentVolumeClaim",
    "hostNetwork": "GKE Sandbox restricts host namespaces and a restore gets a new network; "
    "drop hostNetwork, use pod networking",
    "hostPID": "GKE Sandbox restricts host namespaces; drop hostPID",
    "hostIPC": "GKE Sandbox restricts host namespaces; drop hostIPC",
    "hostPort": "hostPort binds the node, not the sandbox, and is not restored; use a Service",
}


class GvisorRuntime:
    """``gvisor-runtime``: ``spec.runtimeClassName`` must be one of the configured gVisor names.

    Source: GKE Pod snapshots require GKE Sandbox (RuntimeClass ``gvisor``).
    """

    rule_ids: tuple[str, ...] = ("gvisor-runtime",)

    def __call__(self, pod: PodContext) -> Iterable[Finding]:
        """One deny finding at ``spec.runtimeClassName`` when it is absent or not gVisor."""
        names = pod.settings.rules.runtime_class_names
        runtime = pod.spec.get("runtimeClassName")
        if runtime in names:
            return []
        now = "is not set" if runtime in (None, "") else "is not a GKE Sandbox runtime"
        message = f"runtimeClassName {now}; set it to {' or '.join(names)} (GKE Sandbox)"
        return [Finding(pod.spec_field("runtimeClassName"), "gvisor-runtime", message)]


def _finding(ctx: PodContext, feature: SandboxFeature, path: str) -> Iterator[Finding]:
    severity = ctx.settings.rules.sandbox_compat.get(feature, "deny")
    if severity != "off":
        yield Finding(path, "sandbox-compat", _MESSAGES[feature], severity)


def container_findings(
    ctx: PodContext, containers: Iterable[tuple[str, int, dict[str, Any]]]
) -> Iterator[Finding]:
    """Privileged and hostPort findings for ``(list name, index, container)`` triples."""
    for kind, index, container in containers:
        security = container.get("securityContext")
        if isinstance(security, dict) and security.get("privileged") is True:
            path = ctx.spec_field(kind, index, "securityContext", "privileged")
            yield from _finding(ctx, "privileged", path)
        for port_index, port in indexed_dicts(container.get("ports")):
            if port.get("hostPort"):
                path = ctx.spec_field(kind, index, "ports", port_index, "hostPort")
                yield from _finding(ctx, "hostPort", path)


def _pod_containers(ctx: PodContext) -> Iterator[tuple[str, int, dict[str, Any]]]:
    for kind in ("initContainers", "containers"):
        for index, container in ctx.indexed(kind):
            yield kind, index, container


class SandboxCompat:
    """``sandbox-compat``: pod features GKE Sandbox does not support (per-feature severity).

    Source: GKE Sandbox limitations (privileged, hostPath, host namespaces, hostPort).
    """

    rule_ids: tuple[str, ...] = ("sandbox-compat",)

    def __call__(self, pod: PodContext) -> Iterable[Finding]:
        """Findings at each offending field: containers, volumes and pod-level host flags."""
        yield from container_findings(pod, _pod_containers(pod))
        for index, volume in pod.indexed("volumes"):
            if "hostPath" in volume:
                yield from _finding(pod, "hostPath", pod.spec_field("volumes", index, "hostPath"))
        for feature in ("hostNetwork", "hostPID", "hostIPC"):
            if pod.spec.get(feature) is True:
                yield from _finding(pod, feature, pod.spec_field(feature))


class EphemeralCompat:
    """``sandbox-compat`` for ``pods/ephemeralcontainers`` updates: only containers ADDED
    relative to the old pod (by name) are judged, so existing debug containers do not block.
    """

    rule_ids: tuple[str, ...] = ("sandbox-compat",)

    def __init__(self, old_pod: Any) -> None:
        """``old_pod``: ``request.oldObject`` (None or malformed counts as no containers)."""
        spec = old_pod.get("spec") if isinstance(old_pod, dict) else None
        self.old_spec: dict[str, Any] = spec if isinstance(spec, dict) else {}

    def __call__(self, pod: PodContext) -> Iterable[Finding]:
        """Privileged/hostPort findings at ``spec.ephemeralContainers[i]`` of added containers."""
        old = list_of_dicts(self.old_spec.get("ephemeralContainers"))
        before = {name for c in old if isinstance(name := c.get("name"), str)}
        # A container whose name is not a string cannot match an old one: judge it as added.
        added = [
            ("ephemeralContainers", index, container)
            for index, container in pod.indexed("ephemeralContainers")
            if not isinstance(container.get("name"), str) or container["name"] not in before
        ]
        return list(container_findings(pod, added))


INIT_EMPTYDIR_RULE = "init-emptydir"


class InitEmptyDir:
    """``init-emptydir`` (warn): a run-to-completion init container is the first container of
    the pod to mount an emptyDir, so gVisor cannot restore the pod (``pod.emptydirs``, which
    gives the source: gVisor's ``configureRestore`` in GKE's pod layout, shown with runsc in
    ``tests/gvisor/test_pod_sandbox.py``). Not for ``rootfs-only`` policies, whose restores load
    no memory, nor for an emptyDir the pod forces to stay a host bind mount. The restore
    prediction says ``miss`` for such a pod even when a snapshot matches (``pod.restore``).
    """

    rule_ids: tuple[str, ...] = (INIT_EMPTYDIR_RULE,)

    def __call__(self, pod: PodContext) -> Iterable[Finding]:
        """One warning per emptyDir at its first mount, when an init container without
        ``restartPolicy: Always`` makes it (containers are taken in the kubelet's start order:
        init containers, then app containers)."""
        if pod.rootfs_only:
            return
        annotations = pod.metadata.get("annotations")
        for found in ownerless_mounts(
            pod.indexed("initContainers"),
            pod.indexed("containers"),
            pod.items("volumes"),
            annotations if isinstance(annotations, dict) else {},
        ):
            path = pod.spec_field("initContainers", found.index, "volumeMounts", found.mount_index)
            message = _init_message(INIT_EMPTYDIR_RULE, path, found.container, found.volume)
            yield Finding(path, INIT_EMPTYDIR_RULE, message, "warn")


def _init_message(rule: str, path: str, container: dict[str, Any], volume: str) -> str:
    """The fix first, in the longest wording that fits: the API server cuts a warning at 256
    characters, rule and path included (``constraints.fit``). Our own older run-to-completion
    container (``HELPERS_NAME`` running ``LEGACY_HELPERS_COMMAND``) gets its own advice; a user's
    container of that name (injection off, or offline ``check``) gets the general one."""
    name = container.get("name")
    if name == HELPERS_NAME and container.get("command") == list(LEGACY_HELPERS_COMMAND):
        return fit(
            rule,
            path,
            f"remove the {HELPERS_NAME!r} init container and volume (copied from a pod an older "
            "snapready admitted): the webhook then injects its sidecar, which a restore brings "
            "back; this one will have exited at the checkpoint, so gVisor cannot restore the pod",
            f"remove the {HELPERS_NAME!r} init container and volume (from an older snapready): "
            "gVisor cannot restore the pod",
        )
    return fit(
        rule,
        path,
        f"mount emptyDir {volume!r} first in a native sidecar that keeps running (restartPolicy: "
        f"Always, before {name!r}): init container {name!r} mounts it first and will have "
        "exited at the checkpoint, so gVisor cannot restore the pod",
        f"mount emptyDir {volume!r} first in a native sidecar that keeps running: {name!r} "
        "exits before the checkpoint, so gVisor cannot restore the pod",
        f"mount this emptyDir first in a native sidecar that keeps running, before {name!r}: "
        "gVisor cannot restore the pod",
        "mount this emptyDir first in a native sidecar that keeps running: gVisor cannot "
        "restore the pod",
    )
