"""A whole pod under real gVisor, laid out as the kubelet, containerd and GKE's runsc shim do.

``tests/support/gvisor.py`` runs one container per sandbox; a GKE pod is one sandbox holding
several containers, and a GKE Pod snapshot checkpoints and restores the sandbox. What each layer
contributes here (sources in brackets):

* **The sandbox** is the pause container: ``io.kubernetes.cri.container-type: sandbox``, no
  container name (runsc calls it ``__no_name_0``); every other container joins it with
  ``container-type: container`` and ``io.kubernetes.cri.sandbox-id`` [containerd CRI;
  ``runsc/specutils/cri.go``]. Each container has its own root filesystem (its image's snapshot).
* **Order** [kubelet ``computeInitContainerActions``, KEP-753]: init containers one by one (a
  run-to-completion one runs until it exits; a native sidecar, ``restartPolicy: Always``, counts
  as started once its ``postStart`` hook returned), then the app containers.
* **An exited container is deleted from the sandbox** [containerd ``handleContainerExit`` calls
  ``task.Delete``, which the runsc shim turns into ``runsc delete``]: a checkpoint holds only the
  containers still running, and runsc restores exactly that set, matched by container name.
* **emptyDir volumes live inside the sandbox** [GKE Sandbox's admission hints them on the pod,
  its runsc shim completes the hints, ``UpdateVolumeAnnotations`` in
  ``pkg/shim/v1/utils/volumes.go``: the sandbox spec gets ``dev.gvisor.spec.mount.<volume>.type:
  tmpfs``, ``share: pod`` and the kubelet's folder as ``source``; a container keeps a bind mount
  of that folder, a tmpfs one for ``medium: Memory``]. So a Pod snapshot holds their files, as
  GKE's documentation says.
* **Pod annotations** ``dev.gvisor.*`` reach the sandbox's and every container's spec
  [containerd's ``pod_annotations`` pass-through of GKE's runsc handler].
* **postStart** hooks run as ``runsc exec`` in the container [kubelet ``runner.Run``].
* **A restore** brings back the containers that ran at the checkpoint, in the kubelet's order,
  and runs no hook and no run-to-completion init container: runsc refuses a container its
  checkpoint does not hold, and an exec before the last container is restored. What GKE's node
  agent and kubelet do with a restoring pod's hooks and run-to-completion init containers is not
  public; snapready's own container needs neither.

``Pod`` starts such a pod from a Pod object (what snapready's injection left, ``as_admitted``),
or restores one from a checkpoint image.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.gvisor.cri import _capabilities, _user
from tests.support.gvisor import (
    CONTAINER_NAME_ANNOTATION,
    HELPERS,
    RUNSC_TIMEOUT,
    Container,
    Rootfs,
    Runsc,
    busybox_rootfs,
    debian_rootfs,
    oci_spec,
    write_spec,
)

HELPERS_IMAGE_DIR = "/opt/snapready/helpers"
"""Where the helpers image (Dockerfile target ``helpers``) holds the two files."""
EMPTY_DIR = "kubernetes.io~empty-dir"


def helpers_image(path: Path, busybox: str) -> Rootfs:
    """The helpers image as the Dockerfile builds it: busybox plus ``/opt/snapready/helpers``
    (``rehydrate`` 0755, ``snapready_rehydrate.py`` 0644)."""
    rootfs = busybox_rootfs(path, busybox)
    target = path / HELPERS_IMAGE_DIR.lstrip("/")
    target.mkdir(parents=True, exist_ok=True)
    for name, mode in (("rehydrate", 0o755), ("snapready_rehydrate.py", 0o644)):
        shutil.copyfile(HELPERS / name, target / name)
        (target / name).chmod(mode)
    return rootfs


@dataclass
class Pod:
    """One pod's sandbox under ``runsc``: its containers by name, and how to reach them.

    Args:
        runsc: the runsc state folder.
        pod: the Pod object (``metadata.name``, ``metadata.uid``, ``spec``).
        images: a factory ``image -> Rootfs`` (called once per container: each container gets
            its own root filesystem, as each gets its own snapshot of its image).
        app_dir: mounted read-only at ``/app`` in every container (the test programs).
    """

    runsc: Runsc
    pod: dict[str, Any]
    images: Any
    app_dir: Path
    sandbox_id: str = field(default_factory=lambda: f"pod-{uuid.uuid4().hex[:10]}")
    containers: dict[str, Container] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])

    def container_id(self, name: str) -> str:
        """The runsc id of container ``name`` (no id may begin with another: runsc takes a
        prefix of an id as the id, and refuses an ambiguous one)."""
        return f"{name}.{self.sandbox_id}"

    def _kubelet_dir(self, volume: str) -> Path:
        uid = str(self.pod["metadata"]["uid"])
        return self.runsc.work / "kubelet" / uid / "volumes" / EMPTY_DIR / volume

    def _empty_dirs(self) -> list[str]:
        volumes = self.pod["spec"].get("volumes", [])
        return [volume["name"] for volume in volumes if "emptyDir" in volume]

    def _pod_annotations(self) -> dict[str, str]:
        annotations = self.pod["metadata"].get("annotations", {})
        return {key: value for key, value in annotations.items() if key.startswith("dev.gvisor.")}

    def _sandbox_spec(self) -> dict[str, Any]:
        hints: dict[str, str] = {}
        for volume in self._empty_dirs():
            folder = self._kubelet_dir(volume)
            folder.mkdir(parents=True, exist_ok=True)
            folder.chmod(0o777)  # the kubelet creates an emptyDir world-writable
            prefix = f"dev.gvisor.spec.mount.{volume}."
            hints |= {prefix + "source": str(folder), prefix + "type": "tmpfs"}
            hints[prefix + "share"] = "pod"
        annotations = {
            "io.kubernetes.cri.container-type": "sandbox",
            "io.kubernetes.cri.sandbox-id": self.sandbox_id,
            "io.kubernetes.cri.sandbox-name": self.name,
            **self._pod_annotations(),
            **hints,
        }
        rootfs = debian_rootfs(self.runsc.work / "rootfs" / f"{self.sandbox_id}-pause")
        spec = oci_spec(rootfs, ["/usr/bin/sleep", "infinity"], [], annotations=annotations)
        del spec["annotations"][CONTAINER_NAME_ANNOTATION]
        spec["mounts"] = [m for m in spec["mounts"] if m["destination"] != "/snapready"]
        spec["hostname"] = self.name
        return spec

    def container_spec(self, container: dict[str, Any]) -> dict[str, Any]:
        """The OCI spec containerd hands runsc for ``container`` of this pod."""
        metadata, spec = self.pod["metadata"], self.pod["spec"]
        env = [f"HOSTNAME={self.name}", "PATH=/usr/local/bin:/usr/bin:/bin"]
        env += [f"{item['name']}={item.get('value', '')}" for item in container.get("env", [])]
        app = {"destination": "/app", "type": "bind", "source": str(self.app_dir)}
        mounts: list[dict[str, Any]] = [{**app, "options": ["rbind", "rprivate", "ro"]}]
        volumes = {volume["name"]: volume for volume in spec.get("volumes", [])}
        for mount in container.get("volumeMounts", []):
            assert "emptyDir" in volumes[mount["name"]], "only emptyDir volumes are laid out"
            access = "ro" if mount.get("readOnly") else "rw"
            source = str(self._kubelet_dir(mount["name"]))
            # The shim gives a memory-backed emptyDir a tmpfs mount, a disk-backed one a bind.
            memory = volumes[mount["name"]]["emptyDir"].get("medium") == "Memory"
            mounts.append(
                {
                    "destination": mount["mountPath"],
                    "type": "tmpfs" if memory else "bind",
                    "source": source,
                    "options": ["rbind", "rprivate", access],
                }
            )
        annotations = {
            "io.kubernetes.cri.container-type": "container",
            "io.kubernetes.cri.sandbox-id": self.sandbox_id,
            "io.kubernetes.cri.sandbox-name": self.name,
            "io.kubernetes.cri.image-name": container["image"],
            **self._pod_annotations(),
        }
        rootfs = self.images(container["image"], f"{self.sandbox_id}-{container['name']}")
        args = list(container.get("command") or []) + list(container.get("args") or [])
        oci = oci_spec(rootfs, args, env, name=container["name"], annotations=annotations)
        oci["mounts"] = [m for m in oci["mounts"] if m["destination"] != "/snapready"] + mounts
        security = container.get("securityContext", {})
        oci["process"]["user"] = _user(spec.get("securityContext", {}), security)
        # containerd reads ``drop: [ALL]`` as every capability (then adds ``add``).
        dropped_all = "ALL" in ((security.get("capabilities") or {}).get("drop") or [])
        capabilities = [] if dropped_all else _capabilities(security)
        if security.get("allowPrivilegeEscalation") is False:
            oci["process"]["noNewPrivileges"] = True
        oci["process"]["capabilities"] = {
            key: capabilities for key in ("bounding", "effective", "permitted")
        }
        oci["root"]["readonly"] = bool(security.get("readOnlyRootFilesystem"))
        oci["hostname"] = metadata["name"]
        return oci

    def _launch(self, verb: list[str], cid: str, spec: dict[str, Any]) -> Container:
        bundle = self.runsc.work / cid
        write_spec(bundle, spec)
        container = Container(cid, bundle, bundle / "stdout", bundle / "stderr")
        with container.stdout.open("ab") as out, container.stderr.open("ab") as err:
            result = subprocess.run(
                self.runsc.command(*verb, "--bundle", str(bundle), cid),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                timeout=RUNSC_TIMEOUT,
                check=False,
            )
        if cid not in self.runsc.started:
            self.runsc.started.append(cid)
        if result.returncode != 0:
            raise AssertionError(
                f"runsc {verb[0]} {cid} exited {result.returncode}:\n"
                + container.stderr.read_text(errors="replace")[:3000]  # the reason, then a stack
            )
        return container

    def _start(self, cid: str, spec: dict[str, Any]) -> Container:
        self._launch(["create"], cid, spec)
        bundle = self.runsc.work / cid
        with (bundle / "stdout").open("ab") as out, (bundle / "stderr").open("ab") as err:
            result = subprocess.run(
                self.runsc.command("start", cid),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                timeout=RUNSC_TIMEOUT,
                check=False,
            )
        assert result.returncode == 0, (bundle / "stderr").read_text(errors="replace")[-3000:]
        return Container(cid, bundle, bundle / "stdout", bundle / "stderr")

    def _post_start(self, cid: str, container: dict[str, Any]) -> None:
        hook = container.get("lifecycle", {}).get("postStart", {}).get("exec")
        if hook:
            self.runsc.call("exec", cid, *hook["command"])

    def _ordered(self) -> list[tuple[str, dict[str, Any]]]:
        spec = self.pod["spec"]
        return [
            *(("init", item) for item in spec.get("initContainers", [])),
            *(("app", item) for item in spec.get("containers", [])),
        ]

    def start(self) -> Pod:
        """Start the pod as the kubelet would: sandbox, init containers in order (a
        run-to-completion one waited for and deleted, a sidecar's ``postStart`` run), apps."""
        self._start(self.sandbox_id, self._sandbox_spec())
        for role, container in self._ordered():
            cid = self.container_id(container["name"])
            self.containers[container["name"]] = self._start(cid, self.container_spec(container))
            self._post_start(cid, container)
            if role == "init" and container.get("restartPolicy") != "Always":
                waited = self.runsc.call("wait", cid)
                assert '"exitStatus":0' in waited.stdout, waited.stdout
                self.runsc.call("delete", cid)
                self.runsc.started.remove(cid)
        return self

    def checkpoint(self, image: Path) -> None:
        """``runsc checkpoint`` of the whole sandbox into ``image`` (the pod stops)."""
        image.mkdir(parents=True, exist_ok=True)
        self.runsc.call("checkpoint", "--image-path", str(image), self.sandbox_id)

    def restore(self, image: Path, names: list[str]) -> Pod:
        """Restore this pod from ``image``: the sandbox, then the containers ``names`` (those
        that ran at the checkpoint) in the kubelet's order. Raises AssertionError with runsc's
        message when a step is refused."""
        self._launch(["restore", "--image-path", str(image), "--detach"], self.sandbox_id,
                     self._sandbox_spec())  # fmt: skip
        for _, container in self._ordered():
            if container["name"] not in names:
                continue
            cid = self.container_id(container["name"])
            spec = self.container_spec(container)
            verb = ["restore", "--image-path", str(image), "--detach"]
            self.containers[container["name"]] = self._launch(verb, cid, spec)
        return self


def image_factory(work: Path, images: dict[str, str], busybox: str | None) -> Any:
    """``(image, key) -> Rootfs``: ``images`` maps an image reference to ``"helpers"`` (the
    helpers image) or ``"debian"``; each call builds a fresh root under ``work/rootfs/key``."""

    def build(image: str, key: str) -> Rootfs:
        path = work / "rootfs" / key
        if images[image] == "helpers":
            assert busybox is not None, "the helpers image is busybox-based"
            return helpers_image(path, busybox)
        return debian_rootfs(path)

    return build
