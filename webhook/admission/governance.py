"""The snapshot-CRD handler: PodSnapshotPolicy, PodSnapshotStorageConfig and
PodSnapshotManualTrigger admission.

A snapshot is a full memory image (tokens, keys, model weights), so which pods a policy captures
and where their snapshots are stored are reviewed when a PodSnapshotPolicy or
PodSnapshotStorageConfig is created or updated (docs/gke-facts.md#section-8). The rules live in
``webhook.governance`` (pure); bucket facts come from the lookup the engine carries
(``Engine.governance``: ``webhook.cluster.gcs.BucketInspector`` in the server), so this module
does no I/O itself.
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.admission.context import Engine, Governance
from webhook.admission.decision import (
    decide_findings,
    effective_mode,
    namespace_ignored,
    request_namespace,
)
from webhook.base.keys import ENFORCEMENT
from webhook.base.types import Endpoint, Finding, Mode, RawObject
from webhook.governance import enforcement_annotation, policy_findings, storage_findings
from webhook.governance.trigger import trigger_findings
from webhook.kube.responses import Decision, allowed
from webhook.kube.review import AdmissionRequest

__all__ = ["Governance", "decide_governance", "handle_snapshot_crd", "judge_trigger"]


def handle_snapshot_crd(request: AdmissionRequest, endpoint: Endpoint, engine: Engine) -> Decision:
    """Validate one snapshot CRD object (a ``context.Handler``): a PodSnapshotPolicy or
    PodSnapshotStorageConfig on CREATE/UPDATE, a PodSnapshotManualTrigger on CREATE.

    Allowed untouched: ``/mutate``, a null object, an engine without ``governance``.

    Modes: a policy follows its namespace's ``<prefix>enforcement`` label, else the global mode
    (never its own annotation: a policy must not relax its own review); a storage config is
    cluster-scoped and follows the global mode. ``rules.modes`` and ``rules.disabled`` apply to
    these rule ids too.
    """
    obj = request.object
    governance = engine.governance
    if endpoint != "validate" or not isinstance(obj, dict) or governance is None:
        return allowed()
    settings = engine.settings
    metadata = obj.get("metadata")
    name = request.name or (metadata.get("name") if isinstance(metadata, dict) else None)
    name = name if isinstance(name, str) else ""
    if request.kind.kind == "PodSnapshotManualTrigger":
        return judge_trigger(request, obj, engine, name)
    if request.kind.kind == "PodSnapshotPolicy":
        state = engine.state()
        namespace = request_namespace(request, obj)
        if namespace_ignored(state, namespace, settings):
            return allowed()
        findings = policy_findings(obj, state, namespace=namespace, name=name)
        findings += enforcement_annotation(obj, settings.prefix + ENFORCEMENT)
        mode = effective_mode((), namespace, state, settings)
        subject = f"PodSnapshotPolicy {namespace}/{name}"
    else:
        lookup = governance.lookup if settings.storage.enabled else None
        findings = storage_findings(obj, settings.storage, lookup)
        mode = settings.enforcement
        subject = f"PodSnapshotStorageConfig {name}"
    kept = [f for f in findings if f.rule not in settings.rules.disabled]
    return decide_governance(kept, mode, settings.rules.modes, subject)


def judge_trigger(request: AdmissionRequest, obj: RawObject, engine: Engine, name: str) -> Decision:
    """A PodSnapshotManualTrigger: judged on CREATE only (``governance.trigger``), in its
    namespace's mode; who created it (``userInfo.username``) goes into the admission log line
    (``audit["user"]``), allowed or not."""
    if request.operation != "CREATE":
        return allowed()
    settings, state = engine.settings, engine.state()
    namespace = request_namespace(request, obj)
    if namespace_ignored(state, namespace, settings):
        return allowed()
    findings = trigger_findings(obj, state, settings, namespace=namespace)
    kept = [f for f in findings if f.rule not in settings.rules.disabled]
    mode = effective_mode((), namespace, state, settings)
    subject = f"PodSnapshotManualTrigger {namespace}/{name}"
    decision = decide_governance(kept, mode, settings.rules.modes, subject)
    decision.audit["user"] = request.username
    return decision


def decide_governance(
    findings: list[Finding], mode: Mode, overrides: Mapping[str, Mode], subject: str
) -> Decision:
    """``admission.decision.decide_findings`` for a snapshot CRD; ``subject`` names the object."""
    decision = decide_findings(findings, mode, overrides, f"{subject} is not acceptable")
    decision.audit.update({"policy": "", "subject": subject})
    return decision
