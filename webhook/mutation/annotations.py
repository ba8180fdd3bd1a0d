"""Pod annotations: ``<prefix>policy`` and, last of all mutations, ``<prefix>spec-hash``.

``spec-hash`` is our distilled-spec fingerprint (``webhook.pod.distill``) of the final mutated pod,
so it includes everything injected before it. Annotations outside ``dev.gvisor.*`` are not
hashed (docs/gke-facts.md#section-3), so writing it cannot change the value it records. On a
reinvocation after another webhook changed hashed fields, only this annotation is rewritten.
"""

from __future__ import annotations

from webhook.base.keys import POLICY, SPEC_HASH
from webhook.mutation.patch import Draft
from webhook.pod.context import PodContext
from webhook.pod.memo import admitted

ANNOTATIONS = ("metadata", "annotations")
FINGERPRINT_KEY = "fingerprint"
"""Key in ``PodContext.memo`` of the fingerprint ``stamp_fingerprint`` computed (so later steps
know the value is snapready's own, not one the pod brought)."""
DISTILLED_KEY = "distilled"
"""Key in ``PodContext.memo`` of the ``distill.Distilled`` pod that fingerprint was computed
from (absent when the content memo knew it): the prediction's field digests reuse it."""


def stamp_policy(draft: Draft, ctx: PodContext) -> bool:
    """Set ``<prefix>policy`` to the selecting policy's name (names joined by ``,`` when
    several select the pod; ``ctx.policies`` is sorted by name, so the value is stable)."""
    names = ",".join(policy.name for policy in ctx.policies)
    return draft.put(ANNOTATIONS, ctx.settings.annotation(POLICY), names)


def stamp_fingerprint(draft: Draft, ctx: PodContext) -> bool:
    """Set ``<prefix>spec-hash`` to ``fingerprint`` of the working copy (run it last).

    Through the content memo (``webhook.pod.memo``): the validating call of the same pod then
    finds the value instead of recomputing it for ``hash-drift``. The distilled pod stays in
    ``ctx.memo`` for this request (``DISTILLED_KEY``), never longer.
    """
    value, distilled = admitted(draft.doc)
    ctx.memo[FINGERPRINT_KEY] = value
    if distilled is not None:
        ctx.memo[DISTILLED_KEY] = distilled
    return draft.put(ANNOTATIONS, ctx.settings.annotation(SPEC_HASH), value)
