"""Where a GPU pod that pins its accelerator or family, but not its machine type, may land.

GKE Pod snapshots support an explicit list of GPU machine types (``rules.gpu_machine_types``,
docs/gke-facts.md#section-4), but the node labels a pod usually pins are shared by other shapes:
``cloud.google.com/gke-accelerator: nvidia-l4`` is on every G2 node, ``g2-standard-24``
(2 x L4) included; ``nvidia-h100-80gb`` is on ``a3-highgpu-8g`` as well as ``a3-highgpu-1g``.
``GPU_MACHINE_TYPES`` is Compute Engine's catalog of the series that carry supported types
(Compute Engine docs "GPU machine types" and "Accelerator-optimized machine family"). With
cluster facts, the node pools that match the pod's pins say where it can land; without them,
or when no pool matches (node auto-provisioning may then create one), the catalog does. Pins
that leave only unsupported types (``gke-accelerator-count: "8"`` with H100 is only
``a3-highgpu-8g``/``a3-edgegpu-8g``) are as bad as pinning such a type by name.
Required affinity terms are applied one by one (they are ORed), with their ``NotIn``/``Gt``/
``Lt``/``DoesNotExist`` exclusions (``hardware.Exclusion``) on the labels GKE derives from the
machine type: family, instance type, accelerator and ``gke-accelerator-count``.
Pure module: formatting is the caller's (``rules/gpu.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from webhook.kube.gke import (
    ACCELERATOR,
    ACCELERATOR_COUNT,
    INSTANCE_TYPE,
    MACHINE_FAMILY,
    instance_family,
)
from webhook.pod.context import PodContext
from webhook.pod.node_pins import Exclusion, NodeSelection
from webhook.rules.constraints import Constraint, possible
from webhook.rules.placement import Placement, family_constraints
from webhook.rules.tables import gpu_tables
from webhook.snapshots.state import NodePoolFacts

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
    # Compute Engine "GPU machine types", G4 (NVIDIA RTX PRO 6000 Blackwell 96GB).
    "g4-standard-48": ("nvidia-rtx-pro-6000", 1),
    "g4-standard-96": ("nvidia-rtx-pro-6000", 2),
    "g4-standard-192": ("nvidia-rtx-pro-6000", 4),
    "g4-standard-384": ("nvidia-rtx-pro-6000", 8),
}
"""Machine type -> (``cloud.google.com/gke-accelerator`` value, GPUs) for G2, A2, A3 and G4."""


_MODELLED = (MACHINE_FAMILY, INSTANCE_TYPE, ACCELERATOR, ACCELERATOR_COUNT)
"""Node labels whose value on a GKE GPU node follows from its machine type."""

Supported = tuple[tuple[str, int], ...]
"""``rules.gpu_machine_types`` as a hashable value: ``((machine type, GPUs), ...)``."""


@dataclass(frozen=True)
class Landing:
    """Where a GPU pod pinned by family or accelerator (not machine type) may land.

    Attributes:
        unsupported: machine types it may land on (and fits on) that snapshots do not
            support, fewest GPUs first.
        supported: ``(machine type, GPUs)`` of the supported types with at least the pod's
            GPUs to pin instead, in ``rules.gpu_machine_types`` order (the caller applies the
            whole-node version gate).
        pin: the statement the finding points at: the pod's GPU-count pin when it alone rules
            out every supported type (``drop_count``), else its accelerator pin, else its
            family pin.
        pools: names of the matching node pools the unsupported types come from (empty: from
            the catalog).
        only: no supported type is among where it may land: the same as pinning one of
            ``unsupported`` by instance type (a denial); else it may *also* land on them.
        drop_count: removing the ``gke-accelerator-count`` pin lets it land on ``supported``.
    """

    unsupported: tuple[str, ...]
    supported: Supported
    pin: Constraint
    pools: tuple[str, ...] = ()
    only: bool = False
    drop_count: bool = False


def gpu_count(machine_type: str, supported: Mapping[str, int]) -> int | None:
    """GPUs of a machine type (the supported list first, then the catalog); None if unknown."""
    if machine_type in supported:
        return supported[machine_type]
    entry = GPU_MACHINE_TYPES.get(machine_type)
    return entry[1] if entry else None


def node_labels(machine_type: str, supported: Mapping[str, int]) -> dict[str, str]:
    """The ``_MODELLED`` labels GKE puts on a node of ``machine_type`` (GKE "About GPUs":
    ``gke-accelerator`` and ``gke-accelerator-count`` on GPU nodes); the accelerator and count
    are absent when neither the catalog nor ``supported`` knows them."""
    labels = {INSTANCE_TYPE: machine_type, MACHINE_FAMILY: instance_family(machine_type)}
    entry = GPU_MACHINE_TYPES.get(machine_type)
    if entry:
        labels[ACCELERATOR] = entry[0]
    count = gpu_count(machine_type, supported)
    if count is not None:
        labels[ACCELERATOR_COUNT] = str(count)
    return labels


@dataclass(frozen=True)
class _Term:
    """One required affinity term's statements about the ``_MODELLED`` labels."""

    allow: tuple[tuple[str, frozenset[str]], ...]
    exclude: tuple[tuple[str, Exclusion], ...]

    def admits(self, labels: Mapping[str, str]) -> bool:
        """Whether a node with ``labels`` passes every statement (a label the model does not
        know for the type, e.g. the accelerator of a type outside the catalog, is not held
        against it)."""
        if any(key in labels and labels[key] not in values for key, values in self.allow):
            return False
        return all(key not in labels or rule.admits(labels[key]) for key, rule in self.exclude)

    def without(self, key: str) -> _Term:
        """This term without its statements about ``key``."""
        allow = tuple(item for item in self.allow if item[0] != key)
        return _Term(allow, tuple(item for item in self.exclude if item[0] != key))


