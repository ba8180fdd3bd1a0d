"""Pod mutation: the fixed-order mutator table and ``mutate``, which returns one JSON Patch and
the findings met on the way; admission decides (``admission.pods.mutate_pod``).

``webhook.admission.pods`` calls ``mutate`` only for pods on CREATE (no subresource) that a
PodSnapshotPolicy selects. Steps:

1. Collision check: a user volume, container or init container named ``snapready-helpers``, or a
   user mount at ``/snapready``, that is not exactly what we inject, is a ``helper-collision``
   finding listing every collision, and the helpers are skipped (only the annotations are
   written). Admission decides it in the pod's mode: ``enforce`` denies the pod, ``warn`` warns,
   ``audit`` only records it. A pod over ``injection.max_containers`` is not mutated at all
   (``too-many-containers``).
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

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from webhook.base.config import Settings
from webhook.base.keys import INJECT
from webhook.base.types import Finding, JsonPatchOp, RawObject, Wording
from webhook.kube.responses import bounded_lines
from webhook.mutation.annotations import stamp_fingerprint, stamp_policy
from webhook.mutation.driver import pin_gpu_driver
from webhook.mutation.env import inject_env
from webhook.mutation.gate import add_readiness_gate
from webhook.mutation.helpers import collisions, inject_helpers, injection_wanted
from webhook.mutation.ownership import drop_foreign_keys
from webhook.mutation.patch import Draft, coalesced
from webhook.mutation.prediction import clear_outcome, stamp_prediction, stamp_selected
from webhook.pod.context import PodContext, join_path
from webhook.pod.restore import PREDICTION_KEY, Prediction
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


HELPER_COLLISION = "helper-collision"
"""Rule id: a user name or mount collides with the injected helpers (follows the pod's mode)."""
TOO_MANY_CONTAINERS = "too-many-containers"
"""Rule id: the pod has more containers than ``injection.max_containers`` (a warning)."""
WORDINGS: Mapping[str, Wording] = {
    HELPER_COLLISION: Wording("snapready: {message}", "snapready: {message}", pod_mode=True),
    TOO_MANY_CONTAINERS: Wording("snapready: {message}", "snapready: {message}"),
}
"""How the mutation's findings read (the texts predate them as findings and are kept)."""


class Mutation(NamedTuple):
    """What the mutators did to one selected pod and what they found; no decision (admission
    decides: ``admission.decision.decide_mutation``, under ``rules.disabled``/``rules.modes``).

    Attributes:
        ops: the JSON Patch from the request object to the mutated pod (``[]``: unchanged).
        findings: ``too-many-containers`` or ``helper-collision`` (``WORDINGS`` words them).
        mutators: names of the steps of ``MUTATORS`` that changed something; None when none
            ran (more than ``injection.max_containers`` containers).
        collisions: what ``helpers.collisions`` found, each with its field path.
        prediction: the restore prediction written on the pod (cluster mode), else None.
    """

    ops: list[JsonPatchOp]
    findings: list[Finding]
    mutators: list[str] | None
    collisions: list[str]
    prediction: Prediction | None


def mutate(pod: RawObject, ctx: PodContext) -> Mutation:
    """Mutate a selected pod on CREATE: the patch and the findings, undecided.

    Args:
        pod: the raw ``request.object`` (never modified: mutators edit a copy-on-write draft).
        ctx: the pod view (policies, settings, cluster state, effective mode).

    Returns:
        Over ``injection.max_containers`` containers: only the removal of foreign ``<prefix>``
        keys, and a ``too-many-containers`` finding. Else the patch of every mutator; a reserved
        name (``helpers.collisions``) skips the injection steps and is a ``helper-collision``
        finding listing every collision (``enforce`` mode turns it into the denial).
    """
    limit = ctx.settings.injection.max_containers
    if container_count(ctx.spec) > limit:
        # Not mutated, not stamped, but still no forged snapready.io/ key on it.
        draft = Draft(pod)
        drop_foreign_keys(draft, ctx)
        finding = Finding(
            join_path(ctx.spec_path, "containers"),
            TOO_MANY_CONTAINERS,
            too_many_containers_message(limit),
            "warn",
        )
        return Mutation(draft.ops, [finding], None, [], None)
    inject = injection_wanted(ctx.metadata, ctx.settings)
    problems = collisions(ctx) if inject else []
    findings: list[Finding] = []
    if problems:
        message = collision_message(problems, ctx.settings.annotation(INJECT))
        findings.append(Finding(ctx.spec_path, HELPER_COLLISION, message, "deny"))
    draft, changed = run_mutators(pod, ctx, inject=inject and not problems)
    prediction = ctx.memo.get(PREDICTION_KEY)
    return Mutation(coalesced(draft.ops), findings, changed, problems, prediction)


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
    """``pod`` as ``mutate`` would leave it on a selected pod, minus the annotations and
    the ``<prefix>selected`` label (none of them is hashed).

    Runs the injection steps of ``MUTATORS`` (helpers, env) with the same guards as
    ``mutate``: nothing is injected when ``settings.injection.enabled`` is false, the pod says
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
    """``too-many-containers``: a pod over ``injection.max_containers`` (nothing was injected)."""
    return (
        f"pod has more than {limit} containers; it was not mutated (no helpers, no "
        "spec-hash annotation, no selected label: its restore outcome is not tracked). Raise "
        "injection.max_containers if this is intended."
    )


def collision_message(problems: list[str], inject_annotation: str) -> str:
    """``helper-collision``: what ``collisions`` found is reserved, and the two ways out."""
    return (
        "cannot inject the rehydration helpers, these names are reserved: "
        + "; ".join(bounded_lines(problems, more="reserved names"))
        + ". Rename them (snapready adds its own 'snapready-helpers' volume and init container "
        f'and mounts /snapready), or annotate the pod {inject_annotation}: "false".'
    )
