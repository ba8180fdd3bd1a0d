"""The opt-in readiness gate ``<prefix>restore-settled`` (``restore.readiness_gate``).

Two traps of a real GKE cluster (docs/gke-facts.md#section-9) make ``Ready`` lie: a restored pod
answers its health check long before its memory has streamed in (``PodRestored`` comes tens of
seconds later), and an origin pod paused for its checkpoint upload keeps reporting Ready while its
Service sends it requests for minutes. With the gate, the kubelet counts a pod Ready only when
the pod condition ``<prefix>restore-settled`` is True too (Kubernetes pod readiness gates,
KEP-580); the leader sets that condition (``cluster.controllers.restores.gate``).
``spec.readinessGates`` is not a field of GKE's documented distilled spec
(docs/gke-facts.md#section-3), and every selected pod gets the same entry, origin and replicas
alike, so fingerprints stay equal either way. Whether GKE's own hash reads ``readinessGates`` is not
documented (docs/gke-facts.md#section-9, open questions): the gate is off by default.
"""

from __future__ import annotations

from webhook.base.keys import RESTORE_SETTLED
from webhook.mutation.patch import Draft
from webhook.pod.context import PodContext

GATES = ("spec", "readinessGates")


def add_readiness_gate(draft: Draft, ctx: PodContext) -> bool:
    """Append ``{"conditionType": "<prefix>restore-settled"}`` to ``spec.readinessGates`` when
    ``restore.readiness_gate`` is on and the pod does not carry it yet (idempotent)."""
    if not ctx.settings.restore.readiness_gate:
        return False
    condition = ctx.settings.annotation(RESTORE_SETTLED)
    gates = draft.get(*GATES)
    if isinstance(gates, list) and any(
        isinstance(gate, dict) and gate.get("conditionType") == condition for gate in gates
    ):
        return False
    return draft.extend(GATES, [{"conditionType": condition}])
