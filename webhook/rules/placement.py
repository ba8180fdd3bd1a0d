"""Where a pod can run: its node pins (``webhook.pod.node_pins``) resolved against cluster facts.

A pod pinned to a node pool (``cloud.google.com/gke-nodepool``) or a ComputeClass
(``cloud.google.com/compute-class``) says nothing about its machine by itself; in cluster mode
``ClusterState.node_pools`` / ``compute_classes`` (filled by ``cluster.api.caches`` from Node labels
and ComputeClass objects) tell us. Offline (file source) they are empty and such pins become
``Unknown`` entries the rules report as warnings instead of guessing (docs/gke-facts.md#section-5).
A pod bound to named nodes (``matchFields`` ``metadata.name In``: every DaemonSet pod, see
k8s pkg/controller/daemon/util ``ReplaceDaemonSetPodNodeNameNodeAffinity``) is placed by those
nodes' labels (``ClusterState.nodes``), or gets ``Unknown`` entries of kind ``node``.
Pure module: reads the PodContext only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.base.sections import RuleSettings
from webhook.base.text import clip, clip_all
from webhook.kube.gke import (
    ACCELERATOR,
    ACCELERATOR_COUNT,
    COMPUTE_CLASS,
    GPU_RESOURCE,
    INSTANCE_TYPE,
    MACHINE_FAMILY,
    MAX_SHARED_CLIENTS,
    MIG_RESOURCE_PREFIX,
    NODE_NAME,
    NODE_POOL,
    PARTITION_SIZE,
    SHARING_STRATEGY,
    TPU_RESOURCE,
    instance_family,
)
from webhook.pod.context import PodContext
from webhook.pod.node_pins import LabelPin, NodeSelection, node_selection
from webhook.pod.resources import (
    ResourceUsage,
    merged_usage,
    prefixed_resources,
    resource_usages,
)
from webhook.rules.constraints import Constraint, Unknown
from webhook.rules.tables import gpu_tables
from webhook.snapshots.state import NodePoolFacts


@dataclass(frozen=True)
class Placement:
    """Everything the machine, GPU and TPU rules need about one pod, computed once.

    Attributes:
        pins: raw node-label pins by key.
        families, instance_types, accelerators, accelerator_counts: constraints per property.
        partition_sizes, sharing: statements that MIG / GPU sharing is used (each one counts).
        term_families: at most one exhaustive family statement derived term by term, for
            affinity terms that each pin a family by a different label (family in one,
            instance type or accelerator in another).
        unknown: pins that could not be resolved to machines.
        gpus, tpus: whole-pod ``nvidia.com/gpu`` and ``google.com/tpu`` usage.
        selection: the raw node selection (per-term values, ``nodeSelectorTerms`` path).
    """

    pins: Mapping[str, LabelPin]
    families: tuple[Constraint, ...]
    instance_types: tuple[Constraint, ...]
    accelerators: tuple[Constraint, ...]
    accelerator_counts: tuple[Constraint, ...]
    partition_sizes: tuple[Constraint, ...]
    sharing: tuple[Constraint, ...]
    term_families: tuple[Constraint, ...]
    unknown: tuple[Unknown, ...]
    gpus: ResourceUsage
    tpus: ResourceUsage
    selection: NodeSelection
    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """What ``family_constraints`` derived (with the rules it used), read by several rules."""


def family_constraints(place: Placement, rules: RuleSettings) -> tuple[Constraint, ...]:
    """Family statements from every source: family pins and pool/class/node facts, instance
    types (their family prefix), supported accelerators (the families carrying them) and the
    term-by-term reading of the affinity. Computed once per placement and rules (the machine
    and GPU rules each ask)."""
    cached = place.derived.get("families")
    if cached is not None and cached[0] is rules:
        constraints: tuple[Constraint, ...] = cached[1]
        return constraints
    constraints = _family_constraints(place, rules)
    place.derived["families"] = (rules, constraints)
    return constraints


def _family_constraints(place: Placement, rules: RuleSettings) -> tuple[Constraint, ...]:
    out = list(place.families)
    for c in place.instance_types:
        families = frozenset(instance_family(t) for t in c.values)
        out.append(Constraint(families, c.exhaustive, c.path, c.source))
    for c in place.accelerators:
        carriers = accelerator_families(c.values, rules)
        if carriers is not None:
            out.append(Constraint(carriers, c.exhaustive, c.path, c.source))
    out.extend(place.term_families)
    return tuple(out)


def accelerator_families(
    accelerators: frozenset[str], rules: RuleSettings
) -> frozenset[str] | None:
    """Families carrying every one of ``accelerators`` (``rules.gpu_accelerators`` and
    ``rules.validated_gpu_accelerators``); None when
    there are none or one is not a supported accelerator (``gpu-machine`` reports it)."""
    carriers = gpu_tables(rules).accelerator_families
    if not accelerators or not all(a in carriers for a in accelerators):
        return None
    return frozenset(f for a in accelerators for f in carriers[a])


def _term_families(selection: NodeSelection, rules: RuleSettings) -> tuple[Constraint, ...]:
    """One exhaustive family statement when every affinity term pins a family by some label.

    Terms are ORed, so the pod may land on the union of the terms' families; inside a term the
    family, instance-type and accelerator pins are ANDed (their families intersect). A term that
    pins no family leaves the pod unpinned: then nothing is derived.
    """
    if not selection.terms:
        return ()
    union: set[str] = set()
    for term in selection.terms:
        stated = [term.get(MACHINE_FAMILY)]
        if INSTANCE_TYPE in term:
            stated.append(frozenset(instance_family(t) for t in term[INSTANCE_TYPE]))
        if ACCELERATOR in term:
            stated.append(accelerator_families(term[ACCELERATOR], rules))
        known = [families for families in stated if families is not None]
        if not known:
            return ()
        union |= known[0].intersection(*known[1:])
    return (Constraint(frozenset(union), True, selection.terms_path, "node affinity"),)


def _from_pin(pin: LabelPin | None) -> tuple[Constraint, ...]:
    if pin is None or not pin.mentioned:
        return ()
    source = "nodeSelector" if ".nodeSelector[" in pin.path else "node affinity"
    return (Constraint(pin.values, pin.exhaustive, pin.path, source, pin.value_paths),)


def _pool_facts(
    pin: LabelPin, pools: Mapping[str, NodePoolFacts]
) -> tuple[list[NodePoolFacts], list[Unknown]]:
    known: list[NodePoolFacts] = []
    unknown: list[Unknown] = []
    for name in sorted(pin.values):
        facts = pools.get(name)
        if facts is None:
            unknown.append(Unknown(pin.path, f'node pool "{clip(name)}" has no node facts here'))
        elif facts.node_count == 0:
            unknown.append(Unknown(pin.path, f'node pool "{clip(name)}" has no nodes yet'))
        else:
            known.append(facts)
    return known, unknown


_NODE_LABELS = {
    MACHINE_FAMILY: "machine_families",
    INSTANCE_TYPE: "instance_types",
    ACCELERATOR: "accelerators",
    ACCELERATOR_COUNT: "accelerator_counts",
    PARTITION_SIZE: "partition_sizes",
    SHARING_STRATEGY: "sharing_strategies",
}
"""Node label -> the ``NodePoolFacts`` attribute holding its values (``facts.NODE_FACT_LABELS``)."""
_PROPERTIES = tuple(_NODE_LABELS.values())


def _pool_constraints(
    ctx: PodContext, pin: LabelPin | None
) -> tuple[dict[str, Constraint], list[Unknown]]:
    """Per-property constraints from the pinned node pools' facts (union over the pools)."""
    if pin is None or not pin.values:
        return {}, []
    known, unknown = _pool_facts(pin, ctx.cluster.node_pools)
    if not known:
        return {}, unknown
    exhaustive = pin.exhaustive and not unknown
    names = clip_all([f'"{clip(facts.name)}"' for facts in known], limit=2, width=24)
    source = f"node pool {names}"
    out: dict[str, Constraint] = {}
    for prop in _PROPERTIES:
        values = frozenset().union(*(getattr(facts, prop) for facts in known))
        out[prop] = Constraint(values, exhaustive, pin.path, source)
    return out, unknown


