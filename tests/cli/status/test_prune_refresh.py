"""``snapready status``'s lifecycle block: prunable snapshots and what a refresh would do."""

from __future__ import annotations

from datetime import UTC, datetime

from webhook.base.config import Settings
from webhook.cli.status.prune_refresh import lifecycle_lines, lifecycle_report
from webhook.cluster.api.snapshot_reader import Live
from webhook.kube.matching import Policy, compile_selector
from webhook.snapshots.index import SnapshotIndex
from webhook.snapshots.state import NodePoolFacts
from webhook.snapshots.views import OriginRecord, SnapshotView

NOW = datetime(2026, 12, 20, 12, 0, tzinfo=UTC)
OLD, NEW = "1.35.3-gke.1234000", "1.35.4-gke.100"


def live(trigger: str, *, restore_from_policy: bool = False) -> Live:
    policy = Policy(
        "llm", "ml", compile_selector({"matchLabels": {"app": "llm"}}), "s",
        trigger_type=trigger, grouping_labels=("model",),
    )  # fmt: skip
    origin = OriginRecord("o", "v1:sha256:" + "a" * 64, node={"pool": "l4", "version": OLD},
                          group={"model": "m1"})  # fmt: skip
    view = SnapshotView("ml", "snap-1", "llm", "o", True, "", "2026-12-19T10:00:00Z", origin=origin)
    annotations = {"podsnapshot.gke.io/restore-from-policy": "llm"} if restore_from_policy else {}
    pod = {
        "metadata": {"namespace": "ml", "name": "p", "labels": {"app": "llm", "model": "m1"},
                     "annotations": annotations},
        "spec": {}, "status": {},
    }  # fmt: skip
    return Live(
        "ml",
        policies=[policy],
        snapshots=[view],
        index=SnapshotIndex.build([view]),
        pools={"l4": NodePoolFacts("l4", 1, versions=frozenset({NEW}))},
        pods=[pod],
    )


def test_unrunnable_snapshot_is_listed_with_its_reason() -> None:
    settings = Settings(lifecycle={"prune_grace_seconds": 0})
    report = lifecycle_report(live("manual"), settings, NOW)
    assert [(p["name"], p["reason"], p["afterGrace"]) for p in report["prunable"]] == [
        ("snap-1", "unrunnable", False)
    ]
    assert OLD in report["prunable"][0]["detail"]
    text = "\n".join(lifecycle_lines(report))
    assert "ml/snap-1 (llm): unrunnable" in text


def test_with_a_grace_the_snapshot_waits_for_the_leaders_clock() -> None:
    report = lifecycle_report(live("manual"), Settings(), NOW)
    assert [p["afterGrace"] for p in report["prunable"]] == [True]


def test_manual_policy_without_a_cold_pod_on_the_new_pool_waits() -> None:
    report = lifecycle_report(live("manual"), Settings(), NOW)
    (entry,) = report["refreshes"]
    assert entry["manual"] and entry["pod"] is None
    assert "waiting for a Ready pod" in entry["action"]
    assert entry["trigger"].startswith("snapready-refresh-")


def test_workload_policy_says_the_next_cold_pod_checkpoints_itself_unless_stopped() -> None:
    plain = lifecycle_report(live("workload"), Settings(), NOW)["refreshes"][0]
    assert plain["trigger"] is None
    assert "next cold pod checkpoints itself" in plain["action"]
    assert "restore-from-policy" not in plain["action"]
    stopped = lifecycle_report(live("workload", restore_from_policy=True), Settings(), NOW)
    assert "p carry podsnapshot.gke.io/restore-from-policy" in stopped["refreshes"][0]["action"]
    gated = Settings(restore={"readiness_gate": True})
    assert (
        "readiness gate" in lifecycle_report(live("workload"), gated, NOW)["refreshes"][0]["action"]
    )


def test_prune_off_lists_nothing() -> None:
    report = lifecycle_report(live("manual"), Settings(lifecycle={"prune": "off"}), NOW)
    assert report["prunable"] == []
