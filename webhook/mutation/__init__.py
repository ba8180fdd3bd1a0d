"""Pod mutation: the fixed-order mutator table and ``mutate_pod``, which returns one JSON Patch.

Placeholder until the mutation issue: selected pods are admitted without a patch.
"""

from __future__ import annotations

from webhook.context import PodContext
from webhook.responses import Decision, allowed
from webhook.types import RawObject


def mutate_pod(pod: RawObject, ctx: PodContext) -> Decision:
    """Mutate a selected pod on CREATE; returns a Decision carrying the patch (or a denial).

    Args:
        pod: the raw ``request.object`` (never modified; mutators work on a deep copy).
        ctx: the pod view (policies, settings, cluster state).
    """
    del pod, ctx
    return allowed()
