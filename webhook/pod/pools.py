"""The node pools a pod can land on, by its exhaustive pins: what the restore prediction and
``gpu-driver`` compare node versions and GPU drivers against, and ``machine_reasons``: whether
the pod can land on the machine series and CPU architecture a snapshot was taken on. Pure module
(one bounded memo).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import NamedTuple

from webhook.base.text import clip
from webhook.kube.gke import (
    ACCELERATOR,
    ACCELERATOR_FAMILIES,
    ARCHITECTURE,
    COMPUTE_CLASS,
    INSTANCE_TYPE,
    MACHINE_FAMILY,
    NODE_POOL,
    SANDBOX_RUNTIME,
    instance_family,
)
from webhook.pod.node_pins import NodeSelection
from webhook.pod.tolerations import GPU_TOLERATION, Toleration, tolerated
from webhook.pod.virtual_node import CPU_ONLY_SERIES, admits, pool_domains, series_domains
from webhook.snapshots.state import ComputeClassFacts, NodePoolFacts, Taint

_LANDING_PINS = (
    NODE_POOL, MACHINE_FAMILY, INSTANCE_TYPE, ARCHITECTURE, ACCELERATOR, SANDBOX_RUNTIME
)  # fmt: skip
Landing = tuple[frozenset[str] | None, ...]
"""The values of a pod's exhaustive pool, family, instance-type, architecture, accelerator and
GKE Sandbox pins, in ``_LANDING_PINS`` order (None: no such exhaustive pin), then ``{"gpu"}``
when it asks for GPUs (else None)."""
_GPU = frozenset({"gpu"})  # one object: its hash is computed once
LANDING_MEMO_SIZE = 64
"""Pin sets whose landing pools are remembered per node-pool map (pods pin few distinct ones)."""
LANDING_MAX_CHARS = 1024
"""Characters of pin values a remembered pin set holds at most (real ones: a few names of up
to 63 characters; admission runs before the API server validates the pod)."""
_LANDING: list[tuple[Mapping[str, NodePoolFacts], dict[Hashable, tuple[NodePoolFacts, ...]]]] = []
"""The last node-pool map seen and, per pin set (``Landing``), affinity terms and tolerations,
the pools a pod with those can land on. The cluster state replaces that map on a change and
never edits it, so identity is enough: 20 pools cost a pinned pod ~30 us per admission before
(``make bench-scale --profile``: ``landing_pools`` was the top frame of its own at scale)."""


def landing_pools(
    selection: NodeSelection,
    pools: Mapping[str, NodePoolFacts],
    *,
    gpu: bool = False,
    tolerations: tuple[Toleration, ...] | None = None,
) -> list[NodePoolFacts]:
    """Known node pools the pod can be scheduled on, judged by its exhaustive pins, the
    affinity terms read one by one (``virtual_node.admits``), and (``tolerations`` given) the
    pools' taints.

    A pod without an exhaustive pool, family, instance-type, architecture, accelerator or
    GKE Sandbox pin can land on every pool with nodes. A pool whose nodes lack a label counts
    as unknown for that pin (kept), but for the accelerator and ``sandbox.gke.io/runtime``: a
    pool without GPUs has no ``cloud.google.com/gke-accelerator`` label to match, and GKE
    labels every Sandbox node (a pod of the ``gvisor`` RuntimeClass pins it: the RuntimeClass
    admission plugin merges the class's ``scheduling.nodeSelector`` into the pod before
    webhooks run). ``gpu``: the pod asks for ``nvidia.com/gpu``, which only pools with GPUs
    offer (none running: no pool is known, so a GPU pool scaled to zero is never judged by the
    CPU pools beside it). ``tolerations``: the pod's (``pod.tolerations``); a pool with a
    ``NoSchedule``/``NoExecute`` taint on every node the pod does not tolerate is left out
    (None: taints not judged). A pod asking for GPUs tolerates ``nvidia.com/gpu``, written or
    not: GKE schedules such pods onto its tainted GPU pools, and a captured GKE pod (review 03
    of ../shared/data) reaches the webhook without that toleration; one selecting a
    ComputeClass tolerates its taint (``_implied_tolerations``). The answer is computed once per
    node-pool map, set of exhaustive pins, ``gpu``, affinity terms and tolerations
    (``_LANDING``), not per admission (a review measured 23 us at 20 pools, 156 us at 100, per
    call before).
    """
    wanted: Landing = tuple(
        pin.values if pin is not None and pin.exhaustive else None
        for pin in (selection.pins.get(key) for key in _LANDING_PINS)
    )
    cached = _LANDING[0] if _LANDING else None
    if cached is None or cached[0] is not pools:
        cached = (pools, {})
        _LANDING[:] = [cached]
    known = cached[1]
    if tolerations is not None:
        tolerations = (*tolerations, *_implied_tolerations(selection, gpu))
    pins: Landing = (*wanted, _GPU if gpu else None)
    key = (pins, selection.requirements, tolerations)
    found = known.get(key)
    if found is None:
        found = _landing(pins, pools)
        if selection.requirements:  # each term, as the scheduler reads it (``virtual_node``)
            found = tuple(f for f in found if admits(selection, pool_domains(f)))
        if tolerations is not None:
            verdicts: dict[frozenset[Taint], bool] = {}  # pools share a few taint sets
            found = tuple(
                f
                for f in found
                if not f.taints or verdicts.setdefault(f.taints, tolerated(f.taints, tolerations))
            )
        if _size(wanted, selection, tolerations) <= LANDING_MAX_CHARS:
            if len(known) >= LANDING_MEMO_SIZE:
                known.clear()
            known[key] = found  # a tenant's huge selections are answered but not kept
    return list(found)


def _implied_tolerations(selection: NodeSelection, gpu: bool) -> tuple[Toleration, ...]:
    """Tolerations GKE gives a pod beside those it wrote: ``nvidia.com/gpu`` when it asks for
    GPUs (``GPU_TOLERATION``), and a ComputeClass's taint when it selects the class (GKE taints
    the nodes a ComputeClass makes ``cloud.google.com/compute-class=<name>:NoSchedule`` and
    tolerates it on the pods that select it; they may reach this webhook first)."""
    implied = [GPU_TOLERATION] if gpu else []
    pin = selection.pins.get(COMPUTE_CLASS)
    for name in sorted(pin.values) if pin is not None else ():
        implied.append(Toleration(COMPUTE_CLASS, "Equal", name, ""))
    return tuple(implied)


def _size(wanted: Landing, selection: NodeSelection, tolerations: object) -> int:
    """What a memo entry holds, in characters and values (``LANDING_MAX_CHARS``)."""
    pins = sum(len(value) for values in wanted if values for value in values)
    terms = sum(len(rule.values) + 1 for term in selection.requirements for rule in term)
    return pins + terms * 16 + (len(tolerations) * 32 if isinstance(tolerations, tuple) else 0)


def _landing(wanted: Landing, pools: Mapping[str, NodePoolFacts]) -> tuple[NodePoolFacts, ...]:
    """``landing_pools`` computed: the pools with nodes whose known facts meet every pin."""
    out = []
    for facts in pools.values():
        if facts.node_count == 0:
            continue
        known = (
            frozenset({facts.name}),
            facts.machine_families,
            facts.instance_types,
            facts.architectures,
        )
        accelerators, sandboxes, gpu = wanted[-3], wanted[-2], wanted[-1]
        if accelerators is not None and not accelerators & facts.accelerators:
            continue
        if sandboxes is not None and not sandboxes & facts.sandboxes:
            continue
        if gpu is not None and not facts.accelerators:
            continue
        if all(
            pinned is None or not values or pinned & values
            for pinned, values in zip(wanted, known, strict=False)  # the first four pins
        ):
            out.append(facts)
    return tuple(sorted(out, key=lambda f: f.name))


def pinned_families(selection: NodeSelection) -> frozenset[str] | None:
    """Machine families the pins allow, None if unpinned: the family pin, else the instance-type
    pin's families, else the families that carry the pinned accelerators
    (``kube.gke.ACCELERATOR_FAMILIES``; None when one is not listed there)."""
    return _pinned(selection)[0]


def _pinned(selection: NodeSelection) -> tuple[frozenset[str] | None, str]:
    """``pinned_families`` and, for an accelerator pin, how it is said (`` by accelerator x``)."""
    family = selection.pins.get(MACHINE_FAMILY)
    if family is not None and family.exhaustive:
        return family.values, ""
    types = selection.pins.get(INSTANCE_TYPE)
    if types is not None and types.exhaustive:
        return frozenset(instance_family(t) for t in types.values), ""
    accelerators = selection.pins.get(ACCELERATOR)
    if accelerators is None or not accelerators.exhaustive or not accelerators.values:
        return None, ""
    if not all(a in ACCELERATOR_FAMILIES for a in accelerators.values):
        return None, ""
    names = "/".join(clip(a, 63) for a in sorted(accelerators.values)[:2])
    return (
        frozenset().union(*(ACCELERATOR_FAMILIES[a] for a in accelerators.values)),
        f" by accelerator {names}",
    )


def class_families(
    selection: NodeSelection, classes: Mapping[str, ComputeClassFacts] | None
) -> tuple[str, frozenset[str]] | None:
    """``(names, families)`` of the ComputeClass(es) the pod is pinned to, when each is known
    and every priority of each names its machine family (``machineFamily``/``machineType``:
    ``ComputeClassFacts.families_known``); None otherwise (not known: not guessed)."""
    pin = selection.pins.get(COMPUTE_CLASS)
    if pin is None or not pin.exhaustive or not pin.values or classes is None:
        return None
    families: set[str] = set()
    for name in pin.values:
        facts = classes.get(name)
        if facts is None or not facts.families_known or not facts.machine_families:
            return None
        families |= facts.machine_families
    return ", ".join(clip(name, 63) for name in sorted(pin.values)), frozenset(families)


def pools_text(pools: Iterable[NodePoolFacts], attribute: str) -> str:
    """``node pool <name> runs <values>`` for the first two of ``pools``."""
    parts = []
    for facts in list(pools)[:2]:
        values: frozenset[str] = getattr(facts, attribute)
        parts.append(f"node pool {facts.name} runs {'/'.join(sorted(values))}")
    return "; ".join(parts)


class MachineFit(NamedTuple):
    """Where a pod can land, as the restore comparison needs it (``machine_fit``): the machine
    families and CPU architectures (None: not known), how each is said (built only for a
    reason), and, for a pod with a nodeSelector or affinity terms, why a node of a given series
    and architecture cannot meet them (``series_reason``)."""

    families: frozenset[str] | None
    archs: frozenset[str] | None
    said: Callable[[str], str]
    series_reason: Callable[[str, str | None], str | None] | None = None


def machine_fit(
    selection: NodeSelection,
    landing: list[NodePoolFacts],
    classes: Mapping[str, ComputeClassFacts] | None,
    pools: Mapping[str, NodePoolFacts] | None = None,
    *,
    gpu: bool = False,
) -> MachineFit:
    """The machine families and CPU architectures a pod with ``selection`` can land on, once
    per prediction (each origin compared then costs two lookups: ``machine_reasons``).

    The family is judged by the first that says something: the pod's family, instance-type or
    accelerator pins (``pinned_families``: an accelerator names its family even while every
    node pool with it is scaled to zero); the ComputeClass it is pinned to; else, for a pod
    pinned to a pool or an accelerator, the families of the pools it can land on (``landing``,
    pools whose nodes carry no family label left out). The architecture by its
    ``kubernetes.io/arch`` pin, else (pinned pods) the landing pools'. Past those, a node of
    the snapshot's series and architecture must meet the nodeSelector and one affinity term
    read as the scheduler does (``virtual_node``, with ``pools`` and ``gpu``: a pod asking for
    GPUs needs a series with GPUs).
    """
    narrowed = _narrowed(selection)
    pinned, by_accelerator = _pinned(selection)
    made = class_families(selection, classes) if pinned is None else None
    by_pools = [p for p in landing if p.machine_families] if narrowed else []
    families = pinned
    if families is None:
        families = made[1] if made is not None else _union(by_pools, "machine_families")
    pin = selection.pins.get(ARCHITECTURE)
    arch_pinned = pin is not None and pin.exhaustive
    arch_pools = [p for p in landing if p.architectures] if narrowed and not arch_pinned else []
    archs = pin.values if pin is not None and arch_pinned else _union(arch_pools, "architectures")

    def said(what: str) -> str:
        if what == "arch":
            shown = "/".join(sorted(archs or ()))
            return (
                f"pinned to arch {shown}"
                if arch_pinned
                else f"lands on arch {shown} ({_names(arch_pools)})"
            )
        shown = "/".join(sorted(families or ()))
        if pinned is not None:
            return f"pinned to {shown}{by_accelerator}"
        if made is not None:
            return f"ComputeClass {made[0]} makes {shown}"
        return f"lands on machine family {shown} ({_names(by_pools)})"

    if not (selection.selector or selection.requirements or gpu):
        return MachineFit(families, archs, said)
    known = {} if pools is None else pools
    answers: dict[tuple[str, str | None], str | None] = {}

    def series_reason(family: str, arch: str | None) -> str | None:
        key = (family, arch)
        if key not in answers:
            answers[key] = _series_reason(selection, family, arch, known, gpu)
        return answers[key]

    return MachineFit(families, archs, said, series_reason)


def _series_reason(
    selection: NodeSelection,
    family: str,
    arch: str | None,
    pools: Mapping[str, NodePoolFacts],
    gpu: bool,
) -> str | None:
    """Why no node of ``family`` and ``arch`` meets the pod's node selection, or None."""
    if gpu and family in CPU_ONLY_SERIES:
        return f"asks for GPUs, which machine family {family} has none of, snapshot taken there"
    if not admits(selection, series_domains(family, None, pools, gpu=gpu)):
        return f"node selection rules out machine family {family}, snapshot taken there"
    if arch and not admits(selection, series_domains(family, arch, pools, gpu=gpu)):
        return f"node selection rules out arch {arch} on {family}, snapshot taken there"
    return None


