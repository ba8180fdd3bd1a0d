"""Admission of one review, without HTTP: dispatch to a handler, which decides.

``admit`` is the single entry point used by the HTTPS app, the ``review`` CLI command and the
offline ``check`` command, so all three answer identically. ``DISPATCH`` is the one place that
plugs in a handler: pods (``admission.pods``), pod templates of built-in controllers and custom
workloads (``admission.templates``) and the snapshot CRDs (``admission.governance``). The
handlers share ``admission.context`` and never import each other.
"""

from __future__ import annotations

from webhook.admission.context import Engine, Handler
from webhook.admission.governance import handle_snapshot_crd
from webhook.admission.pods import handle_binding, handle_pod
from webhook.admission.templates import handle_templates
from webhook.base.text import clip
from webhook.base.types import Endpoint
from webhook.kube.responses import HTTP_BAD_REQUEST, Decision, allowed, denied
from webhook.kube.review import AdmissionRequest

__all__ = ["DISPATCH", "Engine", "Handler", "admit", "kind_mismatch"]

DISPATCH: dict[tuple[str, str], Handler] = {
    ("", "Pod"): handle_pod,
    ("", "Binding"): handle_binding,
    **{
        ("apps", kind): handle_templates
        for kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet")
    },
    ("batch", "Job"): handle_templates,
    ("batch", "CronJob"): handle_templates,
    ("podsnapshot.gke.io", "PodSnapshotPolicy"): handle_snapshot_crd,
    ("podsnapshot.gke.io", "PodSnapshotStorageConfig"): handle_snapshot_crd,
    ("podsnapshot.gke.io", "PodSnapshotManualTrigger"): handle_snapshot_crd,
}
"""The one explicit dispatch table: (API group, kind) -> handler. The custom workloads of
``engine.workloads`` (configuration: the built-in table plus ``workloads.extra``) take the
templates route too (``admit`` looks them up second, as they are configuration).
Everything else is allowed."""


def admit(request: AdmissionRequest, endpoint: Endpoint, engine: Engine) -> Decision:
    """Decide one AdmissionReview request for ``endpoint`` (``mutate`` or ``validate``).

    Steps: 1. dispatch on group/kind (``DISPATCH``, then ``engine.workloads``); 2. unknown
    kinds, DELETE/CONNECT and null objects are allowed untouched (``parse_review`` refuses a
    CREATE/UPDATE without one, so over HTTP only DELETE has none); an object contradicting
    ``request.kind`` is a broken request (400); 3. the handler matches policies and mutates or
    validates.
    Exceptions propagate to the caller, which applies the failure policy.
    """
    key = (request.kind.group, request.kind.kind)
    handler = DISPATCH.get(key)
    if handler is None and key in engine.workloads:
        handler = handle_templates  # a custom workload: the templates route, as DISPATCH says
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
