"""The report of ``snapready check``: its JSON shape (``build_report``, versioned by
``CHECK_FORMAT_VERSION``; docs/reference/check.md), the summary counts, the exit code they give
under ``--fail-on`` (``exit_code``, ``EXIT_CODES``) and the text table."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

CHECK_FORMAT_VERSION = 1
"""Bumped only on an incompatible change of the JSON output."""


FAIL_ON_CHOICES = ("deny", "warn", "unreadable")
FAIL_ON_DEFAULT = frozenset({"deny", "unreadable"})
EXIT_CODES = """exit status (what counts is --fail-on):
  0  nothing the run fails on
  1  an object would be denied (with --fail-on warn: or allowed with warnings)
  2  an input could not be read or an object could not be checked (error rows; the rest is
     still judged), or nothing could be judged: no objects, invalid settings or policies, usage
  3  both 1 and 2: an unreadable input never hides a denial
"""


def fail_on(text: str) -> frozenset[str]:
    """argparse type of ``--fail-on``: comma-separated ``deny``, ``warn``, ``unreadable``, or
    ``none``. ``warn`` means warnings or worse, so it brings ``deny`` with it: ``--fail-on
    warn`` (a stricter run) used to pass a denied object.

    Raises:
        argparse.ArgumentTypeError: an unknown or empty value (a usage error, exit 2).
    """
    values = {part.strip() for part in text.split(",") if part.strip()}
    if values == {"none"}:
        return frozenset()
    unknown = values - set(FAIL_ON_CHOICES)
    if unknown or not values:
        raise argparse.ArgumentTypeError(
            f"{text!r}: use a comma-separated list of {', '.join(FAIL_ON_CHOICES)}, or none"
        )
    return frozenset(values | ({"deny"} if "warn" in values else set()))


def exit_code(summary: dict[str, int], fail_on: frozenset[str]) -> int:
    """``EXIT_CODES``: 1 for objects the run fails on, 2 for unreadable inputs (and objects not
    checked) when ``unreadable`` is in ``fail_on``, 3 for both."""
    failed = ("deny" in fail_on and summary["denied"] > 0) or (
        "warn" in fail_on and summary["warned"] > 0
    )
    broken = "unreadable" in fail_on and (summary["errors"] > 0 or summary["unreadable"] > 0)
    return (1 if failed else 0) | (2 if broken else 0)


def build_report(results: list[dict[str, Any]], errors: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole report: ``version``, ``summary``, ``results`` and ``errors``
    (docs/reference/check.md)."""
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


def at_line(finding: dict[str, Any], result: dict[str, Any], sep: str = " ") -> str:
    """``sep`` + ``(line N)`` when ``finding``'s field is on another line than its object
    (``result``) starts on, else ``""`` (the object's own place already says that line)."""
    line = finding.get("line")
    return f"{sep}(line {line})" if line and line != result.get("line") else ""


def render_text(report: dict[str, Any]) -> str:
    """A readable table: one line per object (with its ``file#document:line``), then its
    findings (each with its field's line when that is not the object's) or the decision
    message."""
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
            at = at_line(finding, result, "  ")
            lines.append(f"  {finding['outcome']:<5} {finding['rule']:<16} {finding['path']}{at}")
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
