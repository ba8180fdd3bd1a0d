"""From findings to a decision: the effective enforcement mode of a pod or namespace, where each
finding ends (deny, warning, audit), and the namespace helpers every handler shares. Pure module."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, cast

from webhook.base.config import Settings
from webhook.base.keys import ENFORCEMENT, IGNORE, SPEC_HASH
from webhook.base.text import clip
from webhook.base.types import Finding, Mode, RawObject, Wording
from webhook.kube.matching import Policy
from webhook.kube.responses import (
    Decision,
    allowed,
    bounded_lines,
    bounded_warnings,
    denied,
    patched,
)
from webhook.kube.review import AdmissionRequest
from webhook.mutation import WORDINGS as MUTATION_WORDINGS
from webhook.mutation import Mutation, container_count
from webhook.pod.context import PodContext
from webhook.rules import WORDINGS as PREDICTION_WORDINGS
from webhook.snapshots.audit import admitted
from webhook.snapshots.state import ClusterState

_MODE_STRICTNESS: Mapping[str, int] = {"audit": 0, "warn": 1, "enforce": 2}
MUTATE_WORDINGS: Mapping[str, Wording] = {**MUTATION_WORDINGS, **PREDICTION_WORDINGS}
"""How each finding of the mutating webhook reads and which mode judges it, by rule id."""


def string_labels(labels: Any) -> Mapping[str, str]:
    """``metadata.labels`` as selectors read them: a dict of strings (``{}`` when absent).

    Label values are strings in every valid object; a hostile non-string value (a list would be
    unhashable in a selector's value set) is treated as absent rather than crash matching.
    """
    if not isinstance(labels, dict):
        return {}
    if all(type(value) is str for value in labels.values()):
        return labels
    return {key: value for key, value in labels.items() if isinstance(value, str)}


def request_namespace(request: AdmissionRequest, obj: RawObject) -> str:
    """Namespace to match policies in: ``request.namespace``, else the object's, else default."""
    if request.namespace:
        return request.namespace
    metadata = obj.get("metadata")
    namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
    return namespace if isinstance(namespace, str) and namespace else "default"


def namespace_ignored(state: ClusterState, namespace: str, settings: Settings) -> bool:
    """Namespace label ``<prefix>ignore: "true"`` excludes it even without a namespaceSelector."""
    labels = state.namespace_labels.get(namespace) or {}
    return labels.get(settings.prefix + IGNORE) == "true"


def effective_mode(
    policies: tuple[Policy, ...], namespace: str, state: ClusterState, settings: Settings
) -> Mode:
    """The mode a pod is judged in: each selecting policy contributes its own mode (its
    ``<prefix>enforcement`` annotation, else the namespace label ``<prefix>enforcement``, else the
    global ``settings.enforcement``) and the strictest wins, so a lenient policy never relaxes
    another policy's pods. Without policies (governance): namespace label, else global. Invalid
    values are ignored."""
    labels = state.namespace_labels.get(namespace) or {}
    label = labels.get(settings.prefix + ENFORCEMENT)
    fallback: Mode = cast(Mode, label) if label in _MODE_STRICTNESS else settings.enforcement
    if not policies:
        return fallback
    modes: list[Mode] = [
        cast(Mode, p.enforcement) if p.enforcement in _MODE_STRICTNESS else fallback
        for p in policies
    ]
    return max(modes, key=_MODE_STRICTNESS.__getitem__)


def overlap_findings(ctx: PodContext) -> list[Finding]:
    """A pod selected by several policies: which one GKE applies is undefined (advisory)."""
    if len(ctx.policies) < 2:
        return []
    names = ", ".join(p.name for p in ctx.policies)
    return [
        Finding(
            ctx.metadata_field("labels"),
            "policy-overlap",
            f"selected by several PodSnapshotPolicies ({names}); which one GKE applies is "
            "undefined: make the selectors disjoint",
            "warn",
        )
    ]


def not_stamped(ctx: PodContext) -> list[Finding]:
    """``not-stamped`` (warn): a selected Pod reached ``validate`` without the stamps snapready's
    mutating webhook always writes together (``snapshots.audit.admitted``: the label
    ``<prefix>selected: "true"`` and a ``<prefix>spec-hash`` shaped like its fingerprint,
    ``keys.FINGERPRINT_SHAPE``). A tenant can set either on the pod it creates, and one set by
    hand must not hide the warning; both forged, with a wrong fingerprint, are ``hash-drift``'s
    (it computes the fingerprint), except for ``rootfs-only`` policies or with ``hash-drift``
    disabled, and with the pod's true fingerprint nothing can tell them from snapready's.

    Every selected pod passes snapready's mutating webhook first, which always stamps it; a pod
    without the annotation means that call was skipped (``failurePolicy: Ignore`` with snapready
    unreachable or slow, or a webhook configuration that does not match): the pod was neither
    fingerprinted nor given its helpers, silently. The one exception snapready makes itself: a
    pod over ``injection.max_containers`` is left unmutated on purpose, and the warning says
    that instead (it used to blame ``failurePolicy: Ignore``). Pod templates are never stamped.
    """
    key = ctx.settings.annotation(SPEC_HASH)
    if ctx.kind != "Pod" or "not-stamped" in ctx.settings.rules.disabled:
        return []
    if admitted(ctx.metadata, ctx.settings.prefix):
        return []  # a forged v1 fingerprint is hash-drift's (it computes the fingerprint)
    stamp = ctx.annotations.get(key)
    limit = ctx.settings.injection.max_containers
    if stamp is not None:
        message = (
            f"{clip(stamp)!r} is not snapready's (set with the pod?): its mutating webhook did "
            "not run for this pod (failurePolicy Ignore?): no fingerprint, no helpers; recreate "
            "the pod"
        )
    elif container_count(ctx.spec) > limit:
        message = (
            f"snapready did not mutate this pod: it has more than {limit} containers "
            "(injection.max_containers): no fingerprint, no helpers, no snapready.io/selected "
            "label, so its restore outcome is not tracked; raise injection.max_containers"
        )
    else:
        message = (
            "snapready's mutating webhook did not run for this pod (failurePolicy Ignore while "
            "it was unreachable?): no fingerprint, no helpers; recreate the pod"
        )
    return [Finding(ctx.metadata_field("annotations", key), "not-stamped", message, "warn")]


def finding_outcome(finding: Finding, mode: Mode, overrides: Mapping[str, Mode]) -> Mode:
    """Where one finding ends up: ``enforce`` (denies), ``warn`` (a warning) or ``audit`` (only
    logged). The rule's own mode override (``settings.rules.modes``) beats the pod's ``mode``;
    ``warn``-severity findings never deny."""
    rule_mode = overrides.get(finding.rule, mode)
    if finding.severity == "warn":
        return "audit" if rule_mode == "audit" else "warn"
    return rule_mode


def decide_findings(
    findings: list[Finding], mode: Mode, overrides: Mapping[str, Mode], subject: str
) -> Decision:
    """Turn findings into a decision under ``mode`` and the per-rule ``overrides``.

    ``enforce`` outcomes deny (all listed, after ``subject``, e.g. "Pod is not snapshot-ready
    ..."); ``warn`` ones become warnings; ``audit`` ones are only recorded. ``Decision.audit``
    gets ``findings``, ``outcomes`` (the ``finding_outcome`` of each, same order) and ``mode``,
    so logs, metrics and ``check`` never recompute them.
    """
    outcomes = [finding_outcome(finding, mode, overrides) for finding in findings]
    denials = [f for f, o in zip(findings, outcomes, strict=True) if o == "enforce"]
    warnings = [f for f, o in zip(findings, outcomes, strict=True) if o == "warn"]
    warning_lines = bounded_warnings([f"[{f.rule}] {f.path}: {f.message}" for f in warnings])
    if denials:
        lines = "\n".join(
            bounded_lines([f"- [{f.rule}] {f.path}: {f.message}" for f in denials], more="problems")
        )
        message = f"snapready: {subject} ({len(denials)} problem(s)):\n{lines}"
        decision = denied(message, warnings=warning_lines)
    else:
        decision = allowed(warnings=warning_lines)
    decision.audit.update({"findings": findings, "outcomes": outcomes, "mode": mode})
    return decision


def decide(findings: list[Finding], ctx: PodContext) -> Decision:
    """``decide_findings`` for one pod view; the denial names the kind and the policies."""
    where = ", ".join(p.name for p in ctx.policies)
    subject = f"{ctx.kind} is not snapshot-ready for PodSnapshotPolicy {where}"
    decision = decide_findings(findings, ctx.mode, ctx.settings.rules.modes, subject)
    decision.audit["policy"] = ctx.policy_ids
    return decision


class Worded(NamedTuple):
    """Findings with their own wording, judged (``judge_worded``).

    Attributes:
        findings: the findings kept (``rules.disabled`` dropped), in the order given.
        outcomes: the ``finding_outcome`` of each, same order.
        denial: the denial text of the first ``enforce`` outcome, or None.
        warnings: the warning line of each ``warn`` outcome, bounded as the API server requires.
    """

    findings: list[Finding]
    outcomes: list[Mode]
    denial: str | None
    warnings: tuple[str, ...]


def judge_worded(
    findings: list[Finding], mode: Mode, settings: Settings, wordings: Mapping[str, Wording]
) -> Worded:
    """Judge findings that keep their own texts (``Wording``): those of ``settings.rules.disabled``
    are dropped; each is judged in ``mode`` when its wording says ``pod_mode``, else as
    ``enforce`` (its severity decides), ``settings.rules.modes`` overriding either.

    Raises:
        KeyError: a finding whose rule id has no entry in ``wordings``.
    """
    if not findings:
        return Worded([], [], None, ())  # the usual case: nothing to say
    disabled, overrides = settings.rules.disabled, settings.rules.modes
    kept: list[Finding] = []
    outcomes: list[Mode] = []
    lines: list[str] = []
    denial: str | None = None
    for finding in findings:
        if finding.rule in disabled:
            continue
        wording = wordings[finding.rule]
        outcome = finding_outcome(finding, mode if wording.pod_mode else "enforce", overrides)
        kept.append(finding)
        outcomes.append(outcome)
        if outcome == "enforce" and denial is None:
            denial = wording.denial_for(finding)
        elif outcome == "warn":
            lines.append(wording.warning_for(finding))
    return Worded(kept, outcomes, denial, bounded_warnings(lines) if lines else ())


def decide_worded(
    findings: list[Finding], mode: Mode, settings: Settings, wordings: Mapping[str, Wording]
) -> Decision:
    """``judge_worded`` as a decision: ``denied`` by the first ``enforce`` outcome (its text
    alone), else ``allowed`` with the warnings; ``audit`` holds ``findings`` and ``outcomes``."""
    worded = judge_worded(findings, mode, settings, wordings)
    if worded.denial is not None:
        decision = denied(worded.denial)
    else:
        decision = allowed(warnings=worded.warnings)
    decision.audit.update({"findings": worded.findings, "outcomes": worded.outcomes})
    return decision


def decide_mutation(mutation: Mutation, findings: list[Finding], ctx: PodContext) -> Decision:
    """The mutating webhook's decision for one selected pod: its patch, unless a finding denies.

    Args:
        mutation: what ``mutation.mutate`` did (patch, its own findings, audit facts).
        findings: every finding of this admission in decision order (the mutation's first, then
            ``rules.prediction_findings``); each rule id must be in ``MUTATE_WORDINGS``.
        ctx: the pod view (mode, settings: ``rules.disabled`` drops findings, ``rules.modes``
            overrides the mode a finding is judged in).

    Returns:
        ``denied`` with the denial text of the first finding whose outcome is ``enforce`` (no
        warnings, no patch: one reason at a time, as before these were findings), else
        ``patched`` with the warning line of each ``warn`` outcome (bounded). ``audit`` holds
        ``policy``, ``mode``, ``findings`` and ``outcomes`` (``finding_outcome``), plus, when
        admitted, ``mutators`` and ``collisions`` (if the mutators ran) and ``prediction``.
    """
    worded = judge_worded(findings, ctx.mode, ctx.settings, MUTATE_WORDINGS)
    if worded.denial is not None:
        decision = denied(worded.denial)
    else:
        decision = patched(mutation.ops, warnings=worded.warnings)
        if mutation.mutators is not None:
            decision.audit.update(
                {"mutators": mutation.mutators, "collisions": mutation.collisions}
            )
        if mutation.prediction is not None:
            decision.audit["prediction"] = mutation.prediction.outcome
    decision.audit.update(
        {
            "findings": worded.findings,
            "outcomes": worded.outcomes,
            "policy": ctx.policy_ids,
            "mode": ctx.mode,
        }
    )
    return decision
