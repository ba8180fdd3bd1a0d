"""GKE's evidence and the outcome decided from it (pure): docs/gke-facts.md#section-9's signals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from webhook.snapshots.checkpoints import OriginFacts, failed_note, failure_hint
from webhook.snapshots.evidence import (
    GkeEvent,
    events_of,
    gke_event,
    index_events,
    restore_failure,
    updated_events,
)
from webhook.snapshots.outcomes import decide, ready_seconds, restore_seconds, snapshot_state
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.views import SnapshotView, checkpoint_state

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
AWAITING = "AwaitingCheckpoint"
FALLBACK_TEXT = "falling back to a cold start"


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def core_event(kind: str, message: str, *, reason: str = "GKEPodSnapshotting") -> dict[str, Any]:
    """A core/v1 Event as the API server returns it."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "p.1", "namespace": "llm", "creationTimestamp": at(30)},
        "involvedObject": {"kind": "Pod", "namespace": "llm", "name": "p", "uid": "u1"},
        "reason": reason,
        "message": message,
        "type": kind,
        "firstTimestamp": at(33),
    }


def test_gke_restore_event_names_its_snapshot() -> None:
    event = gke_event(
        core_event("Normal", "Successfully restored the pod from PodSnapshot llm/snap-7")
    )
    assert event is not None
    assert (event.kind, event.snapshot, event.time, event.uid) == (
        "restored",
        "snap-7",
        at(33),
        "u1",
    )


def test_gke_fallback_warning_is_a_fallback_and_keeps_its_reason() -> None:
    message = (
        "Failed to restore pod llm/p, falling back to a cold start of pod: no compatible "
        "PodSnapshot (node version 1.35.4-gke.100)"
    )
    event = gke_event(core_event("Warning", message))
    assert event is not None and event.kind == "fallback" and event.message == message


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(core_event("Normal", "Pulled image", reason="Pulled"), id="other-reason"),
        pytest.param(
            {**core_event("Normal", "x"), "involvedObject": {"kind": "Node", "name": "n"}},
            id="not-about-a-pod",
        ),
    ],
)
def test_other_events_are_not_kept(obj: dict[str, Any]) -> None:
    assert gke_event(obj) is None


def test_an_event_of_an_earlier_pod_with_the_same_name_is_not_this_pods() -> None:
    mine = GkeEvent("llm", "p", "u2", "Warning", "fallback", "falling back to a cold start", at(1))
    old = GkeEvent("llm", "p", "u1", "Normal", "restored", "Successfully restored", at(0))
    index = index_events([mine, old])
    assert events_of(index, "llm", "p", "u2") == (mine,)
    nameless = GkeEvent(
        "llm", "p", "", "Warning", "fallback", "falling back to a cold start", at(2)
    )
    assert events_of(index_events([nameless]), "llm", "p", "u2") == (), "no uid: not the pod's"
    assert events_of(updated_events(index, mine, None), "llm", "p", "u2") == ()


def test_restore_crash_is_read_from_the_last_termination() -> None:
    status = {
        "containerStatuses": [
            {"name": "app", "state": {"running": {}}},
            {
                "name": "db",
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                "lastState": {
                    "terminated": {
                        "reason": "StartError",
                        "message": "OCI runtime restore failed: vfs.CompleteRestore() failed: x",
                    }
                },
            },
        ]
    }
    failure = restore_failure(status)
    assert failure is not None and failure.startswith("container db: OCI runtime restore failed")


def test_an_application_crash_is_not_a_restore_failure() -> None:
    status = {
        "containerStatuses": [
            {
                "name": "app",
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"reason": "Error", "message": "exit 1: KeyError"}},
            }
        ]
    }
    assert restore_failure(status) is None


