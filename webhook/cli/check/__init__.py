"""``snapready check FILE...|- --policies DIR``: offline admission of manifests, for CI pipelines.

Every object is wrapped in a synthetic AdmissionRequest (operation CREATE, the validating
endpoint) and answered by the same engine as the server (``offline_engine`` +
``admission.engine.admit``): pods and pod-controller templates get the readiness rules,
PodSnapshotPolicy and PodSnapshotStorageConfig objects get governance, anything else is allowed
untouched.

Exit codes (``EXIT_CODES``; what fails the run is ``--fail-on``, default ``deny,unreadable``):
0 nothing the run fails on; 1 an object would be denied (or warned, with ``warn``); 2 an input
could not be read (one ``errors[]`` row each: file, line, reason; every other input is still
judged) or an object could not be judged (an unexpected error: that object's ``error`` row,
never a traceback), and also no objects at all, invalid settings or policies, or bad usage; 3
both 1 and 2, so an unreadable file never hides a denial. ``--format json`` prints exactly one
document in every case, ``sarif`` and ``junit`` (``check.formats``) one log. The objects are
judged in the cluster ``check.reading.checked_state`` describes (the policy directory plus the
input's own policies, storage configs, ComputeClasses and Nodes); the policy directory's own
policies are judged too, their findings said on stderr without changing the report or the exit
code (``check.policy_dir``), unless it is the embedded examples'. Notes on stderr: the embedded
example policies are in use (no ``--policies``), or no PodSnapshotPolicy is known (nothing can
be selected). The JSON shape (``--format json``) is documented in docs/reference/check.md and
versioned by ``CHECK_FORMAT_VERSION``; each result and finding carries the ``file``,
``document`` index and ``line`` of its object.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from webhook.admission.engine import Engine, admit
from webhook.base.config import DEFAULT_POLICY_DIR, Settings
from webhook.base.errors import ConfigError
from webhook.base.text import clip
from webhook.base.types import Finding, Mode, RawObject
from webhook.cli.check.formats import junit, sarif
from webhook.cli.check.policy_dir import note_policy_dir
from webhook.cli.check.reading import checked_state, read_inputs
from webhook.cli.check.report import (
    CHECK_FORMAT_VERSION,
    EXIT_CODES,
    FAIL_ON_DEFAULT,
    build_report,
    exit_code,
    fail_on,
    render_text,
    summarize,
)
from webhook.cli.check.shared_fingerprints import shared_fingerprints
from webhook.cli.common.options import add_settings_arguments, settings_from
from webhook.cli.common.output import fail, print_json
from webhook.kube.field_lines import FieldLocator
from webhook.kube.manifests import LoadedObject
from webhook.kube.responses import Decision
from webhook.snapshots.facts import compute_class_facts
from webhook.snapshots.state import DisruptionBudget, disruption_budget

__all__ = ["CHECK_FORMAT_VERSION", "build_report", "render_text", "run", "summarize"]
from webhook.kube.review import AdmissionRequest
from webhook.snapshots.state import ClusterState

CLUSTER_SCOPED = frozenset(
    {
        "PodSnapshotStorageConfig",
        "ComputeClass",
        "Namespace",
        "Node",
        "RuntimeClass",
        "PersistentVolume",
        "StorageClass",
        "PriorityClass",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "APIService",
        "IngressClass",
        "CSIDriver",
        "VolumeSnapshotClass",
    }
)
"""Kinds admitted and shown without a namespace (the API server sends none for cluster-scoped
objects): Kubernetes' own cluster-scoped kinds a manifest repository holds, GKE's
PodSnapshotStorageConfig and ComputeClass."""
_OUTCOME: dict[Mode, str] = {"enforce": "deny", "warn": "warn", "audit": "audit"}


def register(subparsers: Any) -> None:
    """Add the ``check`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "check",
        help="admit manifests offline against policy files (exit 1 if anything would be denied)",
        description="Admit manifests offline against policy files, as the webhook would. Only "
        "the report is printed on stdout (notes go to stderr).",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="YAML/JSON manifests or directories; - is stdin"
    )
    add_settings_arguments(parser)
    parser.add_argument(
        "--namespace",
        "-n",
        default="default",
        help="namespace for namespaced objects without one, policies included, as "
        "`kubectl apply -n` (default: default)",
    )
    parser.add_argument("--gke-version", help="cluster version for version-gated rules")
    parser.add_argument(
        "--format",
        choices=["text", "json", "sarif", "junit"],
        default="text",
        help="output format: text, json (docs/reference/check.md), sarif (SARIF 2.1.0: code "
        "scanning), junit (JUnit XML: GitLab and Jenkins test reports); default text",
    )
    parser.add_argument(
        "--fail-on",
        type=fail_on,
        default=FAIL_ON_DEFAULT,
        metavar="LIST",
        help="what fails the run (comma-separated): deny (an object would be denied: exit 1), "
        "warn (allowed with warnings, or denied: exit 1), unreadable (an input could not be "
        "read or an object checked: exit 2), or none; default deny,unreadable",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Check every object; print text or JSON; return 0, 1 (denied) or 2 (bad input or an object
    that could not be judged). Never raises: an unexpected error is reported, not a traceback."""
    try:
        return _run(args)
    except Exception as exc:  # the last line: a message, never a traceback
        return fail(f"internal error: {_error_text(exc)}")


def _run(args: argparse.Namespace) -> int:
    """The run, with the objects read kept out of the cyclic garbage collector's passes: they
    live until the report is printed, and re-traversing 24,000 of them on every collection
    slowed judging a 20 MB input."""
    try:
        return _judge_all(args)
    finally:
        gc.unfreeze()


def _judge_all(args: argparse.Namespace) -> int:
    """1. settings and engine; 2. inputs read leniently; 3. the cluster they describe; 4. judge
    every object; 5. one report (in ``--format``) whatever failed."""
    extra = {"rules": {"gke_version": args.gke_version}} if args.gke_version else {}
    try:
        settings = settings_from(args, **extra)
        # Offline by definition: policies come from files even if the config says ``kube``.
        source = settings.source.model_copy(update={"kind": "files"})
        settings = settings.model_copy(update={"source": source})
        objects, errors = read_inputs(args.files)
        gc.freeze()  # the objects read, until ``_run`` ends
        state, refused = checked_state(settings, objects, args.namespace)
        engine = offline_engine(settings, state)
    except ConfigError as exc:
        return _fatal(args, str(exc))
    errors.extend(refused)
    if not objects and not errors:
        names = ", ".join("stdin" if name == "-" else name for name in args.files)
        return _fatal(args, f"no objects found in {names}")
    _note_policies(args, settings, engine)
    with_input_facts(engine, objects, args.namespace)
    results = [
        check_object(item, engine, args.namespace, index) for index, item in enumerate(objects)
    ]
    if settings.source.policy_dir != DEFAULT_POLICY_DIR:  # the user's policies, not the examples
        note_policy_dir(
            settings.source.policy_dir,
            objects,
            args.namespace,
            lambda item, index: check_object(item, engine, args.namespace, index),
        )
    shared_fingerprints(objects, results, engine, args.namespace)
    place_findings(objects, results, FieldLocator())
    report = build_report(results, errors)
    _print(args, report)
    return exit_code(report["summary"], args.fail_on)


def _print(args: argparse.Namespace, report: dict[str, Any]) -> None:
    """The report on stdout in ``args.format``."""
    if args.format == "json":
        print_json(report)
    elif args.format == "sarif":
        print_json(sarif(report))
    elif args.format == "junit":
        sys.stdout.write(junit(report, args.fail_on))
    else:
        sys.stdout.write(render_text(report))


def offline_engine(settings: Settings, state: ClusterState) -> Engine:
    """The server's engine (``server.runner.build_engine`` minus the policy source and the HTTP
    stack, which ``check`` never needs) over ``state``: same rules, same governance."""
    from webhook.admission.governance import Governance  # noqa: PLC0415 - lazy: GCS client
    from webhook.cluster.gcs import BucketInspector  # noqa: PLC0415

    governance = Governance(BucketInspector(settings.storage))
    engine = Engine(settings=settings, state=lambda: state, governance=governance)
    engine.offline = True  # manifests never passed a mutating webhook
    return engine


def _fatal(args: argparse.Namespace, message: str) -> int:
    """Nothing could be judged: the message on stderr, and in every format but text still one
    report (no results, the message as its one error row) so a pipeline can parse it."""
    if args.format != "text":
        _print(
            args,
            build_report([], [{"source": None, "line": None, "reason": message, "hint": None}]),
        )
    return fail(message)


def _note_policies(args: argparse.Namespace, settings: Settings, engine: Engine) -> None:
    """Stderr notes that change how the result reads: example policies, or no policy at all."""
    directory = settings.source.policy_dir
    if args.policy_dir is None and directory == DEFAULT_POLICY_DIR:
        sys.stderr.write(
            "snapready: note: no --policies given: checking against the embedded example "
            f"policies ({directory}); pass --policies DIR (or source.policy_dir in --config) "
            "to use yours\n"
        )
    if len(engine.state().policies) == 0:
        sys.stderr.write(
            f"snapready: warning: {directory} holds no PodSnapshotPolicy, so no pod can be "
            "selected and every pod is allowed without checks\n"
        )


def with_input_facts(engine: Engine, objects: Sequence[LoadedObject], namespace: str) -> None:
    """Let the rules see the cluster facts the checked input itself declares: its
    ``cloud.google.com`` ComputeClasses (what a ``cloud.google.com/compute-class`` pin means,
    e.g. Google's reference workloads ship the class they select; offline a class pin is
    otherwise "unknown") and its PodDisruptionBudgets (``checkpoint-window``: the input is the
    whole set, so a workload without a PDB in it is warned)."""
    classes = {
        facts.name: facts
        for item in objects
        if item.kind == "ComputeClass"
        and str(item.obj.get("apiVersion", "")).startswith("cloud.google.com/")
        and (facts := compute_class_facts(item.obj)) is not None
    }
    budgets: dict[str, list[DisruptionBudget]] = {}
    for item in objects:
        if item.kind == "PodDisruptionBudget":
            budget = disruption_budget({**item.obj, "metadata": _namespaced(item, namespace)})
            if budget is not None:
                budgets.setdefault(budget.namespace, []).append(budget)
    base = engine.state()
    state = replace(
        base,
        compute_classes={**(base.compute_classes or {}), **classes}
        if classes
        else base.compute_classes,
        disruption_budgets={ns: tuple(found) for ns, found in budgets.items()},
    )
    engine.state = lambda: state


def _namespaced(item: LoadedObject, namespace: str) -> RawObject:
    """``item``'s metadata with the namespace it is checked in (``--namespace`` if unset)."""
    metadata = item.obj.get("metadata")
    return {
        **(metadata if isinstance(metadata, dict) else {}),
        "namespace": item.namespace or namespace,
    }


def _error_text(exc: BaseException) -> str:
    """``ExceptionType: message``, clipped: the message may echo huge user values."""
    text = str(exc)
    return f"{type(exc).__name__}: {clip(text, 200)}" if text else type(exc).__name__


def synthetic_request(item: LoadedObject, namespace: str, index: int) -> AdmissionRequest:
    """The AdmissionRequest the API server would send for creating ``item.obj``."""
    group, _, version = str(item.obj.get("apiVersion", "")).rpartition("/")
    scoped = item.kind not in CLUSTER_SCOPED
    return AdmissionRequest.model_validate(
        {
            "uid": f"snapready-check-{index}",
            "kind": {"group": group, "version": version, "kind": item.kind},
            "name": item.name,
            "namespace": (item.namespace or namespace) if scoped else None,
            "operation": "CREATE",
            "object": item.obj,
        }
    )


def _place(item: LoadedObject) -> dict[str, Any]:
    """Where ``item`` is: ``file``, ``document`` index and 1-based ``line`` (None if unknown)."""
    return {"file": item.file or None, "document": item.document, "line": item.line}


def _finding_json(finding: Finding, outcome: Mode, item: LoadedObject) -> dict[str, Any]:
    return {
        **_place(item),
        "rule": finding.rule,
        "path": finding.path,
        "message": finding.message,
        "severity": finding.severity,
        "outcome": _OUTCOME[outcome],
    }


def _decision_name(decision: Decision) -> str:
    if not decision.allowed:
        return "deny"
    return "warn" if decision.warnings else "allow"


def place_findings(
    objects: Sequence[LoadedObject], results: list[dict[str, Any]], locator: FieldLocator
) -> None:
    """Set each finding's ``line`` (results in the order of ``objects``) to the line of its
    field (``kube.field_lines``: the key its path ends at, or the nearest parent there), one
    composition per document; a finding ``locator`` cannot place keeps its object's line."""
    for item, result in zip(objects, results, strict=True):
        findings = result["findings"]
        if not findings:
            continue
        lines = locator.lines(item.anchor, [finding["path"] for finding in findings])
        for finding in findings:
            finding["line"] = lines.get(finding["path"], finding["line"])


def check_object(item: LoadedObject, engine: Engine, namespace: str, index: int) -> dict[str, Any]:
    """One result: identity, matching policies, decision and findings (docs/reference/check.md);
    each finding at its object's line (``place_findings`` then puts it on its field's).

    An unexpected exception while judging becomes a ``decision: "error"`` result naming the
    object (the caller exits 2), so one odd object never hides the others' results.
    """
    try:
        return _judge(item, engine, namespace, index)
    except Exception as exc:  # reported per object; exit code 2
        scoped = item.kind not in CLUSTER_SCOPED
        return {
            "source": item.source,
            **_place(item),
            "kind": item.kind,
            "namespace": (item.namespace or namespace) if scoped else None,
            "name": item.name,
            "policies": [],
            "mode": None,
            "decision": "error",
            "message": f"snapready: could not check {item.ref}: {_error_text(exc)}",
            "warnings": [],
            "findings": [],
        }


def _judge(item: LoadedObject, engine: Engine, namespace: str, index: int) -> dict[str, Any]:
    request = synthetic_request(item, namespace, index)
    decision = admit(request, "validate", engine)
    audit = decision.audit
    mode: Mode | None = audit.get("mode")
    findings: list[Finding] = list(audit.get("findings", ()))
    outcomes: list[Mode] = list(audit.get("outcomes", ()))
    policy_text = audit.get("policy")
    return {
        "source": item.source,
        **_place(item),
        "kind": item.kind,
        "namespace": request.namespace,
        "name": item.name,
        "policies": [p for p in policy_text.split(",") if p]
        if isinstance(policy_text, str)
        else [],
        "mode": mode,
        "decision": _decision_name(decision),
        "message": decision.message,
        "warnings": list(decision.warnings),
        "findings": [_finding_json(f, o, item) for f, o in zip(findings, outcomes, strict=True)],
    }
