"""A PodSnapshot's checkpoint: failed, stalled, how long it took, and the likely cause. Pure.

GKE reports a checkpoint through the PodSnapshot's conditions (docs/gke-facts.md#section-9): while
the memory image uploads, ``Checkpoint`` and ``Ready`` have reason ``AwaitingCheckpoint`` (minutes:
~20 GiB in 4-5 min, ~68 GiB in ~13 min, once 65.7 GiB in 34 s, so no upload rate is assumed);
then ``Checkpoint`` True ``Succeeded`` and ``Ready`` True ``AllSnapshotsAvailable``, or
``Checkpoint`` False ``Failed`` with a message such as ``runsc error: exit status 128``. Causes
known from the field, each named in the Warning's hint:

- ``exit status 128`` on a GPU origin: NVIDIA driver older than 570 (no ``gvisor-cuda-cr``), or
  more than one GPU off L4. Fix: pin ``cloud.google.com/gke-gpu-driver-version: latest``; one
  GPU per pod off L4.
- origin pod gone while ``AwaitingCheckpoint``: evicted or deleted during the upload (cluster
  autoscaler scale-down, migration). Fix: a PodDisruptionBudget with no allowed disruptions for
  the snapshot source.
- ``AwaitingCheckpoint`` past ``checkpoint.stall_seconds``: a large-VRAM checkpoint stuck on a GPU
  driver assertion, or a slow upload. Fix: check the node's GKE snapshot agent; delete the
  snapshot so the next pod retries.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from webhook.snapshots.views import SnapshotView, parse_time

EXIT_128 = "exit status 128"


@dataclass(frozen=True)
class OriginFacts:
    """What is known of a snapshot's origin when its checkpoint is judged.

    Attributes:
        accelerator: the origin node's ``cloud.google.com/gke-accelerator`` (None: no GPU or
            unknown); ``driver``: its ``cloud.google.com/gke-gpu-driver-version`` label.
        pod_alive: whether the origin pod still exists (None: unknown).
    """

    accelerator: str | None = None
    driver: str | None = None
    pod_alive: bool | None = None


def failure_hint(view: SnapshotView, origin: OriginFacts) -> str:
    """The likely cause and fix of a failed checkpoint (module table); "" when none is known."""
    hints = []
    if EXIT_128 in view.checkpoint_message.lower():
        if origin.driver == "default":
            hints.append(
                "the origin node runs GKE's default GPU driver branch, which cannot checkpoint "
                "(needs driver 570 or newer): pin cloud.google.com/gke-gpu-driver-version: latest"
            )
        elif origin.accelerator is not None or origin.driver is None:
            hints.append(
                "on a GPU pod this is a driver older than 570 (pin "
                "cloud.google.com/gke-gpu-driver-version: latest) or more than one GPU off L4"
            )
    if origin.pod_alive is False:
        hints.append(
            "the origin pod was deleted or evicted before the upload finished: protect the "
            "snapshot source with a PodDisruptionBudget that allows no disruptions"
        )
    return "; ".join(hints)


def failed_note(view: SnapshotView, origin: OriginFacts) -> str:
    """The ``SnapshotCheckpointFailed`` note: GKE's message first, then the hint."""
    said = view.checkpoint_message or "no message"
    who = f" of pod {view.origin_pod}" if view.origin_pod else ""
    note = f"checkpoint{who} to PodSnapshot {view.name} failed: GKE says: {said}"
    hint = failure_hint(view, origin)
    return f"{note}. Likely cause: {hint}" if hint else note


def awaiting_seconds(view: SnapshotView, now: datetime) -> float | None:
    """Seconds a snapshot has been ``awaiting`` (since its creation), None when not awaiting."""
    if view.checkpoint != "awaiting":
        return None
    created = parse_time(view.created)
    return max(0.0, (now - created).total_seconds()) if created is not None else None


def stalled_note(view: SnapshotView, seconds: float, stall_seconds: float) -> str:
    """The ``SnapshotCheckpointStalled`` note (the time awaited in minutes, or seconds under 2 min:
    a low ``stall_seconds`` said "0 min")."""
    who = f" of pod {view.origin_pod}" if view.origin_pod else ""
    return (
        f"checkpoint{who} to PodSnapshot {view.name} has been AwaitingCheckpoint for "
        f"{f'{seconds / 60:.0f} min' if seconds >= 120 else f'{seconds:.0f} s'} "
        f"(checkpoint.stall_seconds {stall_seconds:.0f} s); uploads of "
        "~70 GiB take ~13 min. Large-VRAM checkpoints can hang on a GPU driver assertion: check "
        "the node's GKE snapshot agent, and delete the snapshot to let the next pod retry"
    )


def checkpoint_seconds(view: SnapshotView) -> float | None:
    """Creation -> ``Checkpoint`` Succeeded, seconds; None when not succeeded or unknown."""
    if view.checkpoint != "succeeded":
        return None
    start, end = parse_time(view.created), parse_time(view.checkpoint_at)
    if start is None or end is None:
        return None
    seconds = (end - start).total_seconds()
    return seconds if seconds >= 0 else None
