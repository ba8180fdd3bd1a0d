"""The readiness gate's condition ``<prefix>restore-settled``, set by the leader on gated pods.

Pods carry the gate only when ``restore.readiness_gate`` is on (``webhook.mutation.gate``). The
kubelet reports such a pod Ready only while this condition is True too, so it decides when the
pod joins its Service's endpoints (docs/gke-facts.md#section-9: Ready comes before a restore is
done; an origin pod paused for its upload still looks Ready):

- False ``CheckpointInProgress``: the pod is the origin of a PodSnapshot ``AwaitingCheckpoint``
  (for less than ``checkpoint.stall_seconds``; after that True ``Timeout``).
- False ``AwaitingRestore``: predicted ``hit``, or a ``miss`` on a match gVisor refuses
  (``PodRecord.refused``: GKE restores it, and the restore crashes), no ``PodRestored``, no
  GKE fallback Warning, no restore crash, less than
  ``restore.readiness_gate_timeout_seconds`` after ``PodScheduled`` (after that True
  ``Timeout``).
- False ``RestoreFailed``: a restore crash (it never serves; delete it).
- True ``Settled``: otherwise (restored, GKE fell back, or nothing to restore).

Written with a strategic merge patch on ``pods/status`` (conditions merge by ``type``) only when
the status changes, or its reason while False (``AwaitingRestore`` to ``RestoreFailed``); only
the leader writes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from urllib.parse import quote

from webhook.base.types import RawObject
from webhook.cluster.api.syncing import NotServed, TransportError, describe
from webhook.snapshots.evidence import GkeEvent
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.state import ClusterState
from webhook.snapshots.views import SnapshotView, parse_time

log = logging.getLogger("snapready.gate")


class StatusTransport(Protocol):
    """PATCH a built-in object with a strategic merge patch."""

    def strategic_patch(
        self, path: str, patch: RawObject, *, field_manager: str = "snapready"
    ) -> RawObject: ...


@dataclass(frozen=True)
class GateStatus:
    """The wanted condition: ``status`` ``True``/``False``, a reason and a message."""

    status: str
    reason: str
    message: str

    @property
    def waiting(self) -> bool:
        """False for a reason a timeout may still end (rechecked every pass)."""
        return self.status == "False" and self.reason != "RestoreFailed"


def awaiting_checkpoint(
    record: PodRecord, snapshots: tuple[SnapshotView, ...]
) -> SnapshotView | None:
    """The snapshot of ``record``'s own policy that is uploading its checkpoint, if any."""
    return next(
        (s for s in snapshots if s.origin_pod == record.name and s.checkpoint == "awaiting"),
        None,
    )


def uploading_origins(state: ClusterState, mine: Callable[[str], bool]) -> set[str]:
    """``namespace/name`` of the cached origin pods whose checkpoint is uploading (a PodSnapshot
    of a tracked namespace ``AwaitingCheckpoint`` names them; docs/gke-facts.md#section-9: the pod
    is paused meanwhile). Empty before the snapshots were listed."""
    uploading: set[str] = set()
    if not state.snapshots_known:
        return uploading
    for view in state.snapshots.by_name.values():
        if view.checkpoint != "awaiting" or not view.origin_pod or not mine(view.namespace):
            continue
        key = f"{view.namespace}/{view.origin_pod}"
        if key in state.pods:
            uploading.add(key)
    return uploading


def gate_status(
    record: PodRecord,
    events: tuple[GkeEvent, ...],
    uploading: SnapshotView | None,
    *,
    now: datetime,
    timeout_seconds: float,
    stall_seconds: float,
) -> GateStatus:
    """The condition ``record`` should carry now (module table)."""
    if uploading is not None:
        created = parse_time(uploading.created)
        if created is None or (now - created).total_seconds() < stall_seconds:
            return GateStatus(
                "False",
                "CheckpointInProgress",
                f"checkpoint to PodSnapshot {uploading.name} is uploading: the pod is paused",
            )
        return GateStatus("True", "Timeout", f"checkpoint {uploading.name} stalled")
    if record.restore_failure is not None and not record.restored:
        return GateStatus("False", "RestoreFailed", record.restore_failure)
    # A refused match is a restore too: GKE restores the pod, and gVisor's refusal crashes it.
    restoring = record.prediction == "hit" or (record.refused and record.prediction == "miss")
    if not restoring or record.restored:
        return GateStatus("True", "Settled", "restored" if record.restored else "cold start")
    if any(e.kind == "fallback" and e.type == "Warning" for e in events):  # as outcomes.decide
        return GateStatus("True", "Settled", "GKE fell back to a cold start")
    scheduled = parse_time(record.scheduled_at)
    if scheduled is not None and (now - scheduled).total_seconds() >= timeout_seconds:
        return GateStatus(
            "True", "Timeout", f"no PodRestored {timeout_seconds:.0f} s after scheduling"
        )
    waiting = f"restoring from {record.predicted_snapshot}: waiting for PodRestored"
    if record.prediction != "hit":
        waiting += "; predicted to crash (gVisor refuses it: see the pod's restore-reason)"
    return GateStatus("False", "AwaitingRestore", waiting)


def needs_write(record: PodRecord, want: GateStatus) -> bool:
    """Whether the pod's condition (``record.settled``/``settled_reason``) must be written to
    become ``want``: a new status; or, while False, a new reason (a restore that crashes while
    ``AwaitingRestore`` stays False). A True condition is never rewritten for its reason alone:
    a pod settled on GKE's fallback Warning must not turn ``Timeout`` once that Event expires
    (an hour later), which would be one more write per pod and a wrong reason (a review)."""
    if record.settled != want.status:
        return True
    return want.status == "False" and record.settled_reason != want.reason


def write_gate(
    transport: StatusTransport, record: PodRecord, condition: str, want: GateStatus, now: str
) -> bool:
    """Set the condition on the pod (``pods/status``); True when written. Errors are logged.
    ``lastTransitionTime`` moves only when the status does (API conventions): a new reason
    alone (``AwaitingRestore`` to ``RestoreFailed``) keeps the time the pod went False."""
    path = (
        f"/api/v1/namespaces/{quote(record.namespace, safe='')}/pods/"
        f"{quote(record.name, safe='')}/status"
    )
    entry = {
        "type": condition,
        "status": want.status,
        "reason": want.reason,
        "message": want.message[:512],
    }
    if record.settled != want.status:
        entry["lastTransitionTime"] = now
    patch: RawObject = {"status": {"conditions": [entry]}}
    if record.uid:  # precondition: never a newer pod of the same name
        patch["metadata"] = {"uid": record.uid}
    try:
        transport.strategic_patch(path, patch)
    except (TransportError, NotServed) as exc:
        where = f"{record.namespace}/{record.name}"
        log.warning("readiness gate of %s not set: %s", where, describe(exc))
        return False
    return True
