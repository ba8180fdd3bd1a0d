"""What ``status`` and ``explain`` both report: a pod's outcome, a checkpoint awaiting or failed.

``judge`` is the outcome both commands show: the outcome the leader recorded on the pod when it
is a known one (GKE's Events expire with the API server's ``--event-ttl``, 1 h by default, so
older pods rely on it), else ``snapshots.outcomes.decide`` on the same evidence the leader uses;
None: not decided (pending). The checkpoint entries carry ``checkpoint.stall_seconds`` and
``snapshots.checkpoints.failure_hint``, so both commands word a stalled or failed checkpoint
alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from webhook.cli.common.output import age_text
from webhook.snapshots.checkpoints import OriginFacts, awaiting_seconds, failure_hint
from webhook.snapshots.evidence import GkeEvent
from webhook.snapshots.outcomes import OUTCOMES, Verdict, decide
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.views import SnapshotView


def judge(
    record: PodRecord, events: Sequence[GkeEvent], *, now: datetime, settle_seconds: float
) -> tuple[Verdict | None, bool]:
    """The pod's outcome and whether the leader recorded it: the ``<prefix>restore-outcome``
    annotation when it names one of ``OUTCOMES`` (``decide``'s verdict when it agrees, for its
    evidence and times), else ``decide`` (None: not decided yet, pending)."""
    verdict = decide(record, events, now=now, settle_seconds=settle_seconds)
    recorded = record.outcome
    if recorded is None or recorded not in OUTCOMES:
        return verdict, False
    outcome = next(o for o in OUTCOMES if o == recorded)
    if verdict is not None and verdict.outcome == outcome:
        return verdict, True
    at = verdict.at if verdict is not None else None  # the evidence left says otherwise: the
    return Verdict(outcome, "recorded outcome", at), True  # leader saw more (expired events)


def origin_facts(view: SnapshotView, pod_alive: bool | None = None) -> OriginFacts:
    """What the snapshot's origin record says of its node's GPU (for ``failure_hint``)."""
    node = view.origin.node if view.origin is not None else {}
    return OriginFacts(
        accelerator=node.get("accelerator"), driver=node.get("gpuDriver"), pod_alive=pod_alive
    )


def awaiting_entry(view: SnapshotView, now: datetime, stall_seconds: float) -> dict[str, Any]:
    """One checkpoint still uploading: how long, and whether past ``checkpoint.stall_seconds``."""
    seconds = awaiting_seconds(view, now)
    return {
        "name": view.name,
        "originPod": view.origin_pod,
        "created": view.created or None,
        "awaitingSeconds": round(seconds) if seconds is not None else None,
        "awaiting": age_text(seconds),
        "stalled": seconds is not None and seconds > stall_seconds,
    }


def failed_entry(view: SnapshotView, pod_alive: bool | None = None) -> dict[str, Any]:
    """One failed checkpoint: GKE's message and the likely cause ("" when none is known)."""
    return {
        "name": view.name,
        "originPod": view.origin_pod,
        "failedAt": view.checkpoint_at,
        "message": view.checkpoint_message or None,
        "hint": failure_hint(view, origin_facts(view, pod_alive)) or None,
    }
