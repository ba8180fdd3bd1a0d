"""The report of ``snapready check``: its JSON shape (``build_report``, versioned by
``CHECK_FORMAT_VERSION``; README "snapready check"), the summary counts and the text table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

CHECK_FORMAT_VERSION = 1
"""Bumped only on an incompatible change of the JSON output."""


def build_report(results: list[dict[str, Any]], errors: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole report: ``version``, ``summary``, ``results`` and ``errors`` (README)."""
    return {
        "version": CHECK_FORMAT_VERSION,
        "summary": summarize(results, errors),
        "results": results,
        "errors": errors,
    }


def summarize(
    results: Sequence[dict[str, Any]], errors: Sequence[dict[str, Any]] = ()
) -> dict[str, int]:
    """Counts by decision: ``{"objects": n, "denied": d, "warned": w, "allowed": a,
    "errors": e, "unreadable": u}`` (``errors``: objects that could not be judged;
    ``unreadable``: rows of ``errors[]``, inputs that could not be read or used)."""
    decisions = [r["decision"] for r in results]
    return {
        "objects": len(decisions),
        "denied": decisions.count("deny"),
        "warned": decisions.count("warn"),
        "allowed": decisions.count("allow"),
        "errors": decisions.count("error"),
        "unreadable": len(errors),
    }


def render_text(report: dict[str, Any]) -> str:
    """A readable table: one line per object (with its ``file#document:line``), then its
    findings (or the decision message)."""
    lines: list[str] = []
    for error in report.get("errors", ()):
        where = error["source"] or "snapready"
        where += f":{error['line']}" if error["line"] else ""
        lines.append(f"ERROR {where}  {error['reason']}")
        if error["hint"]:
            lines.append(f"  hint: {error['hint']}")
    for result in report["results"]:
        ref = "/".join(p for p in (result["kind"], result["namespace"], result["name"]) if p)
        policies = ",".join(result["policies"]) or "-"
        where = result["source"] + (f":{result['line']}" if result.get("line") else "")
        lines.append(f"{result['decision'].upper():<5} {ref}  (policy {policies}; {where})")
        for finding in result["findings"]:
            lines.append(f"  {finding['outcome']:<5} {finding['rule']:<16} {finding['path']}")
            lines.append(f"        {finding['message']}")
        if not result["findings"]:
            for text in ([result["message"]] if result["message"] else []) + result["warnings"]:
                lines.append(f"  {text}")
    summary = report["summary"]
    errors = f", {summary['errors']} could not be checked" if summary["errors"] else ""
    if summary.get("unreadable"):
        errors += f", {summary['unreadable']} input(s) could not be read"
    lines.append(
        f"{summary['objects']} object(s): {summary['denied']} denied, "
        f"{summary['warned']} allowed with warnings, {summary['allowed']} allowed{errors}"
    )
    return "\n".join(lines) + "\n"
