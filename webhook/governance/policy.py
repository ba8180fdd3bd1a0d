"""Governance rules for PodSnapshotPolicy objects (pure: no I/O).

A policy decides which pods GKE snapshots (full memory images, secrets included) and for how long
they are kept. Checks: the storage config exists, the selector is valid and not empty, retention is
set in GKE's format, grouping labels are required by the selector, the trigger type is documented,
no other policy of the namespace selects the same pods, and its ``<prefix>enforcement``
annotation is a mode (``enforcement_annotation``); in cluster mode an ungrouped policy
whose pods come from several workloads is warned (``cross-workload``). Field names per GKE's CRD
(tests/data/crds/podsnapshot.gke.io.yaml) and docs/gke-facts.md#section-2.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from webhook.base.errors import ConfigError
from webhook.base.text import clip, clip_all
from webhook.base.types import MODES, Finding, RawObject, Severity
from webhook.kube.matching import LabelSelector, Requirement, compile_selector
from webhook.snapshots.state import ClusterState

DOCUMENTED_TRIGGERS = ("workload", "manual")
# GKE's CRD pattern ^(\d+)\s*(y|mo|d|h|min)$ (tests/data/crds). OpenAPI patterns are ECMA-262:
# ASCII digits, and `$` does not accept a trailing newline, hence re.ASCII and fullmatch.
RETENTION_PATTERN = re.compile(r"([0-9]+)\s*(y|mo|d|h|min)", re.ASCII)


def policy_findings(
    obj: RawObject, state: ClusterState, *, namespace: str, name: str
) -> list[Finding]:
    """Findings for one PodSnapshotPolicy object (CRD fields per docs/gke-facts.md#section-2).

    ``state`` supplies the storage configs and the other policies of ``namespace``; the policy
    named ``name`` itself is excluded from the overlap check (UPDATE, and the offline ``check``
    whose file source already holds it).
    """
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [Finding("spec", "policy-spec", "spec must be an object", "deny")]
    findings = [*_storage_config_name(spec, state), *_retention(spec), *_trigger(spec)]
    selector = spec.get("selector")
    if not isinstance(selector, dict):
        return [*findings, _finding("spec.selector", "policy-selector", _SELECTOR_REQUIRED)]
    try:
        compiled = compile_selector(selector, where="spec.selector")
    except ConfigError as exc:
        return [*findings, _finding("spec.selector", "policy-selector", str(exc))]
    if compiled.is_empty:
        message = f"empty selector snapshots every pod of namespace {namespace}: add matchLabels"
        findings.append(_finding("spec.selector", "policy-selector-empty", message, "warn"))
    findings += _grouping_labels(spec, compiled)
    findings += _overlaps(compiled, state, namespace, name)
    findings += ungrouped_workloads(spec, compiled, state, namespace)
    return findings


def ungrouped_workloads(
    spec: Mapping[str, Any], selector: LabelSelector, state: ClusterState, namespace: str
) -> list[Finding]:
    """``cross-workload`` (warn): a policy without ``snapshotGroupingRules`` whose selector picks
    stamped pods of more than one workload (cluster mode pod cache; top controllers from the
    pods' ownerReferences). Equal fingerprints then restore each other's memory
    (docs/gke-facts.md#section-9: prefill/decode Deployments, agent-sandbox tenants). Fix: group by
    a label whose value differs per workload."""
    if spec.get("snapshotGroupingRules") or not state.pods_known:
        return []
    workloads = sorted(
        {
            pod.owner.text() if pod.owner is not None else f"Pod {pod.name}"
            for pod in tuple(state.pods.values())  # the live dict: a copy (ClusterState.pods)
            if pod.namespace == namespace and selector.matches(pod.labels)
        }
    )
    if len(workloads) < 2:
        return []
    names = clip_all(workloads, limit=3)
    message = (
        f"ungrouped, it selects pods of {len(workloads)} workloads ({names}): equal fingerprints "
        "restore each other's memory; add snapshotGroupingRules by a per-workload label"
    )
    return [_finding("spec", "cross-workload", message, "warn")]


_SELECTOR_REQUIRED = "required LabelSelector, e.g. {matchLabels: {app: my-app}}"


def enforcement_annotation(obj: RawObject, key: str) -> list[Finding]:
    """``policy-enforcement`` (warn): the policy's ``key`` annotation (``snapready.io/enforcement``)
    is no mode. Admission then ignores it (``admission.decision.effective_mode``: the policy's
    pods follow the namespace label, else the global mode), so a typo such as ``audti`` would
    leave them denied where the team meant to audit, without a word. Fix: one of ``MODES``."""
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    value = annotations.get(key) if isinstance(annotations, dict) else None
    if value is None or value in MODES:
        return []
    shown = repr(clip(value if isinstance(value, str) else json.dumps(value, default=str)))
    lower = value.strip().lower() if isinstance(value, str) else ""
    hint = f" (modes are lower case: {lower!r})" if lower in MODES else ""
    message = (
        f"{shown} is not enforce, warn or audit{hint}: ignored, so this policy's pods follow "
        "the namespace label or the global mode"
    )
    path = f'metadata.annotations["{key}"]'
    return [_finding(path, "policy-enforcement", message, "warn")]


def _finding(path: str, rule: str, message: str, severity: Severity = "deny") -> Finding:
    return Finding(path, rule, message, severity)


def _storage_config_name(spec: Mapping[str, Any], state: ClusterState) -> list[Finding]:
    name = spec.get("storageConfigName")
    path = "spec.storageConfigName"
    if not isinstance(name, str) or not name:
        return [_finding(path, "policy-storage-config", "required: a PodSnapshotStorageConfig")]
    if name in state.storage_configs:
        return []
    if not state.synced:
        message = f"cannot verify PodSnapshotStorageConfig {name!r} yet (cache not synced)"
        return [_finding(path, "policy-storage-config", message, "warn")]
    known = ", ".join(sorted(state.storage_configs)[:5]) or "none"
    message = f"no PodSnapshotStorageConfig named {name!r} (known: {known}): create it first"
    return [_finding(path, "policy-storage-config", message)]


def _retention(spec: Mapping[str, Any]) -> list[Finding]:
    retention = spec.get("retentionConfig")
    if retention is None:
        message = (
            "no retentionConfig: snapshots (memory images, secrets included) stay until deleted"
            " by hand; set retentionConfig.lastAccessTimeout, e.g. 30d"
        )
        return [_finding("spec.retentionConfig", "policy-retention", message, "warn")]
    path = "spec.retentionConfig.lastAccessTimeout"
    timeout = retention.get("lastAccessTimeout") if isinstance(retention, dict) else None
    if isinstance(timeout, str) and RETENTION_PATTERN.fullmatch(timeout):
        return []
    message = f"{timeout!r} is not <number><unit> with unit y, mo, d, h or min (e.g. 30d, 12h)"
    return [_finding(path, "policy-retention-format", message)]


def _trigger(spec: Mapping[str, Any]) -> list[Finding]:
    trigger = spec.get("triggerConfig")
    kind = trigger.get("type") if isinstance(trigger, dict) else None
    if kind in DOCUMENTED_TRIGGERS:
        return []
    what = "missing" if kind is None else f"{kind!r} is not documented by GKE"
    message = f"{what}: use workload (app writes /proc/gvisor/checkpoint) or manual"
    return [_finding("spec.triggerConfig.type", "policy-trigger-type", message, "warn")]


def _grouping_labels(spec: Mapping[str, Any], selector: LabelSelector) -> list[Finding]:
    rules = spec.get("snapshotGroupingRules")
    group = rules.get("groupByLabelValue") if isinstance(rules, dict) else None
    labels = group.get("labels") if isinstance(group, dict) else None
    if not isinstance(labels, list):
        return []
    required = selector.required_keys()
    findings = []
    for index, label in enumerate(labels):
        if isinstance(label, str) and label not in required:
            message = (
                f"selector does not require label {label!r}: pods without it fall into another"
                f" group; add matchExpressions {{key: {label}, operator: Exists}}"
            )
            path = f"spec.snapshotGroupingRules.groupByLabelValue.labels[{index}]"
            findings.append(_finding(path, "policy-grouping-labels", message, "warn"))
    return findings


def _overlaps(
    selector: LabelSelector, state: ClusterState, namespace: str, name: str
) -> list[Finding]:
    others = state.policies.by_namespace.get(namespace, ())
    names = [p.name for p in others if p.name != name and selectors_overlap(selector, p.selector)]
    if not names:
        return []
    message = (
        f"overlaps PodSnapshotPolicy {', '.join(names)} in {namespace}: a pod matching both gets"
        " an undefined policy; make the selectors disjoint"
    )
    return [_finding("spec.selector", "policy-overlap", message, "warn")]


def selectors_overlap(first: LabelSelector, second: LabelSelector) -> bool:
    """Whether some label set satisfies both selectors (Kubernetes semantics, see matching.py).

    Requirements on different keys are independent, so the conjunction is satisfiable iff every
    key's requirements are. Exact for In/NotIn/Exists/DoesNotExist under one assumption: a label
    may take a value outside any finite NotIn list (true for real label values; ``In`` values are
    taken as given, not re-validated as label syntax).
    """
    by_key: dict[str, list[Requirement]] = {}
    for requirement in (*first.requirements, *second.requirements):
        by_key.setdefault(requirement.key, []).append(requirement)
    return all(_key_satisfiable(terms) for terms in by_key.values())


def _key_satisfiable(terms: list[Requirement]) -> bool:
    if all(t.operator in ("NotIn", "DoesNotExist") for t in terms):
        return True  # the label is absent
    if any(t.operator == "DoesNotExist" for t in terms):
        return False  # must be both present (In/Exists) and absent
    allowed_values: frozenset[str] | None = None  # None: any value
    for term in terms:
        if term.operator == "In":
            allowed_values = term.values if allowed_values is None else allowed_values & term.values
    if allowed_values is None:
        return True  # Exists (+ NotIn): pick a value outside the finite NotIn lists
    excluded = frozenset().union(*(t.values for t in terms if t.operator == "NotIn"))
    return bool(allowed_values - excluded)