@pytest.mark.parametrize(
    ("state", "last", "failed"),
    [
        pytest.param(
            {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
            {"reason": "Error", "message": "ERROR failed to restore the session cache: KeyError"},
            False,
            id="an-app-log-tail-under-FallbackToLogsOnError",
        ),
        pytest.param(
            {"running": {}},
            {"reason": "Completed", "message": "OCI runtime restore failed: vfs.CompleteRestore()"},
            False,
            id="a-termination-log-the-workload-wrote",
        ),
        pytest.param(
            {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": "OCI runtime restore failed: forged",
                }
            },
            {"reason": "OOMKilled", "message": ""},
            False,
            id="not-the-runtime-s-reason",
        ),
        pytest.param(
            {"waiting": {"reason": ["StartError"], "message": "restore failed"}},
            {"reason": {"odd": 1}, "message": "restore failed"},
            False,
            id="odd-json-reasons-never-crash",
        ),
        pytest.param(
            {
                "waiting": {
                    "reason": "RunContainerError",
                    "message": "failed to start containerd task: OCI runtime restore "
                    "failed: vfs.CompleteRestore() failed: x",
                }
            },
            {},
            True,
            id="the-kubelet-s-RunContainerError",
        ),
        pytest.param(
            {"running": {}},
            {
                "exitCode": 128,
                "reason": "StartError",
                "message": "OCI runtime restore failed: vfs.CompleteRestore() failed: x",
            },
            True,
            id="containerd-s-StartError-then-running",
        ),
        pytest.param(
            {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
            {
                "exitCode": 128,
                "reason": "StartError",
                "message": 'failed to create containerd task: exec: "/OCI runtime restore failed'
                ' vfs.CompleteRestore() failed/failed to restore": executable file not found',
            },
            False,
            id="a-command-named-like-the-failure-is-the-pod-author-s-text",
        ),
        pytest.param(
            {"running": {}},
            {
                "reason": "StartError",
                "message": 'exec: "/'
                + "x" * 4000
                + " OCI runtime restore failed "
                + "x" * 200
                + '": not found',
            },
            False,
            id="a-quote-the-4096-character-cut-leaves-open-is-still-the-author-s",
        ),
        pytest.param(
            {"running": {}},
            {
                "reason": "StartError",
                # runsc echoes a sub-container's args unquoted (``starting sub-container %v``)
                "message": "starting container: starting sub-container [/app --on-error "
                "restoring container]: error finding executable in PATH",
            },
            False,
            id="runsc-s-unquoted-echo-of-the-args-is-the-author-s",
        ),
        pytest.param(
            {"running": {}},
            {
                "reason": "StartError",
                "message": "starting container: starting sub-container [/bin/sh -c x]: failed "
                "to load kernel: error decoding object ID 151 (tmpfs.filesystem)",
            },
            True,
            id="runsc-s-own-words-after-the-args-still-count",
        ),
        pytest.param(
            {"running": {}},
            {
                "reason": "StartError",
                "message": "starting container: starting sub-container [/app restoring container "
                'x"y]: error finding executable',
            },
            False,
            id="a-quote-in-the-args-does-not-hide-their-end",
        ),
        pytest.param(
            {"running": {}},
            {
                "reason": "StartError",
                "message": "starting container: starting sub-container [/app "
                + "restoring container " * 300
                + "]: error finding executable",
            },
            False,
            id="args-the-4096-character-cut-leaves-open-are-still-the-author-s",
        ),
        pytest.param(
            {"running": {}},
            {
                "reason": "StartError",
                "message": "starting container: starting sub-container [/app a]: failed to handle "
                "restore spec validation: Args does not match: checkpoint [/app b] restore "
                "[/app a]: b]",
            },
            True,
            id="runsc-s-words-before-its-second-echo-of-the-args-count",
        ),
    ],
)
def test_only_what_the_runtime_wrote_is_a_restore_failure(
    state: dict[str, Any], last: dict[str, Any], failed: bool
) -> None:
    """A crash's termination message is the workload's (its termination log, or its last log
    lines under ``FallbackToLogsOnError``): an app that logs "failed to restore ..." and exits
    was reported as a gVisor restore failure, and a tenant's app could report one at will.
    Only the runtime's reasons for a container that could not start count, and only the
    runtime's own words in them: a command or path it quotes is the pod author's."""
    entry = {"name": "app", "state": state, "lastState": {"terminated": last}}
    assert (restore_failure({"containerStatuses": [entry]}) is not None) is failed


def pod(**changes: Any) -> PodRecord:
    base: dict[str, Any] = {
        "namespace": "llm",
        "name": "p",
        "uid": "u1",
        "prediction": "hit",
        "predicted_snapshot": "snap-1",
        "scheduled_at": at(0),
        "ready_at": at(5),
    }
    return PodRecord(**{**base, **changes})


FALLBACK = GkeEvent("llm", "p", "u1", "Warning", "fallback", "falling back to a cold start", at(6))
RESTORED = GkeEvent("llm", "p", "u1", "Normal", "restored", "Successfully restored", at(30), "s2")


@pytest.mark.parametrize(
    ("record", "events", "seconds_after_ready", "expected"),
    [
        pytest.param(pod(), (), 10, None, id="ready-without-evidence-is-not-decided"),
        pytest.param(pod(), (), 301, "missed", id="ready-past-settle-predicted-hit-is-missed"),
        pytest.param(pod(prediction="miss"), (), 301, "cold_expected", id="miss-past-settle"),
        pytest.param(pod(prediction="none"), (), 301, "cold_first", id="none-past-settle"),
        pytest.param(pod(), (FALLBACK,), 2, "missed", id="gke-fallback-decides-at-once"),
        pytest.param(pod(prediction="miss"), (FALLBACK,), 2, "cold_expected", id="fallback-miss"),
        pytest.param(
            pod(restored=True, restored_at=at(33)), (), 1, "restored", id="podrestored-at-once"
        ),
        pytest.param(
            pod(prediction="miss", restored=True, restored_at=at(33)),
            (),
            1,
            "restored_unexpected",
            id="podrestored-against-a-miss",
        ),
        pytest.param(pod(), (RESTORED,), 10, None, id="normal-event-waits-for-podrestored"),
        pytest.param(pod(), (RESTORED,), 301, "missed", id="a-restore-event-alone-is-no-restore"),
        pytest.param(
            pod(),
            (
                GkeEvent(
                    "llm", "p", "u1", "Normal", "fallback", "falling back to a cold start", at(6)
                ),
            ),
            2,
            None,
            id="a-normal-fallback-message-is-not-gke-s-warning",
        ),
        pytest.param(
            pod(restore_failure="container db: restore failed", ready_at=None),
            (),
            0,
            "restore_failed",
            id="restore-crash-without-ready",
        ),
        pytest.param(pod(ready_at=None), (), 1000, None, id="never-ready-never-decided"),
    ],
)
def test_decide(
    record: PodRecord, events: tuple[GkeEvent, ...], seconds_after_ready: float, expected: str
) -> None:
    now = T0 + timedelta(seconds=5 + seconds_after_ready)
    verdict = decide(record, events, now=now, settle_seconds=300)
    assert (verdict.outcome if verdict else None) == expected


def test_restore_time_runs_from_podscheduled_to_podrestored() -> None:
    record = pod(restored=True, restored_at=at(33))
    verdict = decide(record, (RESTORED,), now=T0 + timedelta(seconds=40), settle_seconds=300)
    assert verdict is not None and verdict.snapshot == "s2", "the snapshot GKE named"
    assert restore_seconds(record, verdict) == 33 and ready_seconds(record) == 5
    fallback = decide(pod(), (FALLBACK,), now=T0 + timedelta(seconds=7), settle_seconds=300)
    assert fallback is not None and restore_seconds(pod(), fallback) is None


def conditions(*rows: tuple[str, str, str]) -> list[dict[str, str]]:
    return [
        {"type": t, "status": s, "reason": r, "message": "m", "lastTransitionTime": at(60)}
        for t, s, r in rows
    ]


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ((("Checkpoint", "False", AWAITING), ("Ready", "False", AWAITING)), "awaiting"),
        ((("Checkpoint", "True", "Succeeded"), ("Ready", "True", "AllSnapshotsAvailable")),
         "succeeded"),
        ((("Checkpoint", "False", "Failed"),), "failed"),
        ((("Ready", "False", AWAITING),), "awaiting"),
        ((("Ready", "True", "AllSnapshotsAvailable"),), ""),
    ],
)  # fmt: skip
def test_checkpoint_state(rows: tuple[tuple[str, str, str], ...], expected: str) -> None:
    assert checkpoint_state(conditions(*rows))[0] == expected


