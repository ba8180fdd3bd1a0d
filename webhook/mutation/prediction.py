"""The ``<prefix>selected`` label and the restore prediction annotations of a selected pod.

``<prefix>selected: "true"`` marks every pod a policy selects, so cluster mode can watch exactly
those pods with a label selector (labels other than ``batch.kubernetes.io/job-completion-index``
are not part of the distilled spec; the policy name stays an annotation, since policy names may
exceed the 63 characters of a label value).
``<prefix>restore-prediction`` (``hit``/``miss``/``none``), ``<prefix>restore-snapshot`` and
``<prefix>restore-reason`` record what ``webhook.pod.restore.predict`` says about the final pod
(run after ``spec-hash``, so on the final spec). Written only when the snapshots are known
(cluster mode, PodSnapshots listed); none of them is hashed.
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
from webhook.base.text import clip
from webhook.base.types import mapping
from webhook.mutation.annotations import FINGERPRINT_KEY
from webhook.mutation.patch import Draft
from webhook.pod.context import PodContext
from webhook.pod.fields import field_digests
from webhook.pod.memo import admitted_field_digests
from webhook.pod.node_pins import node_selection
from webhook.pod.restore import PodFacts, Prediction, predict
from webhook.snapshots.config_refs import config_changes
from webhook.snapshots.views import workload_of

LABELS = ("metadata", "labels")
ANNOTATIONS = ("metadata", "annotations")
PREDICTION_KEY = "prediction"
"""Key of the ``Prediction`` in ``PodContext.memo`` (read by ``mutate_pod`` for the warning)."""
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
    return PodFacts(
        namespace=ctx.namespace,
        labels={k: v for k, v in labels.items() if isinstance(v, str)},
        annotations={k: v for k, v in annotations.items() if isinstance(v, str)},
        policies=ctx.policies,
        spec_hash=spec_hash,
        # The replicas of one template share the fingerprint stamp_fingerprint computed just
        # before: they distill once for their field digests (only snapready's own value keys
        # the memo, never one the pod brought).
        fields=lambda: (
            admitted_field_digests(spec_hash, doc) if spec_hash == computed else field_digests(doc)
        ),
        # Injection never touches node pins; read only when there are snapshots to compare.
        selection=lambda: node_selection(ctx.spec, "spec"),
    )


def cross_workload_line(ctx: PodContext) -> str | None:
    """``cross-workload``: the warning for a ``hit`` whose snapshot was taken from another
    workload than the pod's own (both known: the pod's top controller from its
    ownerReferences, the snapshot's from its origin record), else None."""
    result: Prediction | None = ctx.memo.get(PREDICTION_KEY)
    if result is None or result.outcome != "hit" or result.snapshot is None:
        return None
    view = ctx.cluster.snapshots.named(ctx.namespace, result.snapshot)
    origin = view.origin.workload if view is not None and view.origin is not None else None
    own = workload_of(ctx.metadata)
    if origin is None or own is None or (origin.kind, origin.name) == (own.kind, own.name):
        return None
    return (
        f"[cross-workload] will restore the memory of {clip(origin.kind)} {clip(origin.name)} "
        f"(snapshot {clip(result.snapshot, 63)}), not of {clip(own.kind)} {clip(own.name)}; "
        "group the policy by a label that differs per workload (snapshotGroupingRules)"
    )


def stale_config_line(ctx: PodContext) -> str | None:
    """``stale-config``: the warning for a ``hit`` on a snapshot taken before a Secret or
    ConfigMap its origin pod read changed (``snapshots.config_refs``; GKE hashes no env and no
    Secret content, so the restored memory holds the old value), else None."""
    result: Prediction | None = ctx.memo.get(PREDICTION_KEY)
    if result is None or result.outcome != "hit" or result.snapshot is None:
        return None
    view = ctx.cluster.snapshots.named(ctx.namespace, result.snapshot)
    changes = config_changes(view, ctx.cluster.configs) if view is not None else ()
    if not changes:
        return None
    first = changes[0]
    if first.what == "changed":
        when = " from before its change" + (f" at {first.at}" if first.at else "")
    elif first.what == "deleted":
        when = ", deleted since"
    else:
        when = " as it was before it existed (created since)"
    more = f" (and {len(changes) - 1} more)" if len(changes) > 1 else ""
    return (
        f"[stale-config] restores with the value of {first.kind} {clip(first.name, 253)}{when}"
        f"{more} (snapshot {clip(result.snapshot, 63)}); take a new snapshot to pick up the "
        "current configuration"
    )


def stamp_prediction(draft: Draft, ctx: PodContext) -> bool:
    """Write the three ``<prefix>restore-*`` annotations (cluster mode only)."""
    state = ctx.cluster
    if not state.snapshots_known:
        return False
    result: Prediction = predict(
        pod_facts(draft, ctx), state.snapshots, state.node_pools, rootfs_only=ctx.rootfs_only
    )
    ctx.memo[PREDICTION_KEY] = result
    changed = draft.put(ANNOTATIONS, ctx.settings.annotation(RESTORE_PREDICTION), result.outcome)
    if result.snapshot is not None:
        key = ctx.settings.annotation(RESTORE_SNAPSHOT)
        changed = draft.put(ANNOTATIONS, key, result.snapshot) or changed
    reason = result.reason[:MAX_REASON_CHARS]
    return draft.put(ANNOTATIONS, ctx.settings.annotation(RESTORE_REASON), reason) or changed