def _node_constraints(
    ctx: PodContext, pin: LabelPin | None
) -> tuple[dict[str, Constraint], list[Unknown]]:
    """Per-property constraints from the labels of the nodes a pod is bound to by name (union
    over the nodes); nodes not in ``ClusterState.nodes`` become ``Unknown`` of kind ``node``."""
    if pin is None or not pin.values:
        return {}, []
    values: dict[str, set[str]] = {prop: set() for prop in _PROPERTIES}
    known: list[str] = []
    unknown: list[Unknown] = []
    for name in sorted(pin.values):
        view = ctx.cluster.nodes.get(name)
        if view is None:
            unknown.append(Unknown(pin.path, f'node "{clip(name)}" is not known here', "node"))
            continue
        known.append(name)
        for key, value in view.labels:
            prop = _NODE_LABELS.get(key)
            if prop is not None:
                values[prop].add(value)
    if not known:
        return {}, unknown
    source = "node " + clip_all([f'"{clip(name)}"' for name in known], limit=2, width=24)
    exhaustive = pin.exhaustive and not unknown
    out = {p: Constraint(frozenset(v), exhaustive, pin.path, source) for p, v in values.items()}
    return out, unknown


def _class_constraints(
    ctx: PodContext, pin: LabelPin | None
) -> tuple[dict[str, list[Constraint]], list[Unknown]]:
    """Families, machine types (when every priority names one), MIG and sharing a pinned
    ComputeClass enables; unknown when not resolvable."""
    out: dict[str, list[Constraint]] = {"families": [], "types": [], "mig": [], "sharing": []}
    if pin is None or not pin.values:
        return out, []
    classes = ctx.cluster.compute_classes
    unknown: list[Unknown] = []
    for name in sorted(pin.values):
        facts = None if classes is None else classes.get(name)
        if facts is None:
            why = "ComputeClasses are not known here" if classes is None else "not found"
            unknown.append(Unknown(pin.path, f'ComputeClass "{clip(name)}": {why}', "class"))
            continue
        source = f'ComputeClass "{clip(name)}"'
        if facts.machine_families:
            only = pin.exhaustive and len(pin.values) == 1 and facts.families_known
            out["families"].append(Constraint(facts.machine_families, only, pin.path, source))
        if facts.machine_types:
            out["types"].append(Constraint(facts.machine_types, only, pin.path, source))
        if facts.enables_mig:
            out["mig"].append(Constraint(frozenset(), False, pin.path, source))
        if facts.enables_gpu_sharing:
            out["sharing"].append(Constraint(frozenset(), False, pin.path, source))
    return out, unknown


