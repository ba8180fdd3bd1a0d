"""Ground truth for the fingerprint: does runsc restore a checkpoint into a changed pod?

One pod is checkpointed under runsc; for each row a copy of it with one field changed is mapped to
an OCI spec the way containerd does (``tests/gvisor/cri.py``) and restored from that checkpoint.
``runsc/specutils/restore.go`` refuses a restore whose spec differs in Args, Cwd, User,
Capabilities, Rlimits, Mounts, Root.Readonly, Terminal, Sysctl, Seccomp, the rest of Process and
Linux, or ``dev.gvisor.*`` annotations, and accepts changed Env, Hostname, cgroups path and
resources. snapready's fingerprint (``webhook.pod.distill.fingerprint``, what the webhook stamps
and ``snapready hash --no-inject`` prints) should differ exactly when runsc refuses.

Each row states the OCI field runsc names when it refuses (``None``: it restores) and whether the
fingerprint agrees. Where it cannot (``agrees=False``) GKE's documented field list hashes a field
that never reaches the OCI spec, or reaches it only where runsc does not look (mount sources, the
root path, the executable's directory): the fingerprint is stricter than gVisor there, never
looser. docs/concepts/fingerprint.md, carries this table.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.gvisor.cri import container_spec
from tests.support.gvisor import Rootfs, Runsc, crash_seen, debian_rootfs
from webhook.pod.distill import fingerprint

Pod = dict[str, Any]
BASE_IMAGE = "registry.example/app:1"
OTHER_IMAGE = "registry.example/app:2"


def base_pod() -> Pod:
    return {
        "metadata": {"name": "web-7d9f-abcde", "uid": "uid-a", "labels": {"app": "web"}},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": BASE_IMAGE,
                    "command": ["/bin/sh", "-c", "exec sleep 3600"],
                    "env": [{"name": "MODE", "value": "warm"}],
                    "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "64Mi"}},
                    "volumeMounts": [{"name": "settings", "mountPath": "/etc/settings"}],
                }
            ],
            "volumes": [{"name": "settings", "configMap": {"name": "settings-v1"}}],
        },
    }


@dataclass(frozen=True)
class Row:
    """One pod change: how to make it, the OCI field runsc refuses it on, and the agreement."""

    change: Callable[[Pod], None]
    refused_on: str | None
    agrees: bool = True


def container(pod: Pod) -> dict[str, Any]:
    first: dict[str, Any] = pod["spec"]["containers"][0]
    return first


def security(pod: Pod) -> dict[str, Any]:
    context: dict[str, Any] = container(pod).setdefault("securityContext", {})
    return context


def pod_security(pod: Pod) -> dict[str, Any]:
    context: dict[str, Any] = pod["spec"].setdefault("securityContext", {})
    return context


def set_in(get: Callable[[Pod], dict[str, Any]], key: str, value: Any) -> Callable[[Pod], None]:
    def change(pod: Pod) -> None:
        get(pod)[key] = value

    return change


def add_volume(pod: Pod) -> None:
    pod["spec"]["volumes"].append({"name": "cache", "emptyDir": {}})
    container(pod)["volumeMounts"].append({"name": "cache", "mountPath": "/cache"})


def mount_field(key: str, value: Any) -> Callable[[Pod], None]:
    return lambda pod: container(pod)["volumeMounts"][0].update({key: value})


def labels_and_probes(pod: Pod) -> None:
    pod["metadata"]["labels"]["version"] = "2"
    container(pod)["readinessProbe"] = {"exec": {"command": ["true"]}}


def nothing(pod: Pod) -> None:
    """Another replica: only the pod's name and uid differ (as for every restore)."""


