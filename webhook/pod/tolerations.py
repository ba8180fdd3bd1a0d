"""Which node taints a pod tolerates: the scheduler's ``TaintToleration`` filter, on the taints
a node pool's nodes all carry (``snapshots.facts.node_pools``). Pure module.

A GKE GPU node pool is tainted ``nvidia.com/gpu=present:NoSchedule`` (when the cluster has a
pool without GPUs), a GKE Sandbox pool ``sandbox.gke.io/runtime=gvisor:NoSchedule``, and teams
taint pools of their own (``dedicated=inference:NoSchedule``). A pod lands only on pools whose
``NoSchedule`` and ``NoExecute`` taints it tolerates (k8s.io/kubernetes
pkg/scheduler/framework/plugins/tainttoleration; ``PreferNoSchedule`` only scores). The pod the
webhook sees already carries the tolerations the API server adds before webhooks run: its
RuntimeClass's (``RuntimeClass`` admission plugin), the not-ready/unreachable pair
(``DefaultTolerationSeconds``); not, on GKE, ``nvidia.com/gpu`` for a pod asking for GPUs
(review 03 of ../shared/data, captured on GKE, has none): ``GPU_TOLERATION`` stands in for it.
"""

from __future__ import annotations

from typing import NamedTuple

from webhook.base.types import RawObject
from webhook.snapshots.state import Taint

FILTERING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
"""Taint effects that keep a pod off a node (``PreferNoSchedule`` only lowers its score)."""


class Toleration(NamedTuple):
    """One pod toleration as written: ``key``/``value``/``effect`` (``""`` when unset) and
    ``operator`` (``Equal`` when unset)."""

    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        """k8s.io/api core/v1 ``Toleration.ToleratesTaint``: an empty effect matches every
        effect, an empty key (``Exists``) every key; ``Exists`` any value, ``Equal`` the same
        value; another operator nothing."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator == "Equal" and self.value == taint.value


GPU_TOLERATION = Toleration("nvidia.com/gpu", "Exists", "", "")
"""What a pod asking for ``nvidia.com/gpu`` (or a MIG partition) tolerates, written or not
(``pools.landing_pools``)."""


def tolerations_of(spec: RawObject) -> tuple[Toleration, ...]:
    """The pod's ``spec.tolerations`` (malformed entries left out: the API server refuses them)."""
    raw = spec.get("tolerations")
    out = []
    for item in raw if isinstance(raw, list) else ():
        if not isinstance(item, dict):
            continue
        fields = [item.get(name) for name in ("key", "operator", "value", "effect")]
        if not all(field is None or isinstance(field, str) for field in fields):
            continue
        key, operator, value, effect = (str(field or "") for field in fields)
        out.append(Toleration(key, operator or "Equal", value, effect))
    return tuple(out)


def tolerated(taints: frozenset[Taint], tolerations: tuple[Toleration, ...]) -> bool:
    """Whether every filtering taint of ``taints`` is tolerated by one of ``tolerations``."""
    return all(
        any(toleration.tolerates(taint) for toleration in tolerations)
        for taint in taints
        if taint.effect in FILTERING_EFFECTS
    )
