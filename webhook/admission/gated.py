"""A pod whose scheduling gates hold it: its placement may still change, and is judged again.

While a pod has ``spec.schedulingGates`` the API server accepts updates that add nodeSelector
entries, narrow its required node affinity and add tolerations (KEP-3838 "mutable pod
scheduling directives", GA in 1.30: kubernetes pkg/apis/core/validation ``ValidatePodUpdate``;
Kueue sets a ResourceFlavor's node labels this way before it removes its gate). snapready judged
the pod at CREATE; such an UPDATE could add a placement its rules deny (``machine-family: e2``:
a hostile trial created a pod gated and unpinned, then pinned it). The validating webhook
``scheduling.snapready.io`` receives exactly these UPDATEs (``scheduling_condition``, rendered by
the chart), and ``rejudge`` denies what the change brings that was not there before, the
restore prediction's rules included (``restore.on_miss: deny``). The prediction stamped at
CREATE is not rewritten (only snapready's service account may write it, and this request is
the user's): ``snapready explain`` and the reports predict again from the live pod.
"""

from __future__ import annotations

from dataclasses import replace

from webhook.admission.context import Engine, selecting_policies, view_context
from webhook.admission.decision import MUTATE_WORDINGS, decide, decide_worded
from webhook.base.types import Finding, RawObject, mapping
from webhook.kube.responses import Decision, allowed
from webhook.kube.review import AdmissionRequest
from webhook.mutation.patch import Draft
from webhook.mutation.prediction import stamp_prediction
from webhook.pod.context import PodContext
from webhook.rules import evaluate, prediction_findings

SCHEDULING_FIELDS = ("nodeSelector", "affinity", "tolerations")
"""The pod fields a gated pod may still change that decide where it lands."""


def scheduling_condition() -> str:
    """The CEL ``matchCondition`` the chart renders (tests compare them): an UPDATE of a pod
    that had scheduling gates and whose nodeSelector, affinity, tolerations or labels changed
    (labels decide which policies select it: a review unselected a pod, pinned it, and put the
    labels back)."""
    changed = " || ".join(
        f"object.{side}.?{name}.orValue({empty}) != oldObject.{side}.?{name}.orValue({empty})"
        for side, name, empty in (
            ("spec", "nodeSelector", "{}"),
            ("spec", "affinity", "{}"),
            ("spec", "tolerations", "[]"),
            ("metadata", "labels", "{}"),
        )
    )
    return f"oldObject.spec.?schedulingGates.orValue([]).size() > 0 && ({changed})"


def placement_changed(request: AdmissionRequest) -> bool:
    """``scheduling_condition`` in Python: the UPDATE changes a gated pod's placement."""
    old, new = request.old_object, request.object
    if request.operation != "UPDATE" or not isinstance(old, dict) or not isinstance(new, dict):
        return False
    old_spec, new_spec = mapping(old.get("spec")), mapping(new.get("spec"))
    if not old_spec.get("schedulingGates"):
        return False
    labels = mapping(old.get("metadata")).get("labels"), mapping(new.get("metadata")).get("labels")
    return labels[0] != labels[1] or any(
        old_spec.get(name) != new_spec.get(name) for name in SCHEDULING_FIELDS
    )


def rejudge(request: AdmissionRequest, engine: Engine) -> Decision:
    """The rule table and the restore prediction's rules (``restore-miss`` under
    ``restore.on_miss: deny``...) over the updated pod, deciding only the findings the old pod
    did not already have, by rule and severity (a rule that already warned at CREATE is not
    repeated, a pin restated elsewhere is not new, a warning turned into a denial is; what the
    cluster's state brings since then is not held against this change); allowed when no policy
    selects the pod, under its old labels or its new ones. The prediction's findings are judged
    as at CREATE (``decision.MUTATE_WORDINGS``: their severity decides whatever the policy's
    mode, with the words users see at CREATE), the rest as ``/validate`` judges them."""
    new, old = request.object, request.old_object
    if not isinstance(new, dict) or not isinstance(old, dict):
        return allowed()
    state = engine.state()
    namespace, policies = selecting_policies(request, new, engine, state)
    _, before = selecting_policies(request, old, engine, state)
    policies = (*policies, *(p for p in before if p not in policies))
    if not policies:
        return allowed()
    ctx = view_context(request, new, engine, state, namespace=namespace, policies=policies)
    was = view_context(request, old, engine, state, namespace=namespace, policies=policies)
    known = {(f.rule, f.severity) for part in _findings(old, was, engine) for f in part}
    table, predicted = (
        [f for f in part if (f.rule, f.severity) not in known]
        for part in _findings(new, ctx, engine)
    )
    worded = decide_worded(predicted, ctx.mode, ctx.settings, MUTATE_WORDINGS)
    if not worded.allowed:
        return worded
    judged = decide(table, ctx) if table else allowed()
    if worded.warnings:
        judged = replace(judged, warnings=(*judged.warnings, *worded.warnings))
    return judged


def _findings(
    pod: RawObject, ctx: PodContext, engine: Engine
) -> tuple[list[Finding], list[Finding]]:
    """The rule table's findings, and the prediction's rules' (``prediction_findings``)."""
    stamp_prediction(Draft(pod), ctx)  # the prediction in ctx.memo (the draft is dropped)
    return evaluate(ctx, engine.rules), prediction_findings(ctx)
