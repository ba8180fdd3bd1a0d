"""What every admission handler shares: the ``Engine``, the handler signature and the pod views.

The handlers (``admission.pods``, ``admission.templates``, ``admission.governance``) import this
module and never each other; ``admission.engine`` names them in its dispatch table. So this
module sits below the handlers and imports none of them (an import-linter contract holds it).
Pure: reads the in-memory ``ClusterState`` only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.admission.decision import (
    decide,
    decide_worded,
    effective_mode,
    namespace_ignored,
    not_stamped,
    overlap_findings,
    request_namespace,
    string_labels,
)
from webhook.admission.replicas import ReplicaMemo
from webhook.base.config import Settings
from webhook.base.types import Endpoint, Finding, RawObject, Wording
from webhook.governance import BucketLookup
from webhook.kube.custom_views import Workloads, depends_on_pod, depends_warning, workloads_from
from webhook.kube.matching import Policy
from webhook.kube.responses import Decision, allowed
from webhook.kube.review import AdmissionRequest
from webhook.pod.context import PodContext, join_path
from webhook.rules import RULES, Rule, evaluate
from webhook.snapshots.state import ClusterState


@dataclass(frozen=True)
class Governance:
    """Admission of the snapshot CRDs (``admission.governance``) is on, with these bucket facts.

    Attributes:
        lookup: bucket facts within a bounded time (``webhook.cluster.gcs.BucketInspector``);
            None, or ``settings.storage.enabled`` false, skips the GCS checks of a
            PodSnapshotStorageConfig (its bucket name is still checked).
    """

    lookup: BucketLookup | None


@dataclass
class Engine:
    """The admission engine: settings, a cluster-state getter and the rule table.

    Attributes:
        settings: validated settings.
        state: returns the current ``ClusterState`` (swapped atomically by sources; no I/O).
        rules: the rule table (tests may pass their own).
        governance: set to judge PodSnapshotPolicy, PodSnapshotStorageConfig and
            PodSnapshotManualTrigger objects (``admission.governance``); None allows them
            untouched (an engine that only judges pods).
    """

    settings: Settings
    state: Callable[[], ClusterState]
    rules: tuple[Rule, ...] = RULES
    governance: Governance | None = None
    workloads: Workloads = field(default_factory=dict)
    """Custom resources that embed pod templates (``custom_workloads.BUILTIN`` plus the
    ``workloads.extra`` setting), filled from ``settings`` when left empty."""
    offline: bool = False
    """True where no mutating webhook ran before ``validate`` (``snapready check`` on manifests):
    a pod without ``<prefix>spec-hash`` is then expected, not a ``not-stamped`` finding."""
    replicas: ReplicaMemo | None = field(default=None, repr=False, compare=False)
    """Pod decisions remembered for the next replica of the same template
    (``admission.replicas``); None remembers nothing. Only for engines whose pods are decoded
    from an AdmissionReview's JSON (the server, ``snapready review``): the memo's key cannot
    tell YAML's ``.nan`` from ``null``, so ``snapready check`` and ``status`` leave it off."""

    def __post_init__(self) -> None:
        if not self.workloads:
            self.workloads = workloads_from(self.settings)


Handler = Callable[[AdmissionRequest, Endpoint, Engine], Decision]
"""One admission handler: ``(request, endpoint, engine) -> Decision`` for a CREATE or UPDATE
whose object claims the kind the dispatch table named it for (``engine.admit`` checks both)."""


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
    state = engine.state()
    namespace, policies = selecting_policies(request, obj, engine, state, view=view, labels=labels)
    if not policies:
        return None
    return view_context(
        request, obj, engine, state, namespace=namespace, policies=policies,
        view=view, base=base, spec_path=spec_path,
    )  # fmt: skip


def view_context(
    request: AdmissionRequest,
    obj: RawObject,
    engine: Engine,
    state: ClusterState,
    *,
    namespace: str,
    policies: tuple[Policy, ...],
    view: RawObject | None = None,
    base: str = "",
    spec_path: str | None = None,
) -> PodContext:
    """The rule view of a pod (or template) that ``policies`` of ``namespace`` select on
    ``state`` (``selecting_policies``); other arguments as ``selected_pod_context``'s."""
    pod_like = obj if view is None else view
    return pod_context(
        spec=pod_like.get("spec"),
        metadata=pod_like.get("metadata"),
        spec_path=spec_path or join_path(base, "spec"),
        metadata_path="metadata" if spec_path else join_path(base, "metadata"),
        namespace=namespace,
        kind=request.kind.kind,
        policies=policies,
        engine=engine,
        state=state,
    )


def selecting_policies(
    request: AdmissionRequest,
    obj: RawObject,
    engine: Engine,
    state: ClusterState,
    *,
    view: RawObject | None = None,
    labels: Mapping[str, str] | None = None,
) -> tuple[str, tuple[Policy, ...]]:
    """(namespace, the policies of it that select the view) on ``state``; no policy when the
    namespace is labelled ``<prefix>ignore``. Arguments as ``selected_pod_context``'s."""
    namespace = request_namespace(request, obj)
    if namespace_ignored(state, namespace, engine.settings):
        return namespace, ()
    if labels is None:
        metadata = (obj if view is None else view).get("metadata")
        labels = string_labels(metadata.get("labels") if isinstance(metadata, dict) else None)
    return namespace, state.policies.select(namespace, labels)


def not_selected(
    request: AdmissionRequest,
    obj: RawObject,
    engine: Engine,
    labels: Mapping[str, str],
    labels_path: str = "metadata.labels",
) -> Decision:
    """A template no policy selects: allowed; with the ``selection-depends-on-pod`` finding
    (a warning) when a policy might select its pods by a label value the controller sets per
    pod (``custom_views.depends_on_pod``), at ``labels_path`` (the template's labels), judged
    like every finding with its own wording
    (``rules.disabled`` drops it, ``rules.modes`` ``audit`` silences it; never a denial)."""
    state = engine.state()
    namespace = request_namespace(request, obj)
    depends = depends_on_pod(state.policies.by_namespace.get(namespace), labels)
    if not depends:
        return allowed()
    finding = Finding(labels_path, DEPENDS_RULE, depends_warning(depends, labels), "warn")
    return decide_worded([finding], "enforce", engine.settings, DEPENDS_WORDINGS)


DEPENDS_RULE = "selection-depends-on-pod"
"""Rule id of the warning that a template's selection depends on a per-pod label value."""
DEPENDS_WORDINGS = {
    DEPENDS_RULE: Wording(
        warning="{message}", denial="snapready: [selection-depends-on-pod] {message}"
    )
}
"""Its warning line is the message alone (as before it was a finding)."""
