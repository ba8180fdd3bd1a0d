"""``PodRecord``: the part of a stamped pod the caches keep, and ``condition``. Pure module."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.snapshots.views import WorkloadRef


@dataclass(frozen=True, slots=True)
class PodRecord:
    """The part of a stamped pod (label ``<prefix>selected``) the caches keep.

    Attributes:
        namespace, name, uid: identity; ``labels``: all its labels (grouping values).
        spec_hash: its ``<prefix>spec-hash`` annotation; ``fields``: its field digests.
        node_name: ``spec.nodeName`` once scheduled.
        prediction, predicted_snapshot: the ``<prefix>restore-*`` annotations written at
            admission.
        refused: its ``<prefix>restore-reason`` says the match is one gVisor refuses
            (``pod.emptydirs.REFUSED``): prediction ``miss``, yet GKE restores the pod from
            ``predicted_snapshot`` and the restore crashes (docs/gke-facts.md#section-9).
        created: ``metadata.creationTimestamp``; ``ready_at``: when condition Ready turned True.
        restored: condition ``PodRestored`` is True; ``restored_message``: its message.
        policy: the ``<prefix>policy`` annotation.
        scheduled_at: when ``PodScheduled`` turned True (GKE's clock for start-up time).
        restored_at: when ``PodRestored`` turned True.
        restore_failure: ``snapshots.evidence.restore_failure`` of its container statuses.
        outcome: the ``<prefix>restore-outcome`` annotation the leader writes once it decided.
        gated: the pod carries the ``<prefix>restore-settled`` readiness gate.
        settled: that condition's status (``True``/``False``), None while unset;
            ``settled_reason``: its reason (``AwaitingRestore`` and ``RestoreFailed`` are both
            False: the leader compares both before it writes).
    """

    namespace: str
    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    spec_hash: str | None = None
    fields: Mapping[str, str] = field(default_factory=dict)
    node_name: str | None = None
    prediction: str | None = None
    predicted_snapshot: str | None = None
    refused: bool = False
    created: str = ""
    ready_at: str | None = None
    restored: bool = False
    restored_message: str = ""
    policy: str | None = None
    scheduled_at: str | None = None
    restored_at: str | None = None
    restore_failure: str | None = None
    outcome: str | None = None
    gated: bool = False
    settled: str | None = None
    settled_reason: str | None = None
    phase: str = ""
    """``status.phase`` (``Pending``, ``Running``, ...; empty when not reported yet)."""
    owner: WorkloadRef | None = None
    """The pod's top controller (``workload_of``): its Deployment, StatefulSet, Sandbox..."""


def condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    """The ``status.conditions`` entry of ``type`` ``kind``, or None."""
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    for entry in conditions if isinstance(conditions, list) else []:
        if isinstance(entry, dict) and entry.get("type") == kind:
            return entry
    return None
