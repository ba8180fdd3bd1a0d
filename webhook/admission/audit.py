"""What admission would say about an object that exists: the audit's judgement. Pure module.

``judge`` wraps a live Pod or workload in the AdmissionRequest the API server would send to
create it and answers it with ``admit`` on the validating endpoint, the function the HTTPS
app, ``review`` and ``check`` use, so a report says exactly what admission would say now
(same rule table, modes, overrides, namespace opt-out, policy match). The findings become one
report result per rule (``rule_results``); a pod gets one more, ``restore-prediction``, from
``pod.restore.predict`` over the SnapshotRecords in the cache: what a pod created now with this
spec would restore from. A pod admission never judged is judged as admission would see it
when it is created: without the ``<prefix>`` keys admission removes from a new pod
(``mutation.ownership``), so a key a tenant wrote on a pod created around snapready changes no
result. The fingerprint is computed and the prediction derived, never read from a key; the only
keys read are those of ``snapshots.audit.admitted`` (which count a pod falls in: an admitted pod's
stamps are admission's, the ownership webhook guards them) and an admitted pod's recorded
``<prefix>restore-outcome`` (a property; only the leader writes it).

Result mapping (OpenReports ``report_types.go``: result pass|fail|warn|error|skip, severity
critical|high|medium|low|info): a rule with a ``deny`` finding fails (``high``), whatever the
mode (an ``audit``-mode violation is still a violation, as Kyverno's Audit policies report it),
a rule with only ``warn`` findings warns (``medium``); property ``admission`` says what
admission does with it (``deny``, ``warn``, ``audit``: ``decision.finding_outcome``). An object
without findings gets one ``pass`` result, ``snapshot-ready``. The prediction: ``hit`` passes,
``miss`` warns (fails where admission denies it: ``restore.on_miss: deny``, unless
``rules.disabled``/``rules.modes`` relax ``restore-miss``), ``none`` is ``skip`` (nothing to
restore from yet).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from webhook.admission.engine import Engine, admit
from webhook.base.keys import RESTORE_OUTCOME, USER_ANNOTATIONS, USER_LABELS
from webhook.base.reporting import ResultStatus
from webhook.base.rule_ids import INIT_EMPTYDIR
from webhook.base.types import Finding, Mode, RawObject, mapping
from webhook.kube.matching import Policy
from webhook.kube.policy_reports import Result, Scope, Severity, result
from webhook.kube.review import AdmissionRequest
from webhook.kube.workloads import TEMPLATE_PATHS
from webhook.pod.distill import fingerprint
from webhook.pod.emptydirs import restore_blocker
from webhook.pod.fields import field_digests
from webhook.pod.node_pins import node_selection
from webhook.pod.resources import requests_gpus
from webhook.pod.restore import PodFacts, predict
from webhook.pod.tolerations import tolerations_of
from webhook.rules.restore_miss import miss_denies
from webhook.snapshots.audit import admitted, template_changed_at, template_never_judged
from webhook.snapshots.outcomes import OUTCOMES

READY_RULE = "snapshot-ready"
"""The rule id of the one ``pass`` result of an object without findings."""
PREDICTION_RULE = "restore-prediction"
"""The rule id of a pod's restore prediction result."""
ADMISSION_WORDS: dict[Mode, str] = {"enforce": "deny", "warn": "warn", "audit": "audit"}


@dataclass(frozen=True)
class Judgement:
    """The audit's answer for one object a policy selects.

    Attributes:
        scope: the object (kind, namespace, name, uid).
        policies: the selecting policies, sorted by name.
        admitted: a pod snapready's mutating webhook stamped; a template changed while one of
            its selecting policies existed (``snapshots.audit``); False: never judged.
        denied: admission would deny it now (a finding whose outcome is ``enforce``).
        results: every result, before ``reports.results`` filters them.
    """

    scope: Scope
    policies: tuple[Policy, ...]
    admitted: bool
    denied: bool
    results: tuple[Result, ...]

    @property
    def policy(self) -> str:
        """The selecting policies' names, ``,``-joined (a result's ``policy``)."""
        return ",".join(p.name for p in self.policies)


