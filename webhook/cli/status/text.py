"""Text rendering of ``snapready status`` (the JSON document of ``status.build_report``).

Per policy: snapshot counts, the newest snapshot, the awaiting checkpoints (stalled ones marked)
and the failed ones with GKE's message and the likely cause; predictions; the last 24 h:
outcomes, pending pods, hit rate, p50 start-up restored vs cold (from ``PodScheduled``) with the
saving, and restored pods' p50 time to ``PodRestored`` and to ``Ready``.
"""

from __future__ import annotations

from typing import Any

from webhook.cli.status.audit import audit_line
from webhook.cli.status.prune_refresh import lifecycle_lines
from webhook.cli.status.sizes import sizes_lines, sizes_total_lines

OUTCOME_WORDS = {
    "restored": "restored",
    "restored_unexpected": "restored unexpectedly",
    "missed": "missed",
    "restore_failed": "restore failed",
    "cold_expected": "cold as predicted",
    "cold_first": "cold first start",
}


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:g} s"


def _snapshots(block: dict[str, Any], stall_seconds: float) -> list[str]:
    counts = f"{block['ready']} ready, {block['notReady']} not ready, {block['stale']} stale"
    if block.get("awaiting"):
        counts += f", {block['awaiting']} awaiting checkpoint"
    if block.get("staleConfig"):
        counts += f", {block['staleConfig']} stale-config"
    if block.get("failed"):
        counts += f", {block['failed']} checkpoint failed"
    lines = [f"  snapshots  {counts}"]
    newest = block["newest"]
    if newest is not None:
        version = newest["originVersion"] or "an unknown node version"
        pool = f" (pool {newest['originPool']})" if newest["originPool"] else ""
        lines.append(
            f"  newest     {newest['name']} ({newest['state']}), {newest['age']} old, "
            f"taken on {version}{pool}, last access {newest['lastAccess'] or 'never'}"
        )
    for item in block.get("awaitingCheckpoints", []):
        stalled = (
            f": STALLED, past checkpoint.stall_seconds ({stall_seconds:g} s)"
            if item["stalled"]
            else ""
        )
        lines.append(
            f"  awaiting   {item['name']} (origin {item['originPod'] or '?'}), checkpoint "
            f"uploading for {item['awaiting']}{stalled}"
        )
    for item in block.get("staleConfigSnapshots", []):
        lines.append(
            f"  stale-config {item['name']}: restores configuration from before "
            f"{'; '.join(item['changes'])} (take a new snapshot)"
        )
    for item in block.get("failedCheckpoints", []):
        lines.append(
            f"  failed     {item['name']} (origin {item['originPod'] or '?'}): GKE says: "
            f"{item['message'] or 'no message'}"
        )
        if item["hint"]:
            lines.append(f"    likely cause: {item['hint']}")
    return lines


def _pods(block: dict[str, Any]) -> list[str]:
    counts = block["predictions"]
    shown = ", ".join(f"{counts[k]} {k}" for k in ("hit", "miss", "none"))
    unrecorded = f", {counts['unrecorded']} without prediction" if counts["unrecorded"] else ""
    lines = [f"  pods       {block['stamped']} stamped: {shown}{unrecorded}"]
    for item in block["missReasons"]:
        lines.append(f"    miss x{item['count']}: {item['reason']}")
    return lines


def _recent(block: dict[str, Any], indent: str = "  ") -> list[str]:
    outcomes = block["outcomes"]
    parts = ", ".join(
        f"{outcomes[k]} {word}" for k, word in OUTCOME_WORDS.items() if outcomes.get(k)
    )
    pending = block.get("pending") or 0
    waiting = f"; {pending} pending (no restore evidence yet)" if pending else ""
    lines = [
        f"{indent}last 24 h  {block['pods']} pod(s) decided{': ' + parts if parts else ''}{waiting}"
    ]
    if block["hitRate"] is not None:
        restored = outcomes["restored"] + outcomes["restored_unexpected"]
        lines.append(
            f"{indent}  hit rate {block['hitRate']:.0%} ({restored} of {block['hitRateOf']})"
        )
    p50 = block["p50StartupSeconds"]
    if p50["restored"] is not None or p50["cold"] is not None:
        restored, cold = _seconds(p50["restored"]), _seconds(p50["cold"])
        line = f"{indent}  p50 start-up: restored {restored}, cold {cold}"
        saving = block["savingSeconds"]
        if saving is not None:
            line += (
                f": snapshots save {saving:g} s per pod" if saving > 0 else ": no saving measured"
            )
        lines.append(line)
    restore, ready = block.get("p50RestoreSeconds"), block.get("p50RestoredReadySeconds")
    if restore is not None or ready is not None:
        lines.append(
            f"{indent}  p50 restored pods: PodRestored {_seconds(restore)}, Ready "
            f"{_seconds(ready)} (the health check answered; serving needs PodRestored)"
        )
    return lines


def render_text(report: dict[str, Any]) -> str:
    """Readable lines: a block per policy, the stale groups, the hit-rate definition."""
    where = f"namespace {report['namespace']}" if report["namespace"] else "all namespaces"
    lines = [f"snapready status: {where}, {report['generatedAt']}"]
    if not report["policies"]:
        lines.append("no PodSnapshotPolicy and no stamped pod here")
    for entry in report["policies"]:
        name = entry["name"] if report["namespace"] else f"{entry['namespace']}/{entry['name']}"
        missing = "" if entry["exists"] else " (policy not found; named by stamped pods)"
        scope = f" [{entry['scope']}]" if entry["scope"] == "rootfs-only" else ""
        lines += ["", f"policy {name}{scope}{missing}"]
        lines += _snapshots(entry["snapshots"], report.get("stallSeconds", 0))
        if "sizes" in entry:
            lines += sizes_lines(entry["sizes"])
        lines += _pods(entry["pods"]) + audit_line(entry.get("audit")) + _recent(entry["last24h"])
        shared = entry.get("sharedWorkloads") or []
        if shared:
            lines.append(
                f"  isolation  ungrouped, pods of {len(shared)} workloads ({', '.join(shared)}) "
                "restore each other's snapshots: add snapshotGroupingRules (cross-workload)"
            )
    if len(report["policies"]) > 1:
        lines += ["", "all policies", *_recent(report["last24h"])]
    if "sizes" in report:
        total = report["sizes"]
        lines += ["", *sizes_total_lines(total)]
    if report["stale"]:
        lines += ["", "stale snapshots"]
        for group in report["stale"]:
            lines.append(f"  {group['namespace']}: {group['note']}")
            lines.append(f"    {', '.join(group['snapshots'])}")
    if report.get("lifecycle"):
        lines += lifecycle_lines(report["lifecycle"])
    lines += [
        "",
        f"hit rate = {report['hitRateDefinition']}, over pods decided in the last "
        f"{report['windowHours']} h (cold first starts, before any snapshot, and pending pods "
        "are left out; a crashed restore counts against it)",
        f"times from PodScheduled: restored pods to PodRestored, cold pods to Ready; a pod is "
        f"decided on GKE's evidence, or counted cold {report.get('settleSeconds', 0):g} s after "
        "Ready without any (outcomes.settle_seconds)",
    ]
    return "\n".join(lines) + "\n"