def _stated(constraint: Constraint | None) -> tuple[Constraint, ...]:
    """Pool-derived MIG/sharing facts count only when the pool actually has such values."""
    return (constraint,) if constraint is not None and constraint.values else ()


def _mig_resources(names: tuple[str, ...], usages: list[ResourceUsage]) -> tuple[Constraint, ...]:
    """One MIG statement per ``nvidia.com/mig-<profile>`` resource a container asks for, at its
    first use (source ``resources``: ``gpu-mig`` tells to request whole GPUs instead)."""
    return tuple(
        Constraint(
            frozenset({name.removeprefix(MIG_RESOURCE_PREFIX)}),
            False,
            u.containers[0].path,
            "resources",
        )
        for name, u in zip(names, usages, strict=True)
        if u.containers
    )


_NO_FACTS: Mapping[str, tuple[Constraint, ...]] = {prop: () for prop in _PROPERTIES}


def describe(ctx: PodContext) -> Placement:
    """Resolve ``ctx``'s node pins and resources into a ``Placement`` (no I/O).

    Computed once per pod view (``ctx.memo``): the machine and GPU rule families both need it,
    and it is the costliest part of validation.
    """
    placement: Placement | None = ctx.memo.get("placement")
    if placement is None:
        placement = ctx.memo["placement"] = _resolve(ctx)
    return placement


def _resolve(ctx: PodContext) -> Placement:
    selection = node_selection(ctx.spec, ctx.spec_path)
    pins = selection.pins
    pool, pool_unknown = _pool_constraints(ctx, pins.get(NODE_POOL))
    node, node_unknown = _node_constraints(ctx, pins.get(NODE_NAME))
    klass, class_unknown = _class_constraints(ctx, pins.get(COMPUTE_CLASS))
    # Per property: what the pinned pools' and nodes' facts state (most pods pin neither).
    facts = _NO_FACTS
    if pool or node:
        facts = {p: (*_stated(pool.get(p)), *_stated(node.get(p))) for p in _PROPERTIES}
    mig = prefixed_resources(ctx.spec, MIG_RESOURCE_PREFIX)
    gpus, tpus, *profiles = resource_usages(
        ctx.spec, ctx.spec_path, (GPU_RESOURCE, TPU_RESOURCE, *mig)
    )
    if profiles:  # MIG by resource name: GPUs (each a partition), denied by gpu-mig
        gpus = merged_usage((gpus, *profiles))
    return Placement(
        pins=pins,
        families=(
            *_from_pin(pins.get(MACHINE_FAMILY)),
            *facts["machine_families"],
            *klass["families"],
        ),
        instance_types=(
            *_from_pin(pins.get(INSTANCE_TYPE)),
            *facts["instance_types"],
            *klass["types"],
        ),
        accelerators=(*_from_pin(pins.get(ACCELERATOR)), *facts["accelerators"]),
        accelerator_counts=(
            *_from_pin(pins.get(ACCELERATOR_COUNT)),
            *facts["accelerator_counts"],
        ),
        partition_sizes=(
            *_from_pin(pins.get(PARTITION_SIZE)),
            *facts["partition_sizes"],
            *klass["mig"],
            *_mig_resources(mig, profiles),
        ),
        sharing=(
            *_from_pin(pins.get(SHARING_STRATEGY)),
            *_from_pin(pins.get(MAX_SHARED_CLIENTS)),
            *facts["sharing_strategies"],
            *klass["sharing"],
        ),
        term_families=_term_families(selection, ctx.settings.rules),
        unknown=(*pool_unknown, *node_unknown, *class_unknown),
        gpus=gpus,
        tpus=tpus,
        selection=selection,
    )
