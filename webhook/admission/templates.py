"""The pod-template handler: built-in pod controllers and custom workloads through one route.

Deployment, StatefulSet, DaemonSet, ReplicaSet, Job and CronJob (``kube.workloads.TEMPLATE_PATHS``)
have one pod view, their template; a custom resource that embeds pod templates (agent-sandbox,
LeaderWorkerSet, Ray, KServe, JobSet, Argo Rollouts, and the ``workloads.extra`` setting's:
``engine.workloads``) has one view per template (``kube.custom_views.workload_views``: a Ray head
and every worker group). Each view is matched against the policies with the labels its controller
adds, judged by the rule table, and given the rollout warning (``admission.rollout``); the views'
decisions are combined into one (denied if any view is, every finding and warning kept, each
naming its path in the object: ``spec.podTemplate.spec.containers[0]``).

Judged on ``/validate`` only, on CREATE and on an UPDATE that changes a view: controllers and
users update workloads for reasons that do not touch the template (scaling, labels, the garbage
collector removing ``foregroundDeletion``/``orphan`` finalizers, a Job controller's bookkeeping).
Denying those for a template that was already admitted, or that predates its policy, would block
scaling and leave deleted objects stuck Terminating; so a view equal to ``oldObject``'s is not
judged again and an object being deleted is not judged at all. Pods made from such a template are
still judged when they are created. Pure module.
"""

from __future__ import annotations

from dataclasses import replace

from webhook.admission.context import (
    Engine,
    not_selected,
    selected_pod_context,
    validate_context,
)
from webhook.admission.decision import decide, judge_worded, overlap_findings
from webhook.admission.rollout import RULE as ROLLOUT_RULE
from webhook.admission.rollout import WORDING as ROLLOUT_WORDING
from webhook.admission.rollout import rollout_findings
from webhook.base.config import Settings
from webhook.base.types import Endpoint, Finding, RawObject
from webhook.kube.custom_views import controller_labels, matching_labels, workload_views
from webhook.kube.responses import Decision, allowed, bounded_warnings, denied
from webhook.kube.review import AdmissionRequest
from webhook.kube.workloads import TEMPLATE_PATHS, PodView, metadata_of, pod_template
from webhook.pod.context import join_path
from webhook.rules import evaluate

CONTROLLER_GROUPS = ("apps", "batch")
"""API groups of the built-in pod controllers (``TEMPLATE_PATHS`` names their kinds)."""


def handle_templates(request: AdmissionRequest, endpoint: Endpoint, engine: Engine) -> Decision:
    """Validate every pod view of a pod controller or custom workload (a ``context.Handler``).

    Allowed untouched: ``/mutate``, a subresource (``status``, ``scale``), a null object, an
    UPDATE of an object being deleted, views equal to ``oldObject``'s.
    """
    obj = request.object
    if endpoint != "validate" or not isinstance(obj, dict) or request.sub_resource:
        return allowed()
    if request.operation == "UPDATE" and metadata_of(obj).get("deletionTimestamp"):
        return allowed()
    old = request.old_object if request.operation == "UPDATE" else None
    unchanged = {view.spec_path: view.pod for view in template_views(request, old, engine)}
    decisions = [
        _judge(request, obj, engine, view)
        for view in template_views(request, obj, engine)
        if unchanged.get(view.spec_path) != view.pod
    ]
    return combine(decisions)


def template_views(request: AdmissionRequest, obj: object, engine: Engine) -> list[PodView]:
    """The pod views of ``obj`` as ``request.kind`` names it; ``[]`` when ``obj`` is no mapping.

    A built-in controller: its template at ``TEMPLATE_PATHS`` (not the pod its controller makes
    of it, so a StatefulSet's claim volumes are not judged), with the labels the controller adds
    (``custom_views.controller_labels``). A custom workload: ``custom_views.workload_views``.
    """
    if not isinstance(obj, dict):
        return []
    kind = request.kind.kind
    if request.kind.group not in CONTROLLER_GROUPS or kind not in TEMPLATE_PATHS:
        return workload_views(obj, None, engine.workloads)
    path = TEMPLATE_PATHS[kind]
    template = pod_template(obj, path)
    if template is None:
        return []
    base = join_path("", *path)
    return [
        PodView(
            pod=template,
            spec_path=join_path(base, "spec"),
            metadata_path=join_path(base, "metadata"),
            added_labels=controller_labels(obj),
        )
    ]


def _judge(request: AdmissionRequest, obj: RawObject, engine: Engine, view: PodView) -> Decision:
    labels = matching_labels(view)
    spec_site = view.metadata_path == "metadata"
    base = view.spec_path.removesuffix(".spec")
    ctx = selected_pod_context(
        request,
        obj,
        engine,
        view=view.pod,
        base=base,
        labels=labels,
        spec_path=view.spec_path if spec_site else None,
    )
    if ctx is None:
        return not_selected(request, obj, engine, labels, join_path(view.metadata_path, "labels"))
    if view.renames:
        findings = [*overlap_findings(ctx), *evaluate(ctx, engine.rules)]
        moved = [replace(f, path=view.object_path(f.path)) for f in findings]
        decision = decide(moved, ctx)
    else:
        decision = validate_context(ctx, engine)
    if not decision.allowed:
        return decision
    return with_rollout(decision, rollout_findings(ctx), ctx.settings)


def with_rollout(decision: Decision, findings: list[Finding], settings: Settings) -> Decision:
    """``decision`` (allowed) with the ``rollout-cold-start`` findings judged (``judge_worded``:
    ``rules.disabled`` drops them, ``rules.modes`` ``audit`` silences them; ``warn`` severity
    never denies): their warning lines appended, the findings and their outcomes added to
    ``decision.audit`` (logs, metrics, the audit's reports)."""
    worded = judge_worded(findings, "enforce", settings, ROLLOUT_WORDINGS)
    if not worded.findings:
        return decision
    audit = {
        **decision.audit,
        "findings": [*decision.audit.get("findings", ()), *worded.findings],
        "outcomes": [*decision.audit.get("outcomes", ()), *worded.outcomes],
    }
    warnings = bounded_warnings([*decision.warnings, *worded.warnings])
    return replace(decision, warnings=warnings, audit=audit)


ROLLOUT_WORDINGS = {ROLLOUT_RULE: ROLLOUT_WORDING}


def combine(decisions: list[Decision]) -> Decision:
    """One decision for several views: denied when any is (their messages joined), every
    warning (bounded as the API server requires), and the audit facts of all (findings and
    outcomes concatenated, policies joined without repeats, the first mode)."""
    if len(decisions) == 1:
        return decisions[0]
    if not decisions:
        return allowed()
    warnings = bounded_warnings([w for d in decisions for w in d.warnings])
    messages = [d.message for d in decisions if not d.allowed and d.message]
    decision = (
        denied("\n".join(messages), warnings=warnings) if messages else allowed(warnings=warnings)
    )
    policies: dict[str, None] = {}
    for d in decisions:
        for name in str(d.audit.get("policy") or "").split(","):
            if name:
                policies[name] = None
    judged = [d for d in decisions if "mode" in d.audit]
    if judged:
        decision.audit.update(
            {
                "findings": [f for d in judged for f in d.audit.get("findings", ())],
                "outcomes": [o for d in judged for o in d.audit.get("outcomes", ())],
                "mode": judged[0].audit["mode"],
                "policy": ",".join(policies),
            }
        )
    return decision