def _union(pools: list[NodePoolFacts], attribute: str) -> frozenset[str] | None:
    """The union of ``attribute`` over ``pools``; None when there are none (not known)."""
    if not pools:
        return None
    return frozenset().union(*(getattr(p, attribute) for p in pools))


def machine_reasons(fit: MachineFit, node: Mapping[str, str | None]) -> list[str]:
    """Why a pod that fits ``fit`` cannot restore a snapshot taken on ``node`` (an origin
    record's node facts: ``family``, ``arch``) for its machine: GKE restores only onto the
    same machine series and CPU architecture (N2 to N2, G2 to G2; docs/gke-facts.md#section-3).
    Nothing known: no reason. Reasons begin ``pinned to``, ``ComputeClass``, ``lands on
    machine family``, ``node selection rules out machine family``, ``asks for GPUs`` or their
    ``arch`` forms (``cli.explain.hints.node_kind`` reads them).
    """
    reasons = []
    family, arch = node.get("family"), node.get("arch")
    if family and fit.families is not None and family not in fit.families:
        reasons.append(f"{fit.said('family')}, snapshot taken on {family}")
    if arch and fit.archs is not None and arch not in fit.archs:
        reasons.append(f"{fit.said('arch')}, snapshot on {arch}")
    if not reasons and family and fit.series_reason is not None:
        found = fit.series_reason(family, arch)
        if found is not None:
            reasons.append(found)
    return reasons


def _names(pools: list[NodePoolFacts]) -> str:
    """``node pool a, b`` (two named, ``+N`` more)."""
    more = f" +{len(pools) - 2}" if len(pools) > 2 else ""
    return "node pool " + ", ".join(p.name for p in pools[:2]) + more


_NARROWING = (NODE_POOL, ACCELERATOR, MACHINE_FAMILY, INSTANCE_TYPE)


def _narrowed(selection: NodeSelection) -> bool:
    """Whether an exhaustive pool, accelerator, family or instance-type pin narrows where the
    pod lands. An unpinned pod's landing pools are only the pools that have nodes now: a GPU
    pool scaled to zero, or one node auto-provisioning would create, is not among them, and the
    pod may well land there (a scale-from-zero inference pod does), so they say nothing of its
    machine."""
    return any(
        pin is not None and pin.exhaustive
        for pin in (selection.pins.get(key) for key in _NARROWING)
    )
