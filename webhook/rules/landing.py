"""Where a GPU pod that pins its accelerator or family, but not its machine type, may land.

GKE Pod snapshots support an explicit list of GPU machine types (``rules.gpu_machine_types``,
domain.md section 4), but the node labels a pod usually pins are shared by other shapes:
``cloud.google.com/gke-accelerator: nvidia-l4`` is on every G2 node, ``g2-standard-24``
(2 x L4) included; ``nvidia-h100-80gb`` is on ``a3-highgpu-8g`` as well as ``a3-highgpu-1g``.
``GPU_MACHINE_TYPES`` is Compute Engine's catalog of the series that carry supported types
(Compute Engine docs "GPU machine types" and "Accelerator-optimized machine family"). With
cluster facts, the node pools that match the pod's pins say where it can land; without them,
or when no pool matches (node auto-provisioning may then create one), the catalog does.
Pure module: formatting is the caller's (``rules/gpu.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from webhook.context import PodContext
from webhook.rules.placement import (
    Constraint,
    Placement,
    family_constraints,
    instance_family,
    possible,
)
from webhook.state import NodePoolFacts

GPU_MACHINE_TYPES: dict[str, tuple[str, int]] = {
    "g2-standard-4": ("nvidia-l4", 1),
    "g2-standard-8": ("nvidia-l4", 1),
    "g2-standard-12": ("nvidia-l4", 1),
    "g2-standard-16": ("nvidia-l4", 1),
    "g2-standard-24": ("nvidia-l4", 2),
    "g2-standard-32": ("nvidia-l4", 1),
    "g2-standard-48": ("nvidia-l4", 4),
    "g2-standard-96": ("nvidia-l4", 8),
    "a2-highgpu-1g": ("nvidia-tesla-a100", 1),
    "a2-highgpu-2g": ("nvidia-tesla-a100", 2),
    "a2-highgpu-4g": ("nvidia-tesla-a100", 4),
    "a2-highgpu-8g": ("nvidia-tesla-a100", 8),
    "a2-megagpu-16g": ("nvidia-tesla-a100", 16),
    "a2-ultragpu-1g": ("nvidia-a100-80gb", 1),
    "a2-ultragpu-2g": ("nvidia-a100-80gb", 2),
    "a2-ultragpu-4g": ("nvidia-a100-80gb", 4),
    "a2-ultragpu-8g": ("nvidia-a100-80gb", 8),
    "a3-highgpu-1g": ("nvidia-h100-80gb", 1),
    "a3-highgpu-2g": ("nvidia-h100-80gb", 2),
    "a3-highgpu-4g": ("nvidia-h100-80gb", 4),
    "a3-highgpu-8g": ("nvidia-h100-80gb", 8),
    "a3-edgegpu-8g": ("nvidia-h100-80gb", 8),
    "a3-megagpu-8g": ("nvidia-h100-mega-80gb", 8),
    "a3-ultragpu-8g": ("nvidia-h200-141gb", 8),
}
"""Machine type -> (``cloud.google.com/gke-accelerator`` value, GPUs) for G2, A2 and A3."""


@dataclass(frozen=True)
class Landing:
    """Unsupported machine types a GPU pod may land on, and what to pin instead.

    Attributes:
        unsupported: machine types it may land on (and fits on) that snapshots do not support.
        supported: supported types matching the same pins with enough GPUs (exactly the pod's
            count when ``exact``), in ``rules.gpu_machine_types`` order.
        pin: the pod's pin the finding points at (accelerator first, then family).
        pools: names of the matching node pools the unsupported types come from (empty: from
            the catalog).
    """

    unsupported: tuple[str, ...]
    supported: tuple[str, ...]
    pin: Constraint
    pools: tuple[str, ...] = ()


Supported = tuple[tuple[str, int], ...]
"""``rules.gpu_machine_types`` as a hashable value: ``((machine type, GPUs), ...)``."""


def gpu_count(machine_type: str, supported: Mapping[str, int]) -> int | None:
    """GPUs of a machine type (the supported list first, then the catalog); None if unknown."""
    if machine_type in supported:
        return supported[machine_type]
    entry = GPU_MACHINE_TYPES.get(machine_type)
    return entry[1] if entry else None


@dataclass(frozen=True)
class _Pins:
    """The pod's exhaustive pins on family, accelerator and GPU count (None: not pinned)."""

    families: frozenset[str]
    accelerators: frozenset[str] | None
    counts: frozenset[str] | None

    def admit(self, machine_type: str, supported: Mapping[str, int]) -> bool:
        """Whether a node of ``machine_type`` carries labels these pins accept."""
        if instance_family(machine_type) not in self.families:
            return False
        entry = GPU_MACHINE_TYPES.get(machine_type)
        # A type outside the catalog carries whatever accelerator its (pinned) family implies.
        if self.accelerators is not None and entry and entry[0] not in self.accelerators:
            return False
        count = gpu_count(machine_type, supported)
        return self.counts is None or count is None or str(count) in self.counts

    def admit_pool(self, facts: NodePoolFacts) -> bool:
        """Whether a pool with nodes and GPUs has labels these pins accept."""
        families = facts.machine_families or {instance_family(t) for t in facts.instance_types}
        return bool(
            facts.node_count
            and facts.accelerators
            and families & self.families
            and (self.accelerators is None or facts.accelerators & self.accelerators)
            and (self.counts is None or facts.accelerator_counts & self.counts)
        )


