"""Admission of one review, without HTTP: dispatch, policy match, mutate or validate, decide.

``admit`` is the single entry point used by the HTTPS app, the ``review`` CLI command and the
offline ``check`` command, so all three answer identically.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from webhook.config import Settings
from webhook.context import PodContext, join_path
from webhook.matching import Policy
from webhook.mutation import mutate_pod
from webhook.responses import Decision, allowed, bounded_lines, bounded_warnings, denied
from webhook.review import AdmissionRequest
from webhook.rules import RULES, evaluate
from webhook.rules.sandbox import EphemeralCompat
from webhook.state import ClusterState
from webhook.types import Endpoint, Finding, Mode, RawObject, Rule

Handler = Callable[[AdmissionRequest, Endpoint, "Engine"], Decision]
_MODE_STRICTNESS: Mapping[str, int] = {"audit": 0, "warn": 1, "enforce": 2}

# Where each pod controller keeps its pod template (apps/v1, batch/v1).
TEMPLATE_PATHS: Mapping[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}


@dataclass
class Engine:
    """The admission engine: settings, a cluster-state getter and the rule table.

    Attributes:
        settings: validated settings.
        state: returns the current ``ClusterState`` (swapped atomically by sources; no I/O).
        rules: the rule table (tests may pass their own).
        governance: validates PodSnapshotPolicy/StorageConfig objects (set by the governance
            module; default allows).
    """

    settings: Settings
    state: Callable[[], ClusterState]
    rules: tuple[Rule, ...] = RULES
    governance: Callable[[AdmissionRequest, RawObject, Engine], Decision] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def admit(request: AdmissionRequest, endpoint: Endpoint, engine: Engine) -> Decision:
    """Decide one AdmissionReview request for ``endpoint`` (``mutate`` or ``validate``).

    Steps: 1. dispatch on group/kind/subresource; 2. unknown kinds, DELETE/CONNECT and null objects
    are allowed untouched; 3. the handler matches policies and mutates or validates.
    Exceptions propagate to the caller, which applies the failure policy.
    """
    handler = DISPATCH.get((request.kind.group, request.kind.kind))
    if handler is None or request.operation not in ("CREATE", "UPDATE"):
        return allowed()
    return handler(request, endpoint, engine)


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
    return labels.get(settings.prefix + "ignore") == "true"


def effective_mode(
    policies: tuple[Policy, ...], namespace: str, state: ClusterState, settings: Settings
) -> Mode:
    """Mode precedence: policy annotation (the strictest of the selecting policies) > namespace
    label ``<prefix>enforcement`` > global ``settings.enforcement``. Invalid values are ignored."""
    from_policies: list[Mode] = [
        cast(Mode, p.enforcement) for p in policies if p.enforcement in _MODE_STRICTNESS
    ]
    if from_policies:
        return max(from_policies, key=_MODE_STRICTNESS.__getitem__)
    labels = state.namespace_labels.get(namespace) or {}
    label = labels.get(settings.prefix + "enforcement")
    if label in _MODE_STRICTNESS:
        return cast(Mode, label)
    return settings.enforcement


def pod_context(
    *,
    spec: Any,
    metadata: Any,
    spec_path: str,
    metadata_path: str,
    namespace: str,
    kind: str,
    policies: tuple[Policy, ...],
    engine: Engine,
    state: ClusterState,
) -> PodContext:
    """Build the view rules and mutators see; null spec/metadata become ``{}``."""
    return PodContext(
        spec=spec if isinstance(spec, dict) else {},
        metadata=metadata if isinstance(metadata, dict) else {},
        spec_path=spec_path,
        metadata_path=metadata_path,
        namespace=namespace,
        kind=kind,
        policies=policies,
        settings=engine.settings,
        cluster=state,
        mode=effective_mode(policies, namespace, state, engine.settings),
    )


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


def validate_context(ctx: PodContext, engine: Engine) -> Decision:
    """Run the rule table (plus the policy-overlap check) over one pod view and decide."""
    return decide([*overlap_findings(ctx), *evaluate(ctx, engine.rules)], ctx)


def _handle_pod(request: AdmissionRequest, endpoint: Endpoint, engine: Engine) -> Decision:
    obj = request.object
    if not isinstance(obj, dict):
        return allowed()
    if request.sub_resource:
        if request.sub_resource == "ephemeralcontainers" and endpoint == "validate":
            return _handle_ephemeral(request, obj, engine)
        return allowed()
    if request.operation != "CREATE":
        return allowed()  # pods are judged and mutated once, at creation
    ctx = selected_pod_context(request, obj, engine)
    if ctx is None:
        return allowed()  # the fast path: no policy selects this pod
    if endpoint == "mutate":
        return mutate_pod(obj, ctx)
    return validate_context(ctx, engine)


def selected_pod_context(
    request: AdmissionRequest,
    obj: RawObject,
    engine: Engine,
    *,
    view: RawObject | None = None,
    base: str = "",
) -> PodContext | None:
    """The rule view of a pod, or of a controller's pod template, when a policy of the request
    namespace selects it; None when nothing selects it or the namespace is labelled
    ``<prefix>ignore``. Reads the in-memory state only.

    Args:
        request, obj: the request and its ``object`` (namespace fallback).
        view: the pod-shaped dict with ``metadata``/``spec`` (default ``obj``, a Pod).
        base: field path of ``view`` in ``obj`` (``""`` for a Pod, ``spec.template``...).
    """
    pod_like = obj if view is None else view
    state = engine.state()
    namespace = request_namespace(request, obj)
    if namespace_ignored(state, namespace, engine.settings):
        return None
    metadata = pod_like.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    policies = state.policies.select(namespace, string_labels(labels))
    if not policies:
        return None
    return pod_context(
        spec=pod_like.get("spec"),
        metadata=metadata,
        spec_path=join_path(base, "spec"),
        metadata_path=join_path(base, "metadata"),
        namespace=namespace,
        kind=request.kind.kind,
        policies=policies,
        engine=engine,
        state=state,
    )


def _handle_ephemeral(request: AdmissionRequest, obj: RawObject, engine: Engine) -> Decision:
    """Containers added through ``pods/ephemeralcontainers``: only ``sandbox-compat`` applies, and
    only to containers new relative to ``oldObject`` (the pod itself was judged at creation)."""
    ctx = selected_pod_context(request, obj, engine)
    if ctx is None:
        return allowed()
    return decide(evaluate(ctx, (EphemeralCompat(request.old_object),)), ctx)


def _handle_controller(request: AdmissionRequest, endpoint: Endpoint, engine: Engine) -> Decision:
    obj = request.object
    if endpoint != "validate" or not isinstance(obj, dict) or request.sub_resource:
        return allowed()
    path = TEMPLATE_PATHS[request.kind.kind]
    template = pod_template(obj, path)
    if template is None or template_unchanged(request, obj, template, path):
        return allowed()
    ctx = selected_pod_context(request, obj, engine, view=template, base=join_path("", *path))
    if ctx is None:
        return allowed()
    return validate_context(ctx, engine)


def pod_template(obj: Any, path: tuple[str, ...]) -> RawObject | None:
    """The pod template at ``path`` in a controller object (``TEMPLATE_PATHS``), or None."""
    template: Any = obj
    for key in path:
        template = template.get(key) if isinstance(template, dict) else None
    return template if isinstance(template, dict) else None


def template_unchanged(
    request: AdmissionRequest, obj: RawObject, template: RawObject, path: tuple[str, ...]
) -> bool:
    """Whether an UPDATE leaves nothing for us to judge: the object is being deleted, or its pod
    template equals ``oldObject``'s.

    Controllers and users update workloads for reasons that do not touch the template (scaling,
    labels, the garbage collector removing ``foregroundDeletion``/``orphan`` finalizers, a Job
    controller's bookkeeping). Denying those for a template that was already admitted, or that
    predates its policy, would block scaling and leave deleted objects stuck Terminating. Pods
    made from such a template are still judged when they are created.
    """
    if request.operation != "UPDATE":
        return False
    metadata = obj.get("metadata")
    if isinstance(metadata, dict) and metadata.get("deletionTimestamp"):
        return True
    return template == pod_template(request.old_object, path)


def _handle_snapshot_crd(request: AdmissionRequest, endpoint: Endpoint, engine: Engine) -> Decision:
    obj = request.object
    if endpoint != "validate" or not isinstance(obj, dict) or engine.governance is None:
        return allowed()
    return engine.governance(request, obj, engine)


DISPATCH: dict[tuple[str, str], Handler] = {
    ("", "Pod"): _handle_pod,
    **{
        ("apps", kind): _handle_controller
        for kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet")
    },
    ("batch", "Job"): _handle_controller,
    ("batch", "CronJob"): _handle_controller,
    ("podsnapshot.gke.io", "PodSnapshotPolicy"): _handle_snapshot_crd,
    ("podsnapshot.gke.io", "PodSnapshotStorageConfig"): _handle_snapshot_crd,
}
"""The one explicit dispatch table: (API group, kind) -> handler. Everything else is allowed."""
