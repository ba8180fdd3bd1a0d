"""The readiness gate's condition for a pod whose match gVisor refuses (pure: ``gate_status`` and
the stamped pod's record). A refused match is still a restore: GKE restores the pod from the
snapshot its fingerprint matches, and gVisor's refusal crashes it (domain.md section 9), so the
gate must hold it as restoring, never settle it as a cold start. The real control plane's run
of the same is ``test_evidence.py``."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from webhook.cluster.api.stamped_pods import pod_record
from webhook.cluster.controllers.restores.gate import GateStatus, gate_status, needs_write
from webhook.snapshots.evidence import GkeEvent
from webhook.snapshots.pod_records import PodRecord

RUNSC_REFUSAL = (
    "starting container: starting sub-container [/bin/sh -c sleep infinity]: failed to load "
    "kernel: error decoding object ID 151 (tmpfs.filesystem): Memory file for "
    '"fetch:/cache" not found in CtxMemoryFileMap:'
)
"""The first line of runsc's error for that restore (``tests/gvisor/test_pod_sandbox.py``)."""
NOW = datetime(2026, 12, 7, 12, 0, 30, tzinfo=UTC)
REFUSAL = (
    "gVisor cannot restore the pod: init container 'fetch' mounts emptyDir 'cache' first and "
    "has exited by the checkpoint (init-emptydir); it matches snapshot snap-1"
)


def stamped(prediction: str, reason: str, **status: Any) -> PodRecord:
    """The record the pod cache keeps of a stamped pod with these ``restore-*`` annotations."""
    pod = {
        "metadata": {
            "namespace": "ns",
            "name": "p",
            "uid": "u-1",
            "labels": {"snapready.io/selected": "true"},
            "annotations": {
                "snapready.io/restore-prediction": prediction,
                "snapready.io/restore-snapshot": "snap-1",
                "snapready.io/restore-reason": reason,
            },
        },
        "spec": {"nodeName": "node-1"},
        "status": {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastTransitionTime": "2026-12-07T12:00:00Z",
                }
            ],
            **status,
        },
    }
    record = pod_record(pod, "snapready.io/")
    assert record is not None
    return record


def gate(record: PodRecord, *events: GkeEvent) -> tuple[str, str, str]:
    want = gate_status(record, events, None, now=NOW, timeout_seconds=600, stall_seconds=900)
    return want.status, want.reason, want.message


def test_the_record_knows_a_refused_match_by_its_reason() -> None:
    assert stamped("miss", REFUSAL).refused
    origin = "gVisor cannot restore snapshot snap-1: its origin pod's init container 'fetch' ..."
    assert stamped("miss", origin).refused
    assert not stamped("miss", "spec.containers[0].image differs").refused
    assert not stamped("miss", "see: gVisor cannot restore ...").refused, "a prefix, not a word"


def test_a_refused_match_waits_for_the_restore_and_says_it_will_crash() -> None:
    status, reason, message = gate(stamped("miss", REFUSAL))
    assert (status, reason) == ("False", "AwaitingRestore")
    assert message.startswith("restoring from snap-1: waiting for PodRestored")
    assert "predicted to crash" in message


def test_a_hit_waits_without_the_crash_warning_and_a_plain_miss_settles() -> None:
    status, reason, message = gate(stamped("hit", "matches snapshot snap-1"))
    assert (status, reason) == ("False", "AwaitingRestore")
    assert "crash" not in message
    assert gate(stamped("miss", "spec.containers[0].image differs")) == (
        "True",
        "Settled",
        "cold start",
    )


def test_the_crash_fails_it_and_a_fallback_or_a_restore_settles_it() -> None:
    crashed = {
        "containerStatuses": [
            {
                "name": "server",
                "restartCount": 3,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {
                    "terminated": {
                        "exitCode": 128,
                        "reason": "StartError",
                        "message": RUNSC_REFUSAL,
                    }
                },
            }
        ]
    }
    assert gate(stamped("miss", REFUSAL, **crashed))[:2] == ("False", "RestoreFailed")
    fell_back = GkeEvent(
        "ns", "p", "u-1", "Warning", "fallback", "falling back to a cold start", "", None
    )
    assert gate(stamped("miss", REFUSAL), fell_back) == (
        "True",
        "Settled",
        "GKE fell back to a cold start",
    )
    normal = dataclasses.replace(fell_back, type="Normal")  # GKE's skip is a Warning
    assert gate(stamped("miss", REFUSAL), normal)[:2] == ("False", "AwaitingRestore")
    restored = dataclasses.replace(stamped("miss", REFUSAL), restored=True)
    assert gate(restored) == ("True", "Settled", "restored")


def test_a_settled_pod_is_not_rewritten_for_its_reason_alone() -> None:
    """Written only for a new status, or a new reason while False."""
    fell_back = dataclasses.replace(
        stamped("hit", "matches snapshot snap-1"), settled="True", settled_reason="Settled"
    )
    timeout = GateStatus("True", "Timeout", "no PodRestored 600 s after scheduling")
    assert not needs_write(fell_back, timeout), "the fallback Event expired: keep Settled"
    waiting = dataclasses.replace(fell_back, settled="False", settled_reason="AwaitingRestore")
    assert needs_write(waiting, GateStatus("False", "RestoreFailed", "crash"))
    assert not needs_write(waiting, GateStatus("False", "AwaitingRestore", "other words"))
    assert needs_write(waiting, timeout)
    assert needs_write(stamped("hit", "x"), GateStatus("False", "AwaitingRestore", "m"))