def _unsupported(types: Iterable[str], gpus: int, supported: Mapping[str, int]) -> list[str]:
    """The unsupported ``types`` a pod of ``gpus`` GPUs fits on (unknown GPU counts kept),
    fewest GPUs first."""
    fit = {t for t in types if t not in supported and (gpu_count(t, supported) or gpus) >= gpus}
    return sorted(fit, key=lambda t: (gpu_count(t, supported) or 0, t))


@functools.lru_cache(maxsize=512)
def _from_catalog(
    pins: _Pins, gpus: int, exact: bool, supported: Supported
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(unsupported types the pins allow, supported types to pin instead)`` from the catalog.

    Pure and cached: a workload's replicas repeat the same question on every admission.
    """
    table = dict(supported)
    catalog = {t for t in (*GPU_MACHINE_TYPES, *table) if pins.admit(t, table)}
    fits = [t for t, n in supported if n >= gpus and pins.admit(t, table)]
    whole = [t for t in fits if table[t] == gpus]
    return tuple(_unsupported(catalog, gpus, table)), tuple(whole if exact and whole else fits)


def landing(ctx: PodContext, place: Placement, *, exact: bool) -> Landing | None:
    """Unsupported types a GPU pod pinned by family/accelerator (not type) may land on.

    Args:
        ctx: the pod view (settings, cluster facts).
        place: its resolved placement.
        exact: suggest only supported types with exactly the pod's GPU count when any exists
            (before GKE ``rules.gpu_subset_min_version`` a pod must take all of a node's GPUs).

    Returns:
        None when the pod pins its instance type, pins no family at all, may land only on
        supported types, or has no supported type to pin instead (other findings say why).
    """
    rules, gpus = ctx.settings.rules, place.gpus.total
    if possible(place.instance_types) is not None:
        return None
    constraints = family_constraints(place, rules)
    families = possible(constraints)
    if families is None:
        return None
    pins = _Pins(families, possible(place.accelerators), possible(place.accelerator_counts))
    supported = tuple(rules.gpu_machine_types.items())
    unsupported, suggest = _from_catalog(pins, gpus, exact, supported)
    pools = sorted(
        (f for f in ctx.cluster.node_pools.values() if pins.admit_pool(f)), key=lambda f: f.name
    )
    if pools:
        types = {t for facts in pools for t in facts.instance_types}
        unsupported = tuple(_unsupported(types, gpus, rules.gpu_machine_types))
    if not unsupported or not suggest:
        return None
    pin = next(c for c in (*place.accelerators, *place.families, *constraints) if c.exhaustive)
    names = tuple(f.name for f in pools if f.instance_types & set(unsupported))
    return Landing(unsupported, suggest, pin, names)
