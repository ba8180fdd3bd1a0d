"""``snapready check --format sarif|junit``: the report (``check.report.build_report``) in the two
formats CI systems read.

- SARIF 2.1.0 (OASIS; GitHub code scanning, GitLab, Azure DevOps): one ``result`` per finding with
  its rule id, level (``deny`` error, ``warn`` warning, ``audit`` note), message, and the file and
  line of the finding's field in the input (``physicalLocation``; the object's first line
  when the field cannot be placed: ``kube.field_lines``) plus the object itself
  (``logicalLocations``: ``Kind/namespace/name``, and the finding's field path). Each rule that
  appears has a ``reportingDescriptor`` with help text and ``helpUri`` (``RULE_DOCS_URL``).
  Inputs that could not be read and objects that could not be checked are
  ``toolExecutionNotifications`` (``executionSuccessful`` false), where SARIF puts problems of
  the run rather than of the code.
- JUnit XML (GitLab ``artifacts:reports:junit``, Jenkins ``junit``): one ``testcase`` per object
  (``name`` the object, ``classname`` ``snapready.<kind>``, ``file`` and ``line``) that fails
  (``failure``, ``message`` and text: each finding with its field's line) when its decision is
  one the run fails on (``--fail-on``); unreadable inputs are ``testcase``s with an ``error``.
  Warnings that do not fail the run are in ``system-out``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from typing import Any, Final
from xml.etree import ElementTree as ET

from webhook import __version__
from webhook.cli.check.report import at_line

RULE_DOCS_URL: Final = "https://github.com/snapready/snapready/blob/main/docs/rules/{rule}.md"
"""Where a rule is documented with its fix (SARIF ``helpUri``). The docs site does not exist yet:
this is the ``docs/rules/<id>.md`` path the docs issue fills (docs/rules/index.md meanwhile);
the one place to change when the site moves."""
SARIF_SCHEMA: Final = "https://json.schemastore.org/sarif-2.1.0.json"
TOOL_URI: Final = "https://github.com/snapready/snapready"

RULE_SUMMARIES: Final[dict[str, str]] = {
    "gvisor-runtime": "The pod must run on gVisor (runtimeClassName gvisor).",
    "machine-family": "The pinned machine family must support Pod snapshots (not E2).",
    "machine-unpinned": "A pod not pinned to one machine family may restore on another series "
    "and cold-start.",
    "gpu-machine": "GPU pods only on the GPU machine types and accelerators snapshots support.",
    "gpu-multi-l4": "More than one GPU only on L4 (g2-standard-48/96).",
    "gpu-whole-node": "Before GKE 1.35.0-gke.1738000 a multi-GPU pod must take all GPUs of its "
    "node.",
    "gpu-mig": "MIG partitions are not supported by Pod snapshots.",
    "gpu-sharing": "GPU time-sharing or MPS.",
    "gpu-driver": "A GPU pod may land on a driver branch older than 570, which cannot checkpoint.",
    "tpu": "TPUs are not supported by Pod snapshots.",
    "gcsfuse": "Cloud Storage FUSE is not supported by Pod snapshots.",
    "sandbox-compat": "Features GKE Sandbox does not support (privileged, hostPath, host "
    "namespaces, hostPort).",
    "init-emptydir": "An init container that mounts an emptyDir first leaves the pod "
    "unrestorable under gVisor.",
    "image-digest": "Images should be pinned by digest: a tag may resolve to new bits while the "
    "snapshot holds old ones.",
    "stale-state": "PVC-backed volumes are not snapshotted and env from Secrets is stale after "
    "restore.",
    "hash-drift": "A later mutating webhook changed fingerprinted fields.",
    "restore-from-policy": "podsnapshot.gke.io/restore-from-policy stops a pod's first checkpoint.",
    "checkpoint-window": "The source workload needs a PodDisruptionBudget allowing 0 "
    "disruptions while it checkpoints.",
    "shared-fingerprint": "Two workloads with equal fingerprints under one policy and group "
    "restore each other's snapshots.",
    "manual-trigger": "A PodSnapshotManualTrigger must target a Running pod selected by a "
    "manual policy.",
}
"""One line per readiness rule (design.md "Rules"); governance ids (``policy-*``,
``bucket-*``) are described by their family."""

_LEVELS: Final = {"deny": "error", "warn": "warning", "audit": "note"}


def _summary(rule: str) -> str:
    if rule in RULE_SUMMARIES:
        return RULE_SUMMARIES[rule]
    if rule.startswith("bucket-") or rule.startswith("storage-"):
        return "PodSnapshotStorageConfig governance: the snapshot bucket's settings."
    if rule.startswith("policy-"):
        return "PodSnapshotPolicy governance."
    return f"snapready rule {rule}."


def _ref(result: dict[str, Any]) -> str:
    return "/".join(p for p in (result["kind"], result["namespace"], result["name"]) if p)


def _location(file: str | None, line: int | None) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": {"uri": file or "-"}}
    if line:
        physical["region"] = {"startLine": line}
    return {"physicalLocation": physical}


def sarif(report: dict[str, Any]) -> dict[str, Any]:
    """The report as one SARIF 2.1.0 log (one run of the ``snapready`` driver)."""
    rules: dict[str, dict[str, Any]] = {}
    results: list[dict[str, Any]] = []
    for result in report["results"]:
        for finding in result["findings"]:
            rule = finding["rule"]
            if rule not in rules:
                rules[rule] = _descriptor(rule, finding, len(rules))
            location = _location(result.get("file"), finding.get("line") or result.get("line"))
            location["logicalLocations"] = [
                {"fullyQualifiedName": _ref(result), "kind": "object"},
                {"fullyQualifiedName": f"{_ref(result)}:{finding['path']}", "kind": "property"},
            ]
            results.append(
                {
                    "ruleId": rule,
                    "ruleIndex": rules[rule]["_index"],
                    "level": _LEVELS[finding["outcome"]],
                    "message": {"text": f"{_ref(result)} {finding['path']}: {finding['message']}"},
                    "locations": [location],
                    "properties": {
                        "path": finding["path"],
                        "outcome": finding["outcome"],
                        "document": result.get("document"),
                        "source": result["source"],
                    },
                }
            )
    notifications = list(_notifications(report))
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "snapready",
                        "version": __version__,
                        "informationUri": TOOL_URI,
                        "rules": [
                            {k: v for k, v in d.items() if k != "_index"} for d in rules.values()
                        ],
                    }
                },
                "invocations": [
                    {
                        "executionSuccessful": not notifications,
                        "toolExecutionNotifications": notifications,
                    }
                ],
                "results": results,
            }
        ],
    }


def _descriptor(rule: str, finding: dict[str, Any], index: int) -> dict[str, Any]:
    """A ``reportingDescriptor``: the rule's summary, and help that says where its fix is
    documented (each result's message says what to change for that object)."""
    url = RULE_DOCS_URL.format(rule=rule)
    summary = _summary(rule)
    level = _LEVELS.get(finding["severity"], "warning")
    return {
        "_index": index,
        "id": rule,
        "name": "".join(part.capitalize() for part in rule.split("-")),
        "shortDescription": {"text": summary},
        "fullDescription": {"text": summary},
        "help": {
            "text": f"{summary} Each finding's message says what to change; the rule and its "
            f"fixes: {url}",
            "markdown": f"{summary} Each finding's message says what to change; see "
            f"[{rule}]({url}).",
        },
        "helpUri": url,
        "defaultConfiguration": {"level": level},
    }


def _notifications(report: dict[str, Any]) -> Iterable[dict[str, Any]]:
    """Unreadable inputs and objects that could not be checked, as SARIF notifications."""
    for error in report["errors"]:
        text = error["reason"] + (f" (hint: {error['hint']})" if error["hint"] else "")
        file = (error["source"] or "").partition("#")[0] or None
        yield {
            "level": "error",
            "message": {"text": f"{error['source'] or 'snapready'}: {text}"},
            "locations": [_location(file, error["line"])] if file else [],
        }
    for result in report["results"]:
        if result["decision"] == "error":
            yield {
                "level": "error",
                "message": {"text": result["message"]},
                "locations": [_location(result.get("file"), result.get("line"))],
            }


def junit(report: dict[str, Any], fail_on: Collection[str]) -> str:
    """The report as JUnit XML: one ``testsuite`` (``snapready check``), one ``testcase`` per
    object; a case fails when its decision (``deny``, ``warn``) is in ``fail_on``."""
    suite = ET.Element("testsuite", name="snapready check")
    failures = errors = 0
    for error in report["errors"]:
        source = error["source"] or "snapready"
        case = _case(suite, source, "snapready.input", source.partition("#")[0], error["line"])
        message = error["reason"] + (f" (hint: {error['hint']})" if error["hint"] else "")
        message = _xml_text(message)
        ET.SubElement(case, "error", message=message, type="unreadable").text = message
        errors += 1
    for result in report["results"]:
        ref = _ref(result)
        case = _case(
            suite, ref, f"snapready.{result['kind']}", result.get("file"), result.get("line")
        )
        text = "\n".join(
            f"[{f['rule']}] {f['path']}{at_line(f, result)}: {f['message']} ({f['outcome']})"
            for f in result["findings"]
        ) or (result["message"] or "")
        text = _xml_text(text)
        decision = result["decision"]
        if decision == "error":
            message = _xml_text(result["message"] or "")
            ET.SubElement(case, "error", message=message, type="error").text = text
            errors += 1
        elif decision in fail_on:
            message = _xml_text(f"{decision}: {ref} ({result['source']})")
            ET.SubElement(case, "failure", message=message, type=decision).text = text
            failures += 1
        elif text:
            ET.SubElement(case, "system-out").text = text
    counts = {
        "tests": str(len(report["errors"]) + len(report["results"])),
        "failures": str(failures),
        "errors": str(errors),
        "time": "0",
    }
    suite.attrib.update(counts, skipped="0")
    root = ET.Element("testsuites", name="snapready check", attrib=counts)
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


_NOT_XML: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
"""Characters XML 1.0 cannot hold at all (a manifest's value may carry them into a message)."""


def _xml_text(text: str) -> str:
    return _NOT_XML.sub("\N{REPLACEMENT CHARACTER}", text)


def _case(
    suite: ET.Element, name: str, classname: str, file: str | None, line: int | None
) -> ET.Element:
    case = ET.SubElement(
        suite, "testcase", name=_xml_text(name), classname=_xml_text(classname), time="0"
    )
    if file:
        case.set("file", _xml_text(file))
    if line:
        case.set("line", str(line))
    return case