def _terms(selection: NodeSelection) -> tuple[_Term, ...]:
    """The pod's affinity terms as ``_Term``; empty when it has none, or when one says nothing
    about the modelled labels (that term admits every GPU node, and terms are ORed)."""
    out: list[_Term] = []
    for allowed, excluded in zip(selection.terms, selection.exclusions, strict=False):
        term = _Term(
            tuple((key, allowed[key]) for key in _MODELLED if key in allowed),
            tuple((key, rule) for key in _MODELLED for rule in excluded.get(key, ())),
        )
        if not term.allow and not term.exclude:
            return ()
        out.append(term)
    return tuple(out)


def affinity_admits(selection: NodeSelection, supported: Mapping[str, int]) -> set[str]:
    """The ``supported`` machine types some required affinity term of the pod admits (all of
    them without terms), judged on the labels GKE gives their nodes (``node_labels``)."""
    terms = _terms(selection)
    return {
        name
        for name in supported
        if not terms or any(term.admits(node_labels(name, supported)) for term in terms)
    }


@dataclass(frozen=True)
class _Pins:
    """The pod's exhaustive pins on family, accelerator and GPU count (None: not pinned), and
    its affinity terms (empty: no restriction beyond the pins)."""

    families: frozenset[str]
    accelerators: frozenset[str] | None
    counts: frozenset[str] | None
    terms: tuple[_Term, ...] = ()

    def admit(self, machine_type: str, supported: Mapping[str, int]) -> bool:
        """Whether a node of ``machine_type`` carries labels these pins accept."""
        labels = node_labels(machine_type, supported)
        for key, values in ((ACCELERATOR, self.accelerators), (ACCELERATOR_COUNT, self.counts)):
            # A type outside the catalog carries whatever accelerator its (pinned) family implies.
            if values is not None and key in labels and labels[key] not in values:
                return False
        if labels[MACHINE_FAMILY] not in self.families:
            return False
        return not self.terms or any(term.admits(labels) for term in self.terms)

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
    pins: _Pins, gpus: int, supported: Supported
) -> tuple[tuple[str, ...], Supported]:
    """``(unsupported types the pins allow, supported ones they allow with >= gpus GPUs)`` from
    the catalog.

    Pure and cached: a workload's replicas repeat the same question on every admission.
    """
    table = dict(supported)
    catalog = {t for t in (*GPU_MACHINE_TYPES, *table) if pins.admit(t, table)}
    fits = tuple((t, n) for t, n in supported if n >= gpus and t in catalog)
    return tuple(_unsupported(catalog, gpus, table)), fits


def _replacements(pins: _Pins, gpus: int, supported: Supported) -> tuple[Supported, bool]:
    """Supported types to pin instead, and whether the pod's GPU-count statements (its
    ``gke-accelerator-count`` pin, ``In``/``Gt``/``Lt``/``NotIn`` in its terms) must go: the
    pins as they are; else without those; else without the affinity terms too (other
    exclusions then stand in the way, which pinning an instance type replaces)."""
    _, offer = _from_catalog(pins, gpus, supported)
    if offer:
        return offer, False
    terms = tuple(term.without(ACCELERATOR_COUNT) for term in pins.terms)
    _, offer = _from_catalog(replace(pins, counts=None, terms=terms), gpus, supported)
    if offer:
        return offer, True
    _, offer = _from_catalog(replace(pins, counts=None, terms=()), gpus, supported)
    return offer, False


def landing(ctx: PodContext, place: Placement) -> Landing | None:
    """Unsupported types a GPU pod pinned by family/accelerator (not type) may land on.

    Args:
        ctx: the pod view (settings, cluster facts).
        place: its resolved placement.

    Returns:
        A ``Landing`` (``only`` when no supported type is among where it may land); None when
        the pod pins its instance type, pins no family at all, may land only on supported
        types, or no supported type of its families has enough GPUs (other findings say why:
        ``gpu-multi-l4``).
    """
    rules, gpus = ctx.settings.rules, place.gpus.total
    if possible(place.instance_types) is not None:
        return None
    constraints = family_constraints(place, rules)
    families = possible(constraints)
    if families is None:
        return None
    terms = _terms(place.selection)
    pins = _Pins(families, possible(place.accelerators), possible(place.accelerator_counts), terms)
    supported = tuple(gpu_tables(rules).counts.items())
    unsupported, reachable = _from_catalog(pins, gpus, supported)
    pools = sorted(
        (f for f in ctx.cluster.node_pools.values() if pins.admit_pool(f)), key=lambda f: f.name
    )
    if pools:
        table = gpu_tables(rules).counts
        types = {t for facts in pools for t in facts.instance_types if pins.admit(t, table)}
        unsupported = tuple(_unsupported(types, gpus, table))
        reachable = tuple((t, table[t]) for t in sorted(types) if table.get(t, 0) >= gpus)
    if not unsupported:
        return None
    offer, drop_count = _replacements(pins, gpus, supported)
    if not offer:
        return None
    count_pin = next((c for c in place.accelerator_counts if c.exhaustive), None)
    drop = drop_count and count_pin is not None
    pin = next(c for c in (*place.accelerators, *place.families, *constraints) if c.exhaustive)
    pin = count_pin if count_pin is not None and drop else pin
    names = tuple(f.name for f in pools if f.instance_types & set(unsupported))
    return Landing(unsupported, offer, pin, names, not reachable, drop)