def scope_of(obj: RawObject, api_version: str, kind: str) -> Scope | None:
    """The object's identity; None without namespace, name or uid (not a stored object)."""
    metadata = mapping(obj.get("metadata"))
    namespace, name, uid = metadata.get("namespace"), metadata.get("name"), metadata.get("uid")
    if not (isinstance(namespace, str) and isinstance(name, str) and isinstance(uid, str)):
        return None
    if not (namespace and name and uid):
        return None
    return Scope(api_version, kind, namespace, name, uid)


def judge(
    obj: RawObject,
    api_version: str,
    kind: str,
    engine: Engine,
) -> Judgement | None:
    """Admission's answer for creating ``obj`` now, as report results; None when no policy
    selects it (or its namespace opts out), or it is not a stored object.

    Args:
        obj: a live Pod, or a workload with a pod template (``kube.workloads.TEMPLATE_PATHS``).
        api_version, kind: the object's (list items carry neither).
        engine: the admission engine over the cluster caches.
    """
    scope = scope_of(obj, api_version, kind)
    if scope is None:
        return None
    is_admitted = False
    if kind == "Pod":
        is_admitted = admitted(mapping(obj.get("metadata")), engine.settings.prefix)
        if not is_admitted:  # as admission would see it: no <prefix> key it did not set
            obj = without_foreign_keys(obj, engine.settings.prefix)
    group, _, version = api_version.rpartition("/")
    request = AdmissionRequest.model_validate(
        {
            "uid": "snapready-audit-" + secrets.token_hex(4),
            "kind": {"group": group, "version": version, "kind": kind},
            "name": scope.name,
            "namespace": scope.namespace,
            "operation": "CREATE",
            "object": obj,
        }
    )
    decision = admit(request, "validate", engine)
    ids = decision.audit.get("policy")  # ``namespace/name,...`` of the selecting policies
    if not isinstance(ids, str) or not ids:
        return None
    state = engine.state()
    metadata = mapping(obj.get("metadata"))
    labels = {k: v for k, v in mapping(metadata.get("labels")).items() if isinstance(v, str)}
    if kind == "Pod":
        policies = state.policies.select(scope.namespace, labels)
    else:  # the template's policies (its labels and its controller's): the decision's
        wanted = {item.rpartition("/")[2] for item in ids.split(",")}
        listed = state.policies.by_namespace.get(scope.namespace, ())
        policies = tuple(p for p in listed if p.name in wanted)
        changed = template_changed_at(obj, TEMPLATE_PATHS.get(kind, ("spec", "template")))
        is_admitted = not template_never_judged(changed, policies)
    findings: list[Finding] = list(decision.audit.get("findings", ()))
    outcomes: list[Mode] = list(decision.audit.get("outcomes", ()))
    names = ",".join(p.name for p in policies)
    results = rule_results(names, findings, outcomes)
    if kind == "Pod":
        predicted = prediction_result(obj, names, policies, engine, is_admitted)
        results = (*results, *predicted)
    denied = any(outcome == "enforce" for outcome in outcomes)
    return Judgement(scope, policies, is_admitted, denied, results)


def without_foreign_keys(pod: RawObject, prefix: str) -> RawObject:
    """``pod`` without the ``<prefix>`` annotations and labels admission removes from a new
    pod (all but the user's ``inject`` annotation and ``snapshot-source`` label:
    ``mutation.ownership``); a shallow copy, ``pod`` is not changed."""
    metadata = dict(mapping(pod.get("metadata")))
    for field, allowed in (("annotations", USER_ANNOTATIONS), ("labels", USER_LABELS)):
        keep = {prefix + name for name in allowed}
        values = mapping(metadata.get(field))
        if any(k.startswith(prefix) and k not in keep for k in values):
            metadata[field] = {
                k: v for k, v in values.items() if not k.startswith(prefix) or k in keep
            }
    return {**pod, "metadata": metadata}