def view(**changes: Any) -> SnapshotView:
    base: dict[str, Any] = {
        "namespace": "llm",
        "name": "snap",
        "policy": "p",
        "origin_pod": "origin",
        "ready": False,
        "reason": "Failed",
        "created": at(0),
        "checkpoint": "failed",
        "checkpoint_message": "runsc error: exit status 128",
    }
    return SnapshotView(**{**base, **changes})


def test_exit_128_on_the_default_driver_names_the_driver() -> None:
    hint = failure_hint(view(), OriginFacts(accelerator="nvidia-l4", driver="default"))
    assert "default GPU driver branch" in hint and "latest" in hint
    note = failed_note(view(), OriginFacts(accelerator="nvidia-l4", driver="default"))
    assert note.startswith("checkpoint of pod origin to PodSnapshot snap failed: GKE says: runsc")


def test_a_gone_origin_points_at_eviction() -> None:
    hint = failure_hint(view(checkpoint_message="upload aborted"), OriginFacts(pod_alive=False))
    assert "PodDisruptionBudget" in hint and "570" not in hint


def test_snapshot_states_include_awaiting_and_failed() -> None:
    assert snapshot_state(view(), {}) == "failed"
    assert snapshot_state(view(checkpoint="awaiting"), {}) == "awaiting"
    assert snapshot_state(view(checkpoint=""), {}) == "not_ready"
