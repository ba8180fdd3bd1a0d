"""Rollout warnings: a controller template that no Ready snapshot of its policy would restore.

On a Deployment/StatefulSet/DaemonSet/ReplicaSet/Job/CronJob CREATE or template UPDATE, the
template is taken as its pods will be admitted (snapready's injection replayed,
``mutation.as_admitted``) and run through the same prediction as a pod (``pod.restore``). When
Ready snapshots of its policy exist and none matches, ``kubectl apply`` prints, before any pod
exists: ``this rollout will cold-start: 3 Ready snapshots of llm-policy differ in
spec.containers[0].image``; when one matches but gVisor cannot restore the pods from it
(``pod.emptydirs``: they would crash-loop), ``this rollout's pods cannot restore (snap-1): ...``.
Rule ``rollout-cold-start``: advisory (``warn``) whatever the
template's enforcement mode and never a denial (a ``warn``-severity finding:
``admission.decision.finding_outcome``), since a rollout is how snapshots get replaced;
``rules.disabled`` drops it and ``rules.modes`` ``audit`` keeps it out of the warnings (logged
and counted only). Its text is the warning users saw before it was a finding (``WORDING``), byte
for byte.
"""

from __future__ import annotations

from webhook.base.rule_ids import INIT_EMPTYDIR
from webhook.base.text import clip
from webhook.base.types import Finding, Wording, mapping
from webhook.mutation import as_admitted
from webhook.pod.context import PodContext
from webhook.pod.distill import fingerprint
from webhook.pod.emptydirs import restore_blocker
from webhook.pod.fields import field_digests
from webhook.pod.node_pins import node_selection
from webhook.pod.resources import requests_gpus
from webhook.pod.restore import PodFacts, predict
from webhook.snapshots.index import SnapshotIndex

RULE = "rollout-cold-start"
WORDING = Wording(warning="{message}", denial="snapready: [rollout-cold-start] {message}")
"""The warning line is the message alone (as before it was a finding)."""


def rollout_findings(ctx: PodContext) -> list[Finding]:
    """``rollout-cold-start`` for one controller template view (at its ``spec``), or ``[]``:
    no Ready snapshot of its policies, ``restore.rollout_warnings`` off, or one matches."""
    message = rollout_warning(ctx)
    return [Finding(ctx.spec_path, RULE, message, "warn")] if message else []


def rollout_warning(ctx: PodContext) -> str | None:
    """The warning text for one controller template view, or None (no snapshot, or one
    matches that gVisor can restore the pods from)."""
    state = ctx.cluster
    if not state.snapshots_known or not ctx.settings.restore.rollout_warnings:
        return None
    pod = as_admitted({"metadata": ctx.metadata, "spec": ctx.spec}, ctx.settings)
    facts = PodFacts(
        namespace=ctx.namespace,
        labels={k: v for k, v in ctx.labels.items() if isinstance(v, str)},
        annotations={k: v for k, v in ctx.annotations.items() if isinstance(v, str)},
        policies=ctx.policies,
        spec_hash=fingerprint(pod),
        fields=lambda: field_digests(pod),
        selection=node_selection(ctx.spec, ctx.spec_path),
        blocker=lambda: restore_blocker(mapping(pod.get("spec")), ctx.annotations),
        gpus=lambda: requests_gpus(ctx.spec),
        # A template lacks the tolerations the API server adds to each pod (its RuntimeClass's,
        # ExtendedResourceToleration's): taints are not judged (None).
    )
    blockers = INIT_EMPTYDIR not in ctx.settings.rules.disabled
    result = predict(
        facts,
        state.snapshots,
        state.node_pools,
        rootfs_only=ctx.rootfs_only,
        blockers=blockers,
        compute_classes=state.compute_classes,
    )
    if result.outcome != "miss":
        return None
    names = ", ".join(p.name for p in ctx.policies)
    count = _ready_count(state.snapshots, ctx)
    if result.refusal is not None:
        shown = clip(result.snapshot, 63)
        return f"this rollout's pods cannot restore ({shown}): {result.refusal.text()}"
    return (
        f"this rollout will cold-start: {count} Ready snapshot(s) of {names} differ "
        f"(closest {result.snapshot}: {result.reason})"
    )


def _ready_count(index: SnapshotIndex, ctx: PodContext) -> int:
    return sum(index.ready_of(ctx.namespace, p.name).ready for p in ctx.policies)
