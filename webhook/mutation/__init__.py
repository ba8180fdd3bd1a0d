"""Pod mutation: the fixed-order mutator table and ``mutate_pod``, which returns one JSON Patch.

``webhook.admission.engine`` calls ``mutate_pod`` only for pods on CREATE (no subresource) that a
PodSnapshotPolicy selects. Steps:

1. Collision check: a user volume, container or init container named ``snapready-helpers``, or a
   user mount at ``/snapready``, that is not exactly what we inject. In ``enforce`` mode the pod
   is denied with every collision listed; in ``warn``/``audit`` mode (never block) the helpers
   are skipped (with a warning in ``warn`` mode) and only the annotations are written.
2. The mutators of ``MUTATORS`` edit one copy-on-write working copy (``patch.Draft``) in order:
   helper files (``helpers``), env (``env``), the GPU driver nodeSelector when
   ``rules.gpu_driver.pin`` is on (``driver``), ``<prefix>policy``, the label ``<prefix>selected``,
   the opt-in readiness gate (``webhook.mutation.gate``), ``<prefix>spec-hash`` (the
   fingerprint of the final pod) and, in cluster mode, the
   ``<prefix>restore-*`` prediction (``webhook.mutation.prediction``), and last the removal
   of every other ``<prefix>`` key the pod brought (``webhook.mutation.ownership``). Injection
   steps are skipped when ``settings.injection.enabled`` is false or the pod says
   ``<prefix>inject: "false"``.
3. The recorded operations are the patch. A pod already carrying everything (the webhook's own
   output on reinvocation) yields no operation, hence no ``patch`` in the response; a pod whose
   ``spec-hash`` went stale because another webhook changed hashed fields gets only that
   annotation replaced. ``dryRun`` requests get the same patch: nothing here has side effects.

``as_admitted`` replays only the injection steps on any pod or pod template, offline: the shape
whose fingerprint the webhook writes, for ``snapready hash`` and ``snapready diff``.

The helpers image contract (Dockerfile target ``helpers``) is in ``webhook.mutation.helpers``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from webhook.base.config import Settings
from webhook.base.keys import INJECT
from webhook.base.types import RawObject
from webhook.kube.responses import (
    Decision,
    bounded_lines,
    bounded_warnings,
    denied,
    patched,
)
from webhook.mutation.annotations import stamp_fingerprint, stamp_policy
from webhook.mutation.driver import pin_gpu_driver
from webhook.mutation.env import inject_env
from webhook.mutation.gate import add_readiness_gate
from webhook.mutation.helpers import collisions, inject_helpers, injection_wanted
from webhook.mutation.ownership import drop_foreign_keys
from webhook.mutation.patch import Draft, coalesced
from webhook.mutation.prediction import (
    PREDICTION_KEY,
    clear_outcome,
    cross_workload_line,
    stale_config_line,
    stamp_prediction,
    stamp_selected,
)
from webhook.pod.context import PodContext
from webhook.snapshots.state import ClusterState


@dataclass(frozen=True)
class Step:
    """One mutator: ``run(draft, ctx)`` edits the draft and returns whether it changed it.

    Attributes:
        name: stable id, recorded in ``Decision.audit["mutators"]``.
        run: the mutator.
        injection: True for helper injection (skipped when injection is off for the pod).
    """

    name: str
    run: Callable[[Draft, PodContext], bool]
    injection: bool = False


MUTATORS: tuple[Step, ...] = (
    Step("helpers", inject_helpers, injection=True),
    Step("env", inject_env, injection=True),
    Step("gpu-driver-pin", pin_gpu_driver),
    Step("policy-annotation", stamp_policy),
    Step("selected-label", stamp_selected),
    Step("outcome-reset", clear_outcome),
    Step("readiness-gate", add_readiness_gate),
    Step("spec-hash", stamp_fingerprint),
    Step("restore-prediction", stamp_prediction),
    Step("foreign-keys", drop_foreign_keys),
)
"""Fixed order; ``spec-hash`` hashes everything before it; only the (unhashed) prediction
annotations, which read the final fingerprint, come after it; ``foreign-keys`` runs last, as
it removes every ``<prefix>`` key that the steps before it did not set (``mutation.ownership``)."""


def mutate_pod(pod: RawObject, ctx: PodContext) -> Decision:
    """Mutate a selected pod on CREATE; returns a Decision carrying the patch (or a denial).

    Args:
        pod: the raw ``request.object`` (never modified: mutators edit a copy-on-write draft).
        ctx: the pod view (policies, settings, cluster state, effective mode).

    Returns:
        ``patched(ops)`` (no patch when nothing changed), or ``denied`` (403) listing every
        collision with a user object in ``enforce`` mode. ``audit`` holds ``policy`` and
        ``mode`` (for the admission log line), plus ``mutators`` and ``collisions`` when the
        mutators ran.
    """
    decision = _mutation_decision(pod, ctx)
    decision.audit.update({"policy": ctx.policy_ids, "mode": ctx.mode})
    return decision


def _mutation_decision(pod: RawObject, ctx: PodContext) -> Decision:
    limit = ctx.settings.injection.max_containers
    if container_count(ctx.spec) > limit:
        # Not mutated, not stamped, but still no forged snapready.io/ key on it.
        draft = Draft(pod)
        drop_foreign_keys(draft, ctx)
        return patched(draft.ops, warnings=(too_many_containers_message(limit),))
    inject = injection_wanted(ctx.metadata, ctx.settings)
    warnings: tuple[str, ...] = ()
    problems = collisions(ctx) if inject else []
    if problems:
        message = collision_message(problems, ctx.settings.annotation(INJECT))
        if ctx.mode == "enforce":
            return denied(message)
        inject = False
        warnings = bounded_warnings([message]) if ctx.mode == "warn" else ()
    draft, changed = run_mutators(pod, ctx, inject=inject)
    prediction = ctx.memo.get(PREDICTION_KEY)
    on_miss = ctx.settings.restore.on_miss
    if prediction is not None and prediction.outcome == "miss" and on_miss != "off":
        line = f"snapready: will cold-start ({prediction.snapshot}): {prediction.reason}"
        if on_miss == "deny":
            return denied(
                f"{line}. Set restore.on_miss=warn to admit pods predicted to miss, or match "
                "the snapshot (`snapready explain`)."
            )
        warnings = bounded_warnings([*warnings, line])
    cross = cross_workload_line(ctx)
    if cross is not None and ctx.settings.restore.cross_workload == "deny":
        return denied(f"snapready: {cross}. Set restore.cross_workload=warn to admit it.")
    if cross is not None and ctx.settings.restore.cross_workload == "warn":
        warnings = bounded_warnings([*warnings, cross])
    stale = stale_config_line(ctx)
    if stale is not None:
        warnings = bounded_warnings([*warnings, stale])
    decision = patched(coalesced(draft.ops), warnings=warnings)
    decision.audit.update({"mutators": changed, "collisions": problems})
    if prediction is not None:
        decision.audit["prediction"] = prediction.outcome
    return decision


def run_mutators(pod: RawObject, ctx: PodContext, *, inject: bool) -> tuple[Draft, list[str]]:
    """Run ``MUTATORS`` in order over a draft of ``pod`` (injection steps only if ``inject``).

    Returns:
        the draft (``draft.doc`` is the mutated pod, ``draft.ops`` the patch that produces it
        from ``pod``) and the names of the steps that changed something.
    """
    draft = Draft(pod)
    changed = [
        step.name for step in MUTATORS if (inject or not step.injection) and step.run(draft, ctx)
    ]
    return draft, changed


def as_admitted(pod: RawObject, settings: Settings) -> RawObject:
    """``pod`` as ``mutate_pod`` would leave it on a selected pod, minus the annotations and
    the ``<prefix>selected`` label (none of them is hashed).

    Runs the injection steps of ``MUTATORS`` (helpers, env) with the same guards as
    ``mutate_pod``: nothing is injected when ``settings.injection.enabled`` is false, the pod says
    ``<prefix>inject: "false"``, it has more than ``injection.max_containers`` containers, or
    ``collisions`` finds a reserved name (admission would then deny it, or skip the helpers in
    ``warn``/``audit`` mode). The ``policy``/``spec-hash`` annotations are not written: they are
    not hashed. Idempotent: a live pod that already carries the helpers comes back equal.

    Args:
        pod: a Pod or a pod template (``{"metadata": ..., "spec": ...}``); never modified.
        settings: the injection settings (the helpers image is part of the fingerprint).

    Returns:
        ``pod`` itself when nothing would be injected, else a new dict sharing the unchanged
        parts with ``pod`` (treat both as read-only).
    """
    metadata, spec = pod.get("metadata"), pod.get("spec")
    ctx = PodContext(
        spec=spec if isinstance(spec, dict) else {},
        metadata=metadata if isinstance(metadata, dict) else {},
        spec_path="spec",
        metadata_path="metadata",
        namespace="",
        kind="Pod",
        policies=(),  # the injection steps do not read policies or cluster state
        settings=settings,
        cluster=ClusterState(),
        mode="audit",
    )
    if container_count(ctx.spec) > settings.injection.max_containers:
        return pod
    if not injection_wanted(ctx.metadata, settings) or collisions(ctx):
        return pod
    draft = Draft(pod)
    changed = [step.name for step in MUTATORS if step.injection and step.run(draft, ctx)]
    return draft.doc if changed else pod


def container_count(spec: RawObject) -> int:
    """Containers plus init containers of a pod spec (non-list fields count as 0)."""
    return sum(
        len(value)
        for key in ("containers", "initContainers")
        if isinstance(value := spec.get(key), list)
    )


def too_many_containers_message(limit: int) -> str:
    """The warning for a pod over ``injection.max_containers`` (nothing was injected)."""
    return (
        f"snapready: pod has more than {limit} containers; it was not mutated (no helpers, no "
        "spec-hash annotation, no selected label: its restore outcome is not tracked). Raise "
        "injection.max_containers if this is intended."
    )


def collision_message(problems: list[str], inject_annotation: str) -> str:
    """The user-facing text for ``collisions`` (what is reserved and the two ways out)."""
    return (
        "snapready: cannot inject the rehydration helpers, these names are reserved: "
        + "; ".join(bounded_lines(problems, more="reserved names"))
        + ". Rename them (snapready adds its own 'snapready-helpers' volume and init container "
        f'and mounts /snapready), or annotate the pod {inject_annotation}: "false".'
    )
