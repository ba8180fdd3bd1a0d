"""``snapready status`` names the workloads an ungrouped policy mixes (issue 23, cross-workload).

``build_report``/``render_text`` over a hand-built ``Live`` reading: the raw pods as the API
server returns them (stamped, with the ownerReferences their controllers set).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from webhook.base.config import Settings
from webhook.cli.status import build_report
from webhook.cli.status.text import render_text
from webhook.cluster.api.snapshot_reader import Live
from webhook.snapshots.state import parse_policy

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def policy(grouped: bool) -> Any:
    spec: dict[str, Any] = {"selector": {"matchLabels": {"tier": "llm"}}, "storageConfigName": "s"}
    if grouped:
        spec["snapshotGroupingRules"] = {"groupByLabelValue": {"labels": ["app"]}}
    return parse_policy(
        {"metadata": {"name": "serving", "namespace": "llm"}, "spec": spec}, prefix="snapready.io/"
    )


def replica(name: str, deployment: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{deployment}-6b9f-{name}",
            "namespace": "llm",
            "labels": {
                "tier": "llm",
                "app": deployment,
                "pod-template-hash": "6b9f",
                "snapready.io/selected": "true",
            },
            "annotations": {"snapready.io/policy": "serving"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{deployment}-6b9f",
                    "uid": "u",
                    "controller": True,
                }
            ],
        }
    }


PODS = [replica("a", "prefill"), replica("b", "prefill"), replica("c", "decode")]


def test_ungrouped_policy_over_two_deployments_is_named() -> None:
    report = build_report(Live("llm", policies=[policy(False)], pods=PODS), Settings(), now=NOW)
    [entry] = report["policies"]
    assert entry["sharedWorkloads"] == ["Deployment decode", "Deployment prefill"]
    assert "isolation  ungrouped, pods of 2 workloads" in render_text(report)


def test_grouped_policy_or_one_workload_is_not_flagged() -> None:
    grouped = build_report(Live("llm", policies=[policy(True)], pods=PODS), Settings(), now=NOW)
    assert grouped["policies"][0]["sharedWorkloads"] == []
    one = build_report(Live("llm", policies=[policy(False)], pods=PODS[:2]), Settings(), now=NOW)
    assert one["policies"][0]["sharedWorkloads"] == []
    assert "isolation" not in render_text(one)
