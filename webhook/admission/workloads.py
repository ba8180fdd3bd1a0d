"""Validation of custom resources that embed pod templates (agent-sandbox, LeaderWorkerSet, Ray,
KServe, JobSet, Argo Rollouts, and the ``workloads.extra`` setting's).

Each pod view of the object (``kube.custom_views.workload_views``: one per template, e.g. a Ray
head and every worker group) is matched against the policies with the labels its controller
adds, judged by the same rules as a Deployment's template, and given the same rollout warning;
the views' decisions are combined into one (denied if any view is, every finding and warning
kept, each naming its path in the custom resource: ``spec.podTemplate.spec.containers[0]``).
On UPDATE a view whose template equals ``oldObject``'s is not judged again, and an object being
deleted is not judged at all (as for Deployments, ``engine.template_unchanged``).
"""

from __future__ import annotations

from dataclasses import replace

from webhook.admission.decision import decide, overlap_findings
from webhook.admission.engine import Engine, not_selected, selected_pod_context, validate_context
from webhook.admission.rollout import rollout_warning
from webhook.base.types import Endpoint
from webhook.kube.custom_views import matching_labels, workload_views
from webhook.kube.responses import Decision, allowed, bounded_warnings, denied, with_warnings
from webhook.kube.review import AdmissionRequest
from webhook.kube.workloads import PodView, metadata_of
from webhook.rules import evaluate


def handle_custom(request: AdmissionRequest, endpoint: Endpoint, engine: Engine) -> Decision:
    """Validate every pod view of a custom resource (CREATE/UPDATE on ``/validate``)."""
    obj = request.object
    if endpoint != "validate" or not isinstance(obj, dict) or request.sub_resource:
        return allowed()
    if request.operation == "UPDATE" and metadata_of(obj).get("deletionTimestamp"):
        return allowed()
    old = request.old_object if request.operation == "UPDATE" else None
    unchanged = _old_views(old, engine)
    decisions = [
        _judge(request, engine, view)
        for view in workload_views(obj, None, engine.workloads)
        if unchanged.get(view.spec_path) != view.pod
    ]
    return combine(decisions)


def _old_views(old: object, engine: Engine) -> dict[str, object]:
    if not isinstance(old, dict):
        return {}
    return {view.spec_path: view.pod for view in workload_views(old, None, engine.workloads)}


def _judge(request: AdmissionRequest, engine: Engine, view: PodView) -> Decision:
    obj = request.object
    assert isinstance(obj, dict)  # checked by handle_custom
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
        return not_selected(request, obj, engine, labels)
    if view.renames:
        findings = [*overlap_findings(ctx), *evaluate(ctx, engine.rules)]
        moved = [replace(f, path=view.object_path(f.path)) for f in findings]
        decision = decide(moved, ctx)
    else:
        decision = validate_context(ctx, engine)
    warning = rollout_warning(ctx) if decision.allowed else None
    return with_warnings(decision, [warning]) if warning else decision


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