ROWS: dict[str, Row] = {
    # --- runsc refuses, the fingerprint differs
    "command": Row(set_in(container, "command", ["/bin/sh", "-c", "exec sleep 7200"]), "Args"),
    "args": Row(set_in(container, "args", ["--verbose"]), "Args"),
    "workingDir": Row(set_in(container, "workingDir", "/tmp"), "Cwd"),
    "runAsUser": Row(set_in(security, "runAsUser", 1000), "User"),
    "pod supplementalGroups": Row(set_in(pod_security, "supplementalGroups", [2000]), "User"),
    "capabilities.add": Row(
        set_in(security, "capabilities", {"add": ["NET_ADMIN"]}), "Capabilities.Bounding"
    ),
    "capabilities.drop of a default": Row(
        set_in(security, "capabilities", {"drop": ["NET_RAW"]}), "Capabilities.Bounding"
    ),
    "allowPrivilegeEscalation false": Row(
        set_in(security, "allowPrivilegeEscalation", False), "Process"
    ),
    "volumeMounts: one more": Row(add_volume, "Mounts"),
    "volumeMounts: readOnly": Row(mount_field("readOnly", True), "Mounts"),
    "volumeMounts: mountPath": Row(mount_field("mountPath", "/etc/config"), "Mounts"),
    "volumeMounts: mountPropagation": Row(
        mount_field("mountPropagation", "HostToContainer"), "Mounts"
    ),
    "terminationMessagePath": Row(
        set_in(container, "terminationMessagePath", "/tmp/termination-log"), "Mounts"
    ),
    "readOnlyRootFilesystem": Row(
        set_in(security, "readOnlyRootFilesystem", True), "Root.Readonly"
    ),
    "tty": Row(set_in(container, "tty", True), "Terminal"),
    "pod sysctls": Row(
        set_in(pod_security, "sysctls", [{"name": "kernel.shm_rmid_forced", "value": "1"}]),
        "Sysctl",
    ),
    "seccompProfile RuntimeDefault": Row(
        set_in(security, "seccompProfile", {"type": "RuntimeDefault"}), "Seccomp"
    ),
    "dev.gvisor.* annotation": Row(
        lambda pod: (
            pod["metadata"]
            .setdefault("annotations", {})
            .update({"dev.gvisor.snapready.example": "1"})
        ),
        "Annotations",
    ),
    # --- runsc restores, the fingerprint is equal
    "another replica": Row(nothing, None),
    "env": Row(set_in(container, "env", [{"name": "MODE", "value": "cold"}]), None),
    "resources": Row(
        set_in(container, "resources", {"requests": {"cpu": "2"}, "limits": {"memory": "512Mi"}}),
        None,
    ),
    "pod name (hostname)": Row(
        lambda pod: pod["metadata"].update({"name": "web-7d9f-zzzzz"}), None
    ),
    "labels and probes": Row(labels_and_probes, None),
    # --- runsc restores, the fingerprint differs (stricter than gVisor)
    "image": Row(set_in(container, "image", OTHER_IMAGE), None, agrees=False),
    "command: same program, other directory": Row(
        set_in(container, "command", ["/usr/bin/sh", "-c", "exec sleep 3600"]), None, agrees=False
    ),
    "volume source (configMap name)": Row(
        lambda pod: pod["spec"]["volumes"][0].update({"configMap": {"name": "settings-v2"}}),
        None,
        agrees=False,
    ),
    "capabilities.drop of a non-default": Row(
        set_in(security, "capabilities", {"drop": ["SYS_ADMIN"]}), None, agrees=False
    ),
    "ports": Row(
        set_in(container, "ports", [{"containerPort": 8080, "protocol": "TCP"}]), None, False
    ),
    "stdin": Row(set_in(container, "stdin", True), None, agrees=False),
    "runAsNonRoot": Row(set_in(security, "runAsNonRoot", False), None, agrees=False),
}


@dataclass
class Checkpointed:
    runsc: Runsc
    image: Path
    images: dict[str, Rootfs]
    pods_dir: Path


@pytest.fixture(scope="module")
def checkpointed(
    runsc_binary: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Checkpointed]:
    """The base pod, run and checkpointed once for the module."""
    work = tmp_path_factory.mktemp("ground-truth")
    images = {
        BASE_IMAGE: debian_rootfs(work / "image-1"),
        OTHER_IMAGE: debian_rootfs(work / "image-2"),
    }
    runner = Runsc(runsc_binary, work)
    state = Checkpointed(runner, work / "checkpoint", images, work / "pods")
    original = runner.run(container_spec(base_pod(), images, state.pods_dir))
    runner.checkpoint(original, state.image, leave_running=False)
    yield state
    runner.close()


def _field(error_line: str) -> str:
    marker = "does not match across checkpoint restore"
    before = error_line.split(marker, 1)[0].rstrip()
    return before.rsplit(" ", 1)[-1].strip('"')


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_runsc_refuses_exactly_what_the_fingerprint_separates(
    checkpointed: Checkpointed, row: Row
) -> None:
    changed = copy.deepcopy(base_pod())
    changed["metadata"].update({"uid": "uid-b"})  # a new pod, always
    row.change(changed)

    spec = container_spec(changed, checkpointed.images, checkpointed.pods_dir)
    restored, status = checkpointed.runsc.restore(checkpointed.image, spec)
    checkpointed.runsc.delete(restored.cid)
    error = restored.stderr.read_text()
    refused_on = None if status == 0 else _field(error)
    fingerprints_differ = fingerprint(changed) != fingerprint(base_pod())

    assert refused_on == row.refused_on, error
    # A pod GKE restored this way crash-loops: the leader must see a restore crash in it.
    assert crash_seen(error) == (refused_on is not None), error
    assert fingerprints_differ == ((refused_on is not None) == row.agrees)