def rule_results(
    policy: str, findings: Sequence[Finding], outcomes: Sequence[Mode]
) -> tuple[Result, ...]:
    """One result per rule with findings (in the order admission found them), or one
    ``snapshot-ready`` pass when there are none."""
    by_rule: dict[str, list[tuple[Finding, Mode]]] = {}
    for finding, outcome in zip(findings, outcomes, strict=True):
        by_rule.setdefault(finding.rule, []).append((finding, outcome))
    if not by_rule:
        message = "passes every snapready rule under its PodSnapshotPolicy"
        return (result(policy, READY_RULE, "pass", "info", message),)
    out = []
    for rule, items in by_rule.items():
        failing = any(f.severity == "deny" for f, _ in items)
        strictest = max((o for _, o in items), key=("audit", "warn", "enforce").index)
        message = "; ".join(f"{f.path}: {f.message}" for f, _ in items)
        paths = ",".join(sorted({f.path for f, _ in items}))
        props = {"admission": ADMISSION_WORDS[strictest], "fields": paths}
        status: ResultStatus = "fail" if failing else "warn"
        severity: Severity = "high" if failing else "medium"
        out.append(result(policy, rule, status, severity, message, props))
    return tuple(out)


def prediction_result(
    pod: RawObject,
    policy: str,
    policies: tuple[Policy, ...],
    engine: Engine,
    is_admitted: bool,
) -> tuple[Result, ...]:
    """The ``restore-prediction`` result of a pod (none before the snapshots are listed):
    what a pod created now with this spec would restore from, with the properties
    ``fingerprint``, ``prediction``, ``predictedSnapshot``, ``admission``, ``restoreFails`` and
    ``restoreFailsFrom`` (why gVisor cannot restore from a matching snapshot, and whose init
    container: ``pod`` or ``origin``; None else) and, for an admitted pod, ``outcome`` (the
    leader's recorded ``<prefix>restore-outcome``, once known)."""
    state = engine.state()
    if not state.snapshots_known or not policies:
        return ()
    metadata, spec = mapping(pod.get("metadata")), mapping(pod.get("spec"))
    labels = {k: v for k, v in mapping(metadata.get("labels")).items() if isinstance(v, str)}
    annotations = {
        k: v for k, v in mapping(metadata.get("annotations")).items() if isinstance(v, str)
    }
    spec_hash = fingerprint(pod)
    facts = PodFacts(
        namespace=str(metadata.get("namespace") or ""),
        labels=labels,
        annotations=annotations,
        policies=policies,
        spec_hash=spec_hash,
        fields=lambda: field_digests(pod),
        selection=lambda: node_selection(spec, "spec"),
        blocker=lambda: restore_blocker(spec, annotations),
        gpus=lambda: requests_gpus(spec),
        tolerations=lambda: tolerations_of(spec),
    )
    rootfs = all(p.scope == "rootfs-only" for p in policies)
    blockers = INIT_EMPTYDIR not in engine.settings.rules.disabled
    found = predict(
        facts,
        state.snapshots,
        state.node_pools,
        rootfs_only=rootfs,
        blockers=blockers,
        compute_classes=state.compute_classes,
    )
    outcome = annotations.get(engine.settings.annotation(RESTORE_OUTCOME))
    props = {
        "admission": "admitted" if is_admitted else "never-judged",
        "fingerprint": spec_hash,
        "prediction": found.outcome,
        "predictedSnapshot": found.snapshot,
        "outcome": outcome if is_admitted and outcome in OUTCOMES else None,
        "restoreFails": found.refusal.blocker if found.refusal is not None else None,
        "restoreFailsFrom": found.refusal.by if found.refusal is not None else None,
    }
    status: ResultStatus = "skip"
    severity: Severity = "info"
    message = f"nothing to restore from: {found.reason}"
    if found.outcome == "hit":
        status, message = "pass", f"a new replica restores: {found.reason}"
    elif found.outcome == "miss":
        deny = miss_denies(engine.settings)
        status, severity = ("fail", "high") if deny else ("warn", "medium")
        message = f"a new replica starts cold: {found.reason}"
        if found.refusal is not None:
            text = found.refusal.text()
            message = f"a new replica cannot restore ({found.snapshot}): {text}"
    return (result(policy, PREDICTION_RULE, status, severity, message, props),)
