"""The ``<prefix>selected`` label and the restore prediction annotations of a selected pod.

``<prefix>selected: "true"`` marks every pod a policy selects, so cluster mode can watch exactly
those pods with a label selector (labels other than ``batch.kubernetes.io/job-completion-index``
are not part of the distilled spec; the policy name stays an annotation, since policy names may
exceed the 63 characters of a label value).
``<prefix>restore-prediction`` (``hit``/``miss``/``none``), ``<prefix>restore-snapshot`` and
``<prefix>restore-reason`` record what ``webhook.pod.restore.predict`` says about the final pod
(run after ``spec-hash``, so on the final spec). Written only when the snapshots are known
(cluster mode, PodSnapshots listed); none of them is hashed. The prediction is kept in
``PodContext.memo`` (``pod.restore.PREDICTION_KEY``) for the rules that judge it
(``rules.PREDICTION_RULES``: ``restore-miss``, ``cross-workload``, ``stale-config``).
"""

from __future__ import annotations

from webhook.base.keys import (
    RESTORE_OUTCOME,
    RESTORE_PREDICTION,
    RESTORE_REASON,
    RESTORE_SNAPSHOT,
    SELECTED,
    SPEC_HASH,
)
from webhook.base.rule_ids import INIT_EMPTYDIR
from webhook.base.types import mapping
from webhook.mutation.annotations import DISTILLED_KEY, FINGERPRINT_KEY
from webhook.mutation.patch import Draft
from webhook.pod.context import PodContext
from webhook.pod.emptydirs import restore_blocker
from webhook.pod.fields import field_digests
from webhook.pod.memo import admitted_field_digests
from webhook.pod.node_pins import node_selection
from webhook.pod.resources import requests_gpus
from webhook.pod.restore import PREDICTION_KEY, PodFacts, Prediction, predict
from webhook.pod.tolerations import tolerations_of

LABELS = ("metadata", "labels")
ANNOTATIONS = ("metadata", "annotations")
MAX_REASON_CHARS = 512


def clear_outcome(draft: Draft, ctx: PodContext) -> bool:
    """Remove a ``<prefix>restore-outcome`` annotation a new pod brings along: only the leader
    writes it, once it has decided (``cluster.controllers.restores``), and a pod created with one
    would otherwise never be reported (the leader skips pods whose outcome is recorded)."""
    return draft.drop(ANNOTATIONS, ctx.settings.annotation(RESTORE_OUTCOME))


def stamp_selected(draft: Draft, ctx: PodContext) -> bool:
    """Set the label ``<prefix>selected: "true"``."""
    return draft.put(LABELS, ctx.settings.annotation(SELECTED), "true")


def pod_facts(draft: Draft, ctx: PodContext) -> PodFacts:
    """What the prediction reads of the working copy (fingerprint from ``spec-hash``)."""
    doc = draft.doc
    metadata = mapping(doc.get("metadata"))
    labels, annotations = mapping(metadata.get("labels")), mapping(metadata.get("annotations"))
    spec_hash = str(annotations.get(ctx.settings.annotation(SPEC_HASH), ""))
    computed = ctx.memo.get(FINGERPRINT_KEY)
    pod_distilled = ctx.memo.get(DISTILLED_KEY)
    return PodFacts(
        namespace=ctx.namespace,
        labels={k: v for k, v in labels.items() if isinstance(v, str)},
        annotations={k: v for k, v in annotations.items() if isinstance(v, str)},
        policies=ctx.policies,
        spec_hash=spec_hash,
        # The replicas of one template share the fingerprint stamp_fingerprint computed just
        # before: they distill once for their field digests (only snapready's own value keys
        # the memo, never one the pod brought), the first from the pod it distilled.
        fields=lambda: (
            admitted_field_digests(spec_hash, doc, pod_distilled)
            if spec_hash == computed
            else field_digests(doc)
        ),
        # Injection never touches node pins; read only when there are snapshots to compare.
        selection=lambda: node_selection(ctx.spec, "spec"),
        # The final pod's init containers (our sidecar included); read only on a match.
        blocker=lambda: restore_blocker(mapping(doc.get("spec")), annotations),
        gpus=lambda: requests_gpus(ctx.spec),
        tolerations=lambda: tolerations_of(ctx.spec),
    )


def stamp_prediction(draft: Draft, ctx: PodContext) -> bool:
    """Write the three ``<prefix>restore-*`` annotations (cluster mode only)."""
    state = ctx.cluster
    if not state.snapshots_known:
        return False
    result: Prediction = predict(
        pod_facts(draft, ctx),
        state.snapshots,
        state.node_pools,
        rootfs_only=ctx.rootfs_only,
        blockers=INIT_EMPTYDIR not in ctx.settings.rules.disabled,
        compute_classes=state.compute_classes,
    )
    ctx.memo[PREDICTION_KEY] = result
    changed = draft.put(ANNOTATIONS, ctx.settings.annotation(RESTORE_PREDICTION), result.outcome)
    if result.snapshot is not None:
        key = ctx.settings.annotation(RESTORE_SNAPSHOT)
        changed = draft.put(ANNOTATIONS, key, result.snapshot) or changed
    reason = result.reason[:MAX_REASON_CHARS]
    return draft.put(ANNOTATIONS, ctx.settings.annotation(RESTORE_REASON), reason) or changed
