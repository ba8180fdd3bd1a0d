"""A pod whose scheduling gates hold it: its placement may still change, and is judged again.

While a pod has ``spec.schedulingGates`` the API server accepts updates that add nodeSelector
entries, narrow its required node affinity and add tolerations (KEP-3838 "mutable pod
scheduling directives", GA in 1.30: kubernetes pkg/apis/core/validation ``ValidatePodUpdate``;
Kueue sets a ResourceFlavor's node labels this way before it removes its gate). snapready judged
the pod at CREATE; such an UPDATE could add a placement its rules deny (``machine-family: e2``:
a hostile trial created a pod gated and unpinned, then pinned it). The validating webhook
``scheduling.snapready.io`` receives exactly these UPDATEs (``scheduling_condition``, rendered by
the chart), and ``rejudge`` denies what the change brings that was not there before. The
restore prediction stamped at CREATE is not rewritten: ``snapready explain`` and the reports
predict again from the live pod.
"""

from __future__ import annotations

from webhook.admission.context import Engine, selecting_policies, view_context
from webhook.admission.decision import decide
from webhook.base.types import Finding, mapping
from webhook.kube.responses import Decision, allowed
from webhook.kube.review import AdmissionRequest
from webhook.rules import evaluate

SCHEDULING_FIELDS = ("nodeSelector", "affinity", "tolerations")
"""The pod fields a gated pod may still change that decide where it lands."""


def scheduling_condition() -> str:
    """The CEL ``matchCondition`` the chart renders (tests compare them): an UPDATE of a pod
    that had scheduling gates and whose nodeSelector, affinity or tolerations changed."""
    changed = " || ".join(
        f"object.spec.?{name}.orValue({empty}) != oldObject.spec.?{name}.orValue({empty})"
        for name, empty in (("nodeSelector", "{}"), ("affinity", "{}"), ("tolerations", "[]"))
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
    return any(old_spec.get(name) != new_spec.get(name) for name in SCHEDULING_FIELDS)


def rejudge(request: AdmissionRequest, engine: Engine) -> Decision:
    """The rule table over the updated pod, deciding only the findings the old pod did not
    have (a rule that already warned at CREATE is not repeated, and a finding the cluster's
    state brings since then is not held against this change); allowed when no policy selects
    the pod or nothing is new."""
    new, old = request.object, request.old_object
    if not isinstance(new, dict) or not isinstance(old, dict):
        return allowed()
    state = engine.state()
    namespace, policies = selecting_policies(request, new, engine, state)
    if not policies:
        return allowed()
    ctx = view_context(request, new, engine, state, namespace=namespace, policies=policies)
    before = view_context(request, old, engine, state, namespace=namespace, policies=policies)
    known = {_key(f) for f in evaluate(before, engine.rules)}
    fresh = [f for f in evaluate(ctx, engine.rules) if _key(f) not in known]
    return decide(fresh, ctx) if fresh else allowed()


def _key(finding: Finding) -> tuple[str, str, str]:
    return (finding.rule, finding.path, finding.message)
