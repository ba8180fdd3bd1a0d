"""Text rendering of ``snapready explain`` (the JSON document of ``explain.explain``)."""

from __future__ import annotations

from typing import Any

OUTCOME_TEXT = {
    "restored": "restored from a snapshot, as predicted",
    "restored_unexpected": "restored from a snapshot, although no hit was predicted",
    "missed": "started cold although a restore was predicted (silent fallback)",
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


def _outcome(report: dict[str, Any]) -> list[str]:
    outcome = report["outcome"]
    if outcome is None:
        return ["outcome: not Ready yet"]
    seconds = outcome["startupSeconds"]
    took = f" after {seconds:g} s" if seconds is not None else ""
    line = f"outcome: Ready{took}: {outcome['outcome']}, {OUTCOME_TEXT[outcome['outcome']]}"
    if outcome["restoredMessage"]:
        line += f" ({outcome['restoredMessage']})"
    return [line]


def render_text(report: dict[str, Any]) -> str:
    """Readable lines: the pod, its predictions, each candidate with hints, the outcome."""
    lines = _header(report) + _prediction(report) + _candidates(report) + _outcome(report)
    return "\n".join(lines) + "\n"
