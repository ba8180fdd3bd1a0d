"""The Pod handler: a selected pod is mutated and validated on CREATE; snapready's own metadata is
guarded on UPDATE; containers added through ``pods/ephemeralcontainers`` are checked. Pure.

Steps for a CREATE: 1. the pod view, when a policy of its namespace selects it (else allowed
untouched: the fast path); 2. ``/mutate``: the mutators (``mutation.mutate``), the rules over
their restore prediction (``rules.prediction_findings``), one decision
(``decision.decide_mutation``); ``/validate``: the rule table (``context.validate_context``).
"""

from __future__ import annotations

from dataclasses import replace

from webhook.admission import guard
from webhook.admission.context import (
    Engine,
    selected_pod_context,
    selecting_policies,
    validate_context,
    view_context,
)
from webhook.admission.decision import decide, decide_mutation, decide_worded
from webhook.admission.gated import placement_changed, rejudge
from webhook.base.types import Endpoint, Finding, RawObject
from webhook.kube.responses import Decision, allowed
from webhook.kube.review import AdmissionRequest
from webhook.mutation import mutate
from webhook.mutation.ownership import strip_unselected
from webhook.pod.context import PodContext
from webhook.rules import evaluate, prediction_findings
from webhook.rules.sandbox import EphemeralCompat


def handle_pod(request: AdmissionRequest, endpoint: Endpoint, engine: Engine) -> Decision:
    """Admit one Pod request (a ``context.Handler``).

    CREATE without subresource: mutated (``/mutate``) or validated (``/validate``) when a policy
    selects it. UPDATE: only ``/validate`` answers, denying a change to snapready's metadata by
    anyone but snapready (``guard_metadata``), and so does an UPDATE of ``pods/status`` (the API
    server stores the labels and annotations sent with it); an UPDATE that changes a gated
    pod's placement is judged again (``gated.rejudge``). Subresource ``ephemeralcontainers``
    on ``/validate``: ``sandbox-compat`` for the new containers. Anything else: allowed.
    """
    obj = request.object
    if not isinstance(obj, dict):
        return allowed()
    if request.sub_resource:
        if request.sub_resource == "ephemeralcontainers" and endpoint == "validate":
            return handle_ephemeral(request, obj, engine)
        if request.sub_resource == "status" and endpoint == "validate":
            return guard_metadata(request, engine)  # a status write can change metadata too
        return allowed()
    if request.operation != "CREATE":  # pods are judged and mutated once, at creation
        if endpoint != "validate":
            return allowed()
        guarded = guard_metadata(request, engine)
        if not guarded.allowed or not placement_changed(request):
            return guarded
        judged = rejudge(request, engine)  # a gated pod's placement changed (``gated``)
        if guarded.warnings:
            judged = replace(judged, warnings=(*guarded.warnings, *judged.warnings))
        return judged
    return handle_create(request, endpoint, obj, engine)


def handle_create(
    request: AdmissionRequest, endpoint: Endpoint, pod: RawObject, engine: Engine
) -> Decision:
    """A Pod CREATE: allowed untouched when no policy selects it (the fast path; on ``/mutate``
    the keys snapready owns are removed, ``mutation.ownership.strip_unselected``), else
    ``mutate_pod`` (``/mutate``) or the rule table (``/validate``); a selected pod's decision is
    remembered for the next replica of its template (``admission.replicas``: the same decision
    for the same inputs, the pod's identity aside)."""
    state = engine.state()
    namespace, policies = selecting_policies(request, pod, engine, state)
    if not policies:  # the fast path: nothing to judge, nothing to remember
        return strip_unselected(pod, engine.settings.prefix) if endpoint == "mutate" else allowed()
    memo = engine.replicas
    key = memo.key(endpoint, namespace, pod) if memo is not None else None
    parts = (engine.settings, engine.rules, engine.offline)
    if memo is not None and key is not None:
        known = memo.get(key, state, parts)
        if known is not None:
            return known
    ctx = view_context(request, pod, engine, state, namespace=namespace, policies=policies)
    decision = mutate_pod(pod, ctx) if endpoint == "mutate" else validate_context(ctx, engine)
    if memo is not None and key is not None:
        memo.put(key, state, parts, decision)
    return decision


def guard_metadata(request: AdmissionRequest, engine: Engine) -> Decision:
    """A pod UPDATE on ``/validate``: the ``owned-metadata`` finding (``guard.guard_update``: a
    change to snapready's own keys by anyone but ``ownership.service_account``), decided under
    ``rules.disabled``/``rules.modes``; allowed when there is none."""
    settings = engine.settings
    finding = guard.guard_update(request, settings.prefix, settings.ownership.service_account)
    return _owned_metadata(finding, engine)


def _owned_metadata(finding: Finding | None, engine: Engine) -> Decision:
    """An ``owned-metadata`` finding (or none: allowed) decided under ``rules.disabled`` and
    ``rules.modes``, worded as before it was a finding (``guard.WORDING``)."""
    if finding is None:
        return allowed()
    settings = engine.settings
    return decide_worded([finding], settings.enforcement, settings, {guard.RULE: guard.WORDING})


def handle_binding(request: AdmissionRequest, endpoint: Endpoint, engine: Engine) -> Decision:
    """A Binding CREATE (``pods/binding``, or the older ``bindings`` resource) on ``/validate``
    (a ``context.Handler``): ``owned-metadata`` for snapready's annotations on it, which the API
    server copies onto the pod (``guard.guard_binding``), decided as ``guard_metadata``. Anything
    else: allowed."""
    if endpoint != "validate" or request.operation != "CREATE":
        return allowed()
    settings = engine.settings
    finding = guard.guard_binding(request, settings.prefix, settings.ownership.service_account)
    return _owned_metadata(finding, engine)


def mutate_pod(pod: RawObject, ctx: PodContext) -> Decision:
    """The ``/mutate`` answer for a selected pod on CREATE: ``patched`` (no patch when nothing
    changed, warnings for the ``warn`` findings) or ``denied`` (403) by the first finding whose
    outcome is ``enforce`` (``decision.decide_mutation``).

    Args:
        pod: the raw ``request.object`` (never modified).
        ctx: the pod view (policies, settings, cluster state, effective mode).
    """
    mutation = mutate(pod, ctx)
    return decide_mutation(mutation, [*mutation.findings, *prediction_findings(ctx)], ctx)


def handle_ephemeral(request: AdmissionRequest, obj: RawObject, engine: Engine) -> Decision:
    """Containers added through ``pods/ephemeralcontainers``: only ``sandbox-compat`` applies, and
    only to containers new relative to ``oldObject`` (the pod itself was judged at creation)."""
    ctx = selected_pod_context(request, obj, engine)
    if ctx is None:
        return allowed()
    return decide(evaluate(ctx, (EphemeralCompat(request.old_object),)), ctx)
