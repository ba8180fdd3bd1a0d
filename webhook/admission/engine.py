"""Admission of one review, without HTTP: dispatch, policy match, mutate or validate, decide.

``admit`` is the single entry point used by the HTTPS app, the ``review`` CLI command and the
offline ``check`` command, so all three answer identically.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.admission.decision import (
    decide,
    effective_mode,
    namespace_ignored,
    not_stamped,
    overlap_findings,
    request_namespace,
    string_labels,
)
from webhook.admission.guard import guard_update
from webhook.admission.rollout import rollout_warning
from webhook.base.config import Settings
from webhook.base.text import clip
from webhook.base.types import Endpoint, RawObject
from webhook.kube.custom_views import (
    Workloads,
    controller_labels,
    depends_on_pod,
    depends_warning,
    workloads_from,
)
from webhook.kube.matching import Policy
from webhook.kube.responses import HTTP_BAD_REQUEST, Decision, allowed, denied, with_warnings
from webhook.kube.review import AdmissionRequest
from webhook.kube.workloads import TEMPLATE_PATHS, pod_template
from webhook.mutation import mutate_pod
from webhook.pod.context import PodContext, join_path
from webhook.rules import RULES, Rule, evaluate
from webhook.rules.sandbox import EphemeralCompat
from webhook.snapshots.state import ClusterState

Handler = Callable[[AdmissionRequest, Endpoint, "Engine"], Decision]


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
    workloads: Workloads = field(default_factory=dict)
    """Custom resources that embed pod templates (``custom_workloads.BUILTIN`` plus the
    ``workloads.extra`` setting), filled from ``settings`` when left empty."""
    offline: bool = False
    """True where no mutating webhook ran before ``validate`` (``snapready check`` on manifests):
    a pod without ``<prefix>spec-hash`` is then expected, not a ``not-stamped`` finding."""

    def __post_init__(self) -> None:
        if not self.workloads:
            self.workloads = workloads_from(self.settings)


def admit(request: AdmissionRequest, endpoint: Endpoint, engine: Engine) -> Decision:
    """Decide one AdmissionReview request for ``endpoint`` (``mutate`` or ``validate``).

    Steps: 1. dispatch on group/kind/subresource; 2. unknown kinds, DELETE/CONNECT and null objects
    are allowed untouched; 3. the handler matches policies and mutates or validates.
    Exceptions propagate to the caller, which applies the failure policy.
    """
    key = (request.kind.group, request.kind.kind)
    handler = DISPATCH.get(key)
    if handler is None and key in engine.workloads:
        from webhook.admission.workloads import handle_custom  # noqa: PLC0415 - cycle

        handler = handle_custom
    if handler is None or request.operation not in ("CREATE", "UPDATE"):
        return allowed()
    problem = kind_mismatch(request)
    if problem:
        return denied(problem, code=HTTP_BAD_REQUEST)
    return handler(request, endpoint, engine)


def kind_mismatch(request: AdmissionRequest) -> str | None:
    """Why ``request.object`` cannot be the ``request.kind`` it claims to be, or None.

    The API server sends the object in the version of ``request.kind`` (matchPolicy conversion
    included), so an object whose own ``kind``/``apiVersion`` contradict it (a Deployment sent as
    a Pod) is a broken request: judging it as a pod would mutate the wrong shape.
    """
    obj = request.object
    if not isinstance(obj, dict):
        return None
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    group, version = request.kind.group, request.kind.version
    expected = f"{group}/{version}" if group else version
    if isinstance(kind, str) and kind != request.kind.kind:
        return f"object kind {clip(kind)!r} contradicts request.kind {request.kind.kind!r}"
    if isinstance(api_version, str) and api_version != expected:
        return f"object apiVersion {clip(api_version)!r} contradicts request.kind ({expected!r})"
    return None


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


def validate_context(ctx: PodContext, engine: Engine) -> Decision:
    """Run the rule table (plus the policy-overlap and stamp checks) over one pod view, decide."""
    stamp = [] if engine.offline else not_stamped(ctx)
    return decide([*overlap_findings(ctx), *stamp, *evaluate(ctx, engine.rules)], ctx)


def _handle_pod(request: AdmissionRequest, endpoint: Endpoint, engine: Engine) -> Decision:
    obj = request.object
    if not isinstance(obj, dict):
        return allowed()
    if request.sub_resource:
        if request.sub_resource == "ephemeralcontainers" and endpoint == "validate":
            return _handle_ephemeral(request, obj, engine)
        return allowed()
    if request.operation != "CREATE":  # pods are judged and mutated once, at creation
        if endpoint != "validate":
            return allowed()
        owner = engine.settings.ownership.service_account
        return guard_update(request, engine.settings.prefix, owner)  # snapready's metadata
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
    labels: Mapping[str, str] | None = None,
    spec_path: str | None = None,
) -> PodContext | None:
    """The rule view of a pod, or of a controller's pod template, when a policy of the request
    namespace selects it; None when nothing selects it or the namespace is labelled
    ``<prefix>ignore``. Reads the in-memory state only.

    Args:
        request, obj: the request and its ``object`` (namespace fallback).
        view: the pod-shaped dict with ``metadata``/``spec`` (default ``obj``, a Pod).
        base: field path of ``view`` in ``obj`` (``""`` for a Pod, ``spec.template``...).
        labels: the labels to match policies with (default: the view's own); a template's
            include those its controller adds (``custom_views``).
        spec_path: the PodSpec's field path when it is not ``<base>.spec`` (KServe: the
            PodSpec is inline), with the metadata then at ``metadata``.
    """
    pod_like = obj if view is None else view
    state = engine.state()
    namespace = request_namespace(request, obj)
    if namespace_ignored(state, namespace, engine.settings):
        return None
    metadata = pod_like.get("metadata")
    if labels is None:
        labels = string_labels(metadata.get("labels") if isinstance(metadata, dict) else None)
    policies = state.policies.select(namespace, labels)
    if not policies:
        return None
    return pod_context(
        spec=pod_like.get("spec"),
        metadata=metadata,
        spec_path=spec_path or join_path(base, "spec"),
        metadata_path="metadata" if spec_path else join_path(base, "metadata"),
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
    labels = {**string_labels(_labels_of(template)), **controller_labels(obj)}
    ctx = selected_pod_context(
        request, obj, engine, view=template, base=join_path("", *path), labels=labels
    )
    if ctx is None:
        return not_selected(request, obj, engine, labels)
    decision = validate_context(ctx, engine)
    warning = rollout_warning(ctx) if decision.allowed else None
    return with_warnings(decision, [warning]) if warning else decision


def _labels_of(template: RawObject) -> Any:
    metadata = template.get("metadata")
    return metadata.get("labels") if isinstance(metadata, dict) else None


def not_selected(
    request: AdmissionRequest, obj: RawObject, engine: Engine, labels: Mapping[str, str]
) -> Decision:
    """A template no policy selects: allowed, with a warning when a policy might select its
    pods by a label value the controller sets per pod (``custom_views.depends_on_pod``)."""
    state = engine.state()
    namespace = request_namespace(request, obj)
    depends = depends_on_pod(state.policies.by_namespace.get(namespace), labels)
    if not depends:
        return allowed()
    return allowed(warnings=(depends_warning(depends, labels),))


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
    ("podsnapshot.gke.io", "PodSnapshotManualTrigger"): _handle_snapshot_crd,
}
"""The one explicit dispatch table: (API group, kind) -> handler. Everything else is allowed."""
