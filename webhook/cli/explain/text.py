"""Text rendering of ``snapready explain`` (the JSON document of ``explain.explain``).

The pod, its predictions and candidates, then its timeline (created, PodScheduled, Ready,
PodRestored, GKE's events with their messages), a restore crash, the outcome (``pending``: what
it waits for) with the seconds from PodScheduled, and the checkpoints of the snapshots taken
from it.
"""

from __future__ import annotations

from typing import Any

OUTCOME_TEXT = {
    "restored": "restored from a snapshot, as predicted",
    "restored_unexpected": "restored from a snapshot, although no hit was predicted",
    "missed": "started cold although a restore was predicted (fallback)",
    "restore_failed": "the restore crashed: GKE does not fall back, the pod will not serve "
    "until it is deleted",
    "cold_expected": "started cold, as predicted",
    "cold_first": "started cold: no snapshot existed yet (first start checkpoints)",
}


def _header(report: dict[str, Any]) -> list[str]:
    pod = report["pod"]
    lines = [
        f"pod {pod['namespace']}/{pod['name']} ({pod['phase'] or 'unknown phase'}, "
        f"node {pod['node'] or 'not scheduled'})"
    ]
    policies = ", ".join(f"{p['name']} ({p['scope']})" for p in report["policies"])
    lines.append(f"policies: {policies or 'none selects this pod'}")
    recorded = report["recorded"]
    if recorded is not None:
        snapshot = f" {recorded['restore-snapshot']}" if recorded["restore-snapshot"] else ""
        lines.append(
            f"recorded at admission: {recorded['restore-prediction']}{snapshot}: "
            f"{recorded['restore-reason'] or '-'}"
        )
    else:
        lines.append("recorded at admission: no prediction annotations")
    return lines


def _prediction(report: dict[str, Any]) -> list[str]:
    prediction = report["prediction"]
    if prediction is None:
        return []
    snapshot = f" {prediction['snapshot']}" if prediction["snapshot"] else ""
    lines = [f"prediction now: {prediction['outcome']}{snapshot}: {prediction['reason']}"]
    if prediction.get("staleConfig"):
        lines.append(
            "  stale-config: restores with configuration from before "
            + "; ".join(prediction["staleConfig"])
            + " (take a new snapshot)"
        )
    recorded = report["recorded"]
    if recorded is not None and recorded["restore-prediction"] != prediction["outcome"]:
        lines.append("  (differs from the recorded one: snapshots or nodes changed since)")
    fingerprint = report["fingerprint"]
    source = "its spec-hash annotation" if fingerprint["source"] == "annotation" else "computed"
    pools = ", ".join(
        f"{p['name']} ({'/'.join(p['versions']) or 'version unknown'})"
        for p in report["landingPools"]
    )
    lines.append(f"  fingerprint {fingerprint['value']} ({source})")
    lines.append(f"  node pools it can land on: {pools or 'unknown (no matching nodes)'}")
    return lines


def _candidates(report: dict[str, Any]) -> list[str]:
    if report["prediction"] is None:
        return []
    if not report["candidates"]:
        return [f"candidates: none ({report['noCandidates']})"]
    lines = [f"candidates ({len(report['candidates'])} Ready snapshot(s), newest first):"]
    for item in report["candidates"]:
        node = item["originNode"] or {}
        taken = f"taken from {item['originPod'] or '?'} on {node.get('pool') or '?'}"
        taken += f" {node.get('version') or ''}".rstrip()
        if item["matches"] is None:
            lines.append(f"  {item['snapshot']}: no origin record yet, cannot compare ({taken})")
            continue
        verdict = "matches" if item["matches"] else "differs"
        lines.append(f"  {item['snapshot']}: {verdict} ({taken})")
        for diff in item["differences"]:
            lines.append(f"    - {diff['detail']}: {diff['hint']}")
    return lines


def _timeline(report: dict[str, Any]) -> list[str]:
    entries = report.get("timeline") or []
    if not entries:
        return []
    lines = ["timeline:"]
    for entry in entries:
        kind = f" {entry['type']}" if entry["type"] else ""
        message = f": {entry['message']}" if entry["message"] else ""
        lines.append(f"  {entry['time'] or '(time unknown)'}  {entry['what']}{kind}{message}")
    return lines


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:g} s"


def _outcome(report: dict[str, Any]) -> list[str]:
    outcome = report["outcome"]
    if outcome is None:
        return ["outcome: none (not stamped by snapready at admission: no restore is tracked)"]
    lines = []
    if outcome["restoreFailure"]:
        lines.append(f"restore crash: {outcome['restoreFailure']}")
    name = outcome["outcome"]
    if name == "pending":
        lines.append(f"outcome: pending, waiting for {outcome['waitingFor']}")
    else:
        source = "recorded by the leader" if outcome["recorded"] else "decided now"
        said = outcome["evidence"]
        evidence = f", {said}" if said and said != "recorded outcome" else ""
        lines.append(f"outcome: {name} ({source}{evidence}): {OUTCOME_TEXT[name]}")
        if outcome["gkeReason"]:
            lines.append(f"  GKE says: {outcome['gkeReason']}")
        if outcome["snapshot"]:
            lines.append(f"  restored from PodSnapshot {outcome['snapshot']}")
    times = []
    if outcome["restoreSeconds"] is not None:
        times.append(f"PodRestored {_seconds(outcome['restoreSeconds'])}")
    if outcome["readySeconds"] is not None:
        times.append(f"Ready {_seconds(outcome['readySeconds'])}")
    if times:
        lines.append(f"  after PodScheduled: {', '.join(times)}")
    return lines


def _checkpoints(report: dict[str, Any]) -> list[str]:
    items = report.get("checkpoints") or []
    if not items:
        return []
    lines = ["checkpoints of snapshots taken from this pod:"]
    for item in items:
        state = item["checkpoint"] or "unknown"
        line = f"  {item['snapshot']} ({item['state']}): checkpoint {state}"
        if item["checkpoint"] == "awaiting" and item["awaitingSeconds"] is not None:
            line += f" for {item['awaitingSeconds']} s"
            if item["stalled"]:
                line += ": STALLED, past checkpoint.stall_seconds"
        if item["checkpointSeconds"] is not None:
            line += f" in {item['checkpointSeconds']:g} s"
        if item["message"]:
            line += f": GKE says: {item['message']}"
        lines.append(line)
        if item["hint"]:
            lines.append(f"    likely cause: {item['hint']}")
    return lines


def render_text(report: dict[str, Any]) -> str:
    """Readable lines: the pod, its predictions, each candidate with hints, its timeline, the
    outcome and its own checkpoints."""
    lines = _header(report) + _prediction(report) + _candidates(report)
    lines += _timeline(report) + _outcome(report) + _checkpoints(report)
    return "\n".join(lines) + "\n"
