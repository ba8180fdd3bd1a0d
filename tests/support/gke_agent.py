"""GKE's kubelet and snapshot agent, simulated on a real API server as docs/gke-facts.md#section-9
says a real cluster behaves (Google's vLLM-on-Pod-snapshots reference architecture, field reports).

What it writes, through the same subresources GKE uses:
- pod conditions through ``pods/status`` (strategic merge, so snapready's own readiness-gate
  condition is never overwritten): ``PodScheduled``, ``ContainersReady``, ``Ready``, and
  ``PodRestored`` only when a restore has finished, tens of seconds after Ready;
- the kubelet's readiness rule: ``Ready`` is ``ContainersReady`` and every readiness gate's
  condition True (k8s.io/kubernetes ``pkg/kubelet/status/generate.go``,
  ``GeneratePodReadyCondition``), recomputed by ``kubelet_sync``;
- GKE's own core/v1 Events of reason ``GKEPodSnapshotting`` on the pod: Normal "Successfully
  restored the pod from PodSnapshot <ns>/<name>", Warning "... falling back to a cold start of
  pod: <reason>";
- a crashed restore: container waiting ``CrashLoopBackOff`` with ``lastState.terminated``
  ``OCI runtime restore failed: ... vfs.CompleteRestore() failed: ...``;
- a PodSnapshot's ``Checkpoint``/``StorageReplicated``/``Ready`` conditions: ``AwaitingCheckpoint``
  while uploading, then ``Succeeded``/``AllSnapshotsAvailable`` or ``Checkpoint`` False
  ``Failed`` with GKE's message.
The exact message texts are GKE's as quoted in docs/gke-facts.md#section-9; GKE's event source
component is not documented there, so it is left empty (snapready does not read it).

Identities: everything written to ``podsnapshot.gke.io`` objects (PodSnapshots, their status, a
manual trigger's status) goes through ``gke``, a client authenticated as GKE's snapshot controller
(``ControlPlane.gke_client()``, fixture ``kube_gke``): GKE's guard on the control plane refuses
PodSnapshot writes by anyone else, admin included (docs/gke-facts.md#section-10). Pod status and
Events go through ``api``.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any, cast

from kubernetes import client

GROUP, VERSION = "podsnapshot.gke.io", "v1"
STRATEGIC = "application/strategic-merge-patch+json"
CRASH = (
    "OCI runtime restore failed: runsc: restoring container: vfs.CompleteRestore() failed: "
    "failed to restore file /data/db/WiredTiger.wt: file size changed"
)


def now() -> str:
    """The API server's RFC 3339 form, seconds resolution."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class GkeAgent:
    """Writes what GKE would, for the pods and snapshots of one namespace."""

    def __init__(self, api: client.ApiClient, namespace: str, gke: client.ApiClient) -> None:
        self.api, self.namespace, self.gke = api, namespace, gke
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(gke)  # as GKE's snapshot controller

    def conditions(self, pod: str, *entries: tuple[str, str, str | None]) -> None:
        """Set pod conditions ``(type, status, message)``, now, merged by type."""
        stamp = now()
        conditions = [
            {"type": kind, "status": status, "lastTransitionTime": stamp, "message": message or ""}
            for kind, status, message in entries
        ]
        self.core.patch_namespaced_pod_status(
            pod, self.namespace, {"status": {"conditions": conditions}}, _content_type=STRATEGIC
        )

    def scheduled(self, pod: str) -> None:
        """The scheduler bound the pod (``PodScheduled`` True)."""
        self.conditions(pod, ("PodScheduled", "True", None))

    def containers_ready(self, pod: str) -> None:
        """The app answered its health check; then the kubelet's Ready rule."""
        self.conditions(pod, ("ContainersReady", "True", None))
        self.kubelet_sync(pod)

    def kubelet_sync(self, pod: str) -> bool:
        """Recompute ``Ready`` as the kubelet does (containers ready and every readiness gate
        True); returns the Ready status written."""
        obj = self.core.read_namespaced_pod(pod, self.namespace).to_dict()
        status = {c["type"]: c["status"] for c in (obj["status"].get("conditions") or [])}
        gates = [g["condition_type"] for g in (obj["spec"].get("readiness_gates") or [])]
        ready = status.get("ContainersReady") == "True" and all(
            status.get(gate) == "True" for gate in gates
        )
        if status.get("Ready") != ("True" if ready else "False"):
            self.conditions(pod, ("Ready", "True" if ready else "False", None))
        return ready

    def restored(self, pod: str, snapshot: str) -> None:
        """The memory has streamed in: ``PodRestored`` True (and GKE's Normal Event)."""
        self.event(
            pod,
            "Normal",
            f"Successfully restored the pod from PodSnapshot {self.namespace}/{snapshot}",
        )
        self.conditions(pod, ("PodRestored", "True", f"restored from PodSnapshot {snapshot}"))

    def fell_back(self, pod: str, reason: str) -> str:
        """GKE's Warning for a skipped restore; returns its message."""
        message = f"No compatible PodSnapshot, falling back to a cold start of pod: {reason}"
        self.event(pod, "Warning", message)
        return message

    def event(self, pod: str, kind: str, message: str) -> None:
        """A core/v1 Event of reason ``GKEPodSnapshotting`` about ``pod`` (with its uid)."""
        metadata = self.core.read_namespaced_pod(pod, self.namespace).metadata
        uid = metadata.uid if metadata is not None else None
        stamp = datetime.now(UTC)
        body = client.CoreV1Event(
            metadata=client.V1ObjectMeta(name=f"{pod}.{secrets.token_hex(6)}"),
            involved_object=client.V1ObjectReference(
                kind="Pod", namespace=self.namespace, name=pod, uid=uid, api_version="v1"
            ),
            reason="GKEPodSnapshotting",
            message=message,
            type=kind,
            first_timestamp=stamp,
            last_timestamp=stamp,
            count=1,
            source=client.V1EventSource(component=""),
        )
        self.core.create_namespaced_event(self.namespace, body)

    def restore_crash(self, pod: str, container: str = "server") -> None:
        """gVisor's restore failed: CrashLoopBackOff, the error in the last termination."""
        entry: dict[str, Any] = {
            "name": container,
            "ready": False,
            "restartCount": 3,
            "image": "registry.example/llm",
            "imageID": "",
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
            "lastState": {
                "terminated": {"exitCode": 128, "reason": "StartError", "message": CRASH}
            },
        }
        self.core.patch_namespaced_pod_status(
            pod,
            self.namespace,
            {"status": {"containerStatuses": [entry]}},
            _content_type=STRATEGIC,
        )

    def checkpoint(self, snapshot: str, phase: str, message: str = "") -> None:
        """A PodSnapshot's conditions for ``phase`` ``awaiting``, ``succeeded`` or ``failed``."""
        stamp = now()
        if phase == "awaiting":
            rows = [
                ("Checkpoint", "False", "AwaitingCheckpoint"),
                ("Ready", "False", "AwaitingCheckpoint"),
            ]
        elif phase == "succeeded":
            rows = [
                ("Checkpoint", "True", "Succeeded"),
                ("StorageReplicated", "True", "Succeeded"),
                ("Ready", "True", "AllSnapshotsAvailable"),
            ]
        else:
            rows = [("Checkpoint", "False", "Failed"), ("Ready", "False", "Failed")]
        conditions = [
            {
                "type": kind,
                "status": status,
                "reason": reason,
                "lastTransitionTime": stamp,
                "message": message if reason == "Failed" else "",
            }
            for kind, status, reason in rows
        ]
        self.custom.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            self.namespace,
            "podsnapshots",
            snapshot,
            {"status": {"conditions": conditions}},
        )

    def new_snapshot(self, name: str, origin: str, policy: str = "llm-policy") -> None:
        """GKE creates a PodSnapshot naming its origin pod; its upload starts."""
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "PodSnapshot",
            "metadata": {"name": name, "annotations": {"podsnapshot.gke.io/origin-pod": origin}},
            "spec": {"policyName": policy},
        }
        self.custom.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "podsnapshots", body
        )
        self.checkpoint(name, "awaiting")

    def serve_trigger(self, trigger: str, snapshot: str, policy: str = "llm-policy") -> None:
        """GKE acting on a PodSnapshotManualTrigger (docs/gke-facts.md#section-2): a PodSnapshot
        naming the trigger's ``spec.targetPod`` as its origin, uploaded and Ready, then the
        trigger's condition ``Triggered`` True reason ``Complete`` and
        ``status.snapshotCreated.name``."""
        obj = cast(
            "dict[str, Any]",
            self.custom.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, "podsnapshotmanualtriggers", trigger
            ),
        )
        self.new_snapshot(snapshot, obj["spec"]["targetPod"], policy)
        self.checkpoint(snapshot, "succeeded")
        status = {
            "status": {
                "conditions": [
                    {
                        "type": "Triggered",
                        "status": "True",
                        "reason": "Complete",
                        "lastTransitionTime": now(),
                        "message": "",
                    }
                ],
                "snapshotCreated": {"name": snapshot},
            }
        }
        self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, self.namespace, "podsnapshotmanualtriggers", trigger, status
        )
