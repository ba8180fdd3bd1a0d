"""GPU rules: ``gpu-machine``, ``gpu-multi-l4``, ``gpu-whole-node``, ``gpu-mig``, ``gpu-sharing``,
``gpu-driver`` (``rules/gpu_driver.py``).

Facts (GKE "About GKE Pod snapshots", docs/gke-facts.md#section-4): GPU snapshots work on the
supported GPU machine types: the documented list (``settings.rules.gpu_machine_types``) and the
set-ups validated in the field (``rules.validated_gpu_machine_types``: ``g4-standard-48`` with
``nvidia-rtx-pro-6000``, Google's reference architecture, docs/gke-facts.md#section-9). A type,
family or accelerator on neither list is ``rules.unlisted_gpu_severity`` (warn; deny configurable),
and the message says it is on no list (a pod pinning only its accelerator or
family may land on other types of that series: ``rules/landing.py``, a warning, or a denial
when its pins leave no supported type); more than one GPU per pod only on L4;
before GKE 1.35.0-gke.1738000 a pod on a multi-GPU node had to use all of its GPUs (so every
rule's suggestion then says how many GPUs to request: ``_offer``; the rule itself is
``rules/gpu_whole_node.py``); MIG is not
supported; time-sharing and MPS are not named (unconfirmed: warn). All of them are whole-pod
restrictions, relaxed for ``rootfs-only`` policies. Only pods that use GPUs are judged.
Messages fit the API server's 256-character warning line with their fix (``placement.fit``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence

from webhook.base.sections import RuleSettings
from webhook.base.text import clip, clip_all
from webhook.base.types import Finding
from webhook.kube.gke import ACCELERATOR, INSTANCE_TYPE, MACHINE_FAMILY, instance_family
from webhook.pod.context import PodContext
from webhook.rules.constraints import POD_SOURCES, Constraint, fit, possible
from webhook.rules.gpu_driver import driver_findings
from webhook.rules.gpu_sharing import mig_findings, sharing_findings
from webhook.rules.gpu_whole_node import subset_allowed, whole_node_findings
from webhook.rules.landing import GPU_MACHINE_TYPES, landing
from webhook.rules.placement import Placement, describe
from webhook.rules.tables import gpu_tables


def _type_summary(types: Iterable[str], limit: int = 12) -> str:
    """Exact machine types for a message, compact: three or more sharing a shape prefix read
    ``g2-standard-{4,8,12}`` (each one named, so no rejected type hides behind a wildcard); at
    most ``limit`` types (clipped), then ``+N more``."""
    return _summary(tuple(types), limit)


@functools.lru_cache(maxsize=256)
def _summary(names: tuple[str, ...], limit: int) -> str:
    groups: dict[str, list[str]] = {}
    for name in names[:limit]:
        prefix, dash, _ = name.rpartition("-")
        groups.setdefault(prefix if dash else name, []).append(name)
    parts: list[str] = []
    for prefix, group in groups.items():
        if len(group) >= 3:
            sizes = ",".join(clip(name.rpartition("-")[2], 8) for name in group)
            parts.append(f"{clip(prefix)}-{{{sizes}}}")
        else:
            parts.extend(clip(name) for name in group)
    more = len(names) - limit
    if more > 0:
        return ", ".join(parts) + f" +{more} more"
    return " or ".join([", ".join(parts[:-1]), parts[-1]]) if len(parts) > 1 else "".join(parts)


def _offer(types: Sequence[tuple[str, int]], gpus: int, exact: bool, short: bool = False) -> str:
    """Supported machine types to use, from ``(type, GPUs)`` pairs, as message text.

    Before GKE ``rules.gpu_subset_min_version`` (``exact``) a pod must take all GPUs of its node
    (``gpu-whole-node``), so the offer is the types with exactly ``gpus`` GPUs when there are
    any, else each type with the count to request: ``g2-standard-48 (request all 4 GPUs) or
    g2-standard-96 (all 8)``. ``short``: the first type only (still a complete fix). When no
    type has ``gpus`` GPUs, all of ``types`` (``gpu-multi-l4`` says how many fit).
    """
    fits = [(t, n) for t, n in types if n >= gpus]
    whole = [(t, n) for t, n in fits if n == gpus]
    if exact and whole:
        fits = whole
    if not fits or not exact or whole:
        names = [t for t, _ in (fits or types)]
        return _type_summary(names[:1] if short else names)
    counts: dict[int, list[str]] = {}
    for name, count in sorted(fits, key=lambda item: item[1]):
        counts.setdefault(count, []).append(name)
    groups = list(counts.items())
    parts: list[str] = []
    for n, names in groups[:1] if short else groups:
        shown = _type_summary(names[:1] if short else names, 4)
        parts.append(f"{shown} (all {n})" if parts else f"{shown} (request all {n} GPUs)")
    return " or ".join([", ".join(parts[:-1]), parts[-1]]) if len(parts) > 1 else parts[0]


def _alternatives(rules: RuleSettings, machine_type: str, gpus: int) -> list[tuple[str, int]]:
    """Supported ``(type, GPUs)`` to use instead of ``machine_type``: of its family when it has
    any with enough GPUs, else of any family with enough GPUs, else all of them."""
    counts = gpu_tables(rules).counts
    enough = [(t, n) for t, n in counts.items() if n >= gpus]
    family = instance_family(machine_type)
    same = [(t, n) for t, n in enough if instance_family(t) == family]
    return same or enough or list(counts.items())


def _unsupported_type(c: Constraint, name: str, ctx: PodContext, gpus: int) -> Finding:
    """``gpu-machine`` for one pinned machine type that has no GPU snapshots."""
    types, exact = _alternatives(ctx.settings.rules, name, gpus), not subset_allowed(ctx)
    problem, path = f"no GPU snapshots on {clip(name)} (on neither list)", c.path_of(name)
    use, short = _offer(types, gpus, exact), _offer(types, gpus, exact, short=True)
    text = fit(
        "gpu-machine",
        path,
        f"{problem}{c.where}; use {use}",
        f"{problem}; use {use}",
        f"{problem}; use {short}",
        f"use {short}",
    )
    return Finding(path, "gpu-machine", text, ctx.settings.rules.unlisted_gpu_severity)


def machine_findings(ctx: PodContext, place: Placement) -> Iterator[Finding]:
    """``gpu-machine``: every machine type, family and accelerator a GPU pod may land on must be
    a supported one."""
    tables, gpus = gpu_tables(ctx.settings.rules), place.gpus.total
    severity = ctx.settings.rules.unlisted_gpu_severity
    for c in place.instance_types:
        for name in sorted(c.values - tables.machine_types):
            yield _unsupported_type(c, name, ctx, gpus)
    checks = (
        (place.families, tables.families, "family ", tables.families_text),
        (place.accelerators, tables.accelerators, "", tables.accelerators_text),
    )
    for constraints, accepted, kind, accept in checks:
        for c in constraints:
            for name in sorted(c.values - accepted):
                problem = f"no GPU snapshots on {kind}{clip(name)} (on neither list)"
                path = c.path_of(name)
                text = fit(
                    "gpu-machine",
                    path,
                    f"{problem}{c.where}; use {accept}",
                    f"{problem}; use {accept}",
                    f"use {accept}",
                )
                yield Finding(path, "gpu-machine", text, severity)


def landing_findings(ctx: PodContext, place: Placement) -> Iterator[Finding]:
    """``gpu-machine``: a pod pinned by accelerator or family, not machine type, that may land
    on a machine type snapshots do not support (``g2-standard-24``, ``a3-highgpu-8g``...): a
    warning; when it can land on no supported type (e.g. ``gke-accelerator-count: "8"`` with
    H100), a denial like pinning such a type."""
    if place.partition_sizes:
        return  # a MIG pod is denied by gpu-mig; no machine type would make it snapshot-ready
    found = landing(ctx, place)
    if found is None:
        return
    gpus, exact = place.gpus.total, not subset_allowed(ctx)
    where = ""
    if found.pools:
        where = " in node pool " + clip_all([f'"{clip(n)}"' for n in found.pools], limit=2)
    lead, brief = ("can only land on", "only on") if found.only else ("may also land on", "also on")
    many, few = _type_summary(found.unsupported, 8), _type_summary(found.unsupported, 1)
    pin = f"{'drop the count pin; ' if found.drop_count else ''}pin {INSTANCE_TYPE}: "
    fix = pin + _offer(found.supported, gpus, exact)
    short = pin + _offer(found.supported, gpus, exact, short=True)
    path = found.pin.path
    text = fit(
        "gpu-machine",
        path,
        f"{lead} {many}{where} (no GPU snapshots there); {fix}",
        f"{lead} {few}{where} (no GPU snapshots there); {fix}",
        f"{brief} {many} (unsupported); {fix}",
        f"{brief} {few} (unsupported); {fix}",
        f"{fix}, not {few}",
        fix,
        short,
    )
    severity = ctx.settings.rules.unlisted_gpu_severity if found.only else "warn"
    yield Finding(path, "gpu-machine", text, severity)


def _multi_counts(rules: RuleSettings) -> tuple[tuple[str, int], ...]:
    """``(machine type, GPUs)`` of the multi-GPU accelerators' families, fewest GPUs first."""
    return gpu_tables(rules).multi_counts


def _carried(place: Placement) -> tuple[frozenset[str] | None, frozenset[str] | None]:
    """``(accelerators, families)`` the nodes of the pod's pinned instance types carry (Compute
    Engine "GPU machine types": ``landing.GPU_MACHINE_TYPES``); None for what they do not tell
    (no instance-type pin; a type outside the catalog says nothing of its accelerator)."""
    types = possible(place.instance_types)
    if not types:
        return None, None
    families = frozenset(instance_family(t) for t in types)
    if not all(t in GPU_MACHINE_TYPES for t in types):
        return None, families
    return frozenset(GPU_MACHINE_TYPES[t][0] for t in types), families


def _reachable(values: frozenset[str], carried: frozenset[str] | None) -> frozenset[str]:
    """The ``values`` the pod's instance-type pin leaves it (pins are ANDed: an accelerator no
    pinned type carries is never reached); all of them when the pins contradict each other,
    since then each pin is a candidate for the fix."""
    return (values & carried if carried is not None else values) or values


def _swap(
    c: Constraint, name: str, key: str, to: str, *, gpus: int, offers: tuple[str, str]
) -> str:
    """``gpu-multi-l4`` text for a one-GPU accelerator or family: replace that pin (naming it)
    by the multi-GPU one and pin a type with enough GPUs; keeping it while pinning the type
    would contradict it. A pool's or class's statement is fixed by pinning the type alone."""
    (accept, short), one = offers, f"allows 1 GPU per snapshot pod, not {clip(gpus)}"
    path, name, pin = c.path_of(name), clip(name), f"pin {INSTANCE_TYPE}"
    if c.source not in POD_SOURCES:
        return fit(
            "gpu-multi-l4",
            path,
            f"{name}{c.where} {one}; {pin}: {accept}",
            f"{name} {one}; {pin}: {short}",
            f"{pin}: {short}",
        )
    return fit(
        "gpu-multi-l4",
        path,
        f"{name} {one}; replace {key}: {name} with {to} and {pin}: {accept}",
        f"{name} allows 1 GPU/pod; replace {key}: {name} with {to}, {pin}: {accept}",
        f"{name} {one}; replace {key}: {name} with {to}, {pin}: {short}",
        f"{name} {one}; replace it with {to}, {pin}: {accept}",
        f"{name} {one}; replace it with {to}, {pin}: {short}",
        f"replace {name} with {to}; {pin}: {short}",
        f"replace {name} with {to}; pin {short}",
    )


def multi_findings(ctx: PodContext, place: Placement) -> Iterator[Finding]:
    """``gpu-multi-l4``: a pod with more than one GPU must be pinned to L4 machines that have
    enough GPUs (``g2-standard-48``/``-96``). Values already unsupported are left to gpu-machine,
    but for a machine type of a family without multi-GPU support (``a3-highgpu-2g``: the same
    hardware pinned by ``gke-accelerator`` is denied too); accelerators and families the pod's
    instance-type pin rules out are not judged."""
    rules, tables, gpus = ctx.settings.rules, gpu_tables(ctx.settings.rules), place.gpus.total
    types = [(t, n) for t, n in tables.multi_counts if n >= gpus]
    first = place.gpus.containers[0].path
    if not types:
        text = f"no supported machine has {clip(gpus)} GPUs; use at most {_max_gpus(rules)} per pod"
        yield Finding(first, "gpu-multi-l4", text)
        return
    offers: list[str] = []

    def offer() -> tuple[str, str]:
        """The machine types to suggest (long and short), built only for a finding."""
        if not offers:
            exact = not subset_allowed(ctx)
            offers.extend((_offer(types, gpus, exact), _offer(types, gpus, exact, short=True)))
        return offers[0], offers[1]

    accelerators, families = _carried(place)
    swaps = (
        (place.accelerators, ACCELERATOR, accelerators, rules.multi_gpu_accelerators),
        (place.families, MACHINE_FAMILY, families, sorted(tables.multi_families)),
    )
    singles = (tables.single_accelerators, tables.single_families)
    for (constraints, key, carried, to), unfit in zip(swaps, singles, strict=True):
        for c in constraints:
            for name in sorted(_reachable(c.values, carried) & unfit):
                text = _swap(c, name, key, " or ".join(to), gpus=gpus, offers=offer())
                yield Finding(c.path_of(name), "gpu-multi-l4", text)
    fits = {t for t, _ in types}
    for c in place.instance_types:
        for name in sorted(c.values - fits):
            problem = _unfit(name, tables.machine_types, tables.single_families)
            if problem is None:
                continue
            accept, short = offer()
            text = fit(
                "gpu-multi-l4",
                c.path_of(name),
                f"{clip(name)}{c.where} {problem}; use {accept}",
                f"{clip(name)} {problem}; use {accept}",
                f"{clip(name)} {problem}; use {short}",
                f"use {short}",
            )
            yield Finding(c.path_of(name), "gpu-multi-l4", text)
    stated = (*place.accelerators, *place.instance_types, *place.families)
    if not any(c.exhaustive for c in stated) and not place.unknown:
        accept, short = offer()
        text = fit(
            "gpu-multi-l4",
            first,
            f"a {clip(gpus)}-GPU pod needs L4: pin {INSTANCE_TYPE}: {accept}",
            f"a {clip(gpus)}-GPU pod needs L4: pin {INSTANCE_TYPE}: {short}",
        )
        yield Finding(first, "gpu-multi-l4", text)


def _unfit(name: str, listed: frozenset[str], singles: frozenset[str]) -> str | None:
    """Why a multi-GPU pod cannot run on machine type ``name`` (not one that ``fits``): a listed
    type has too few GPUs; an unlisted one of a family whose accelerators allow one GPU per pod
    (``a3-highgpu-2g``: H100; multi-GPU H100 failed to checkpoint, docs/gke-facts.md#section-9)
    is not L4, whatever its GPU count; None for any other unlisted type (``gpu-machine``)."""
    if name in listed:
        return "has too few GPUs"
    family = instance_family(name)
    return f"is {family}: more than 1 GPU per pod needs L4" if family in singles else None


def _max_gpus(rules: RuleSettings) -> int:
    """The most GPUs one supported multi-GPU machine type has (8 on ``g2-standard-96``)."""
    return max((n for _, n in _multi_counts(rules)), default=1)


class GpuRules:
    """The GPU rules over one shared ``Placement``; malformed GPU quantities are always reported
    (as ``gpu-machine`` warnings: the API server rejects them anyway)."""

    rule_ids: tuple[str, ...] = (
        "gpu-machine",
        "gpu-multi-l4",
        "gpu-whole-node",
        "gpu-mig",
        "gpu-sharing",
        "gpu-driver",
    )

    def __call__(self, pod: PodContext) -> Iterable[Finding]:
        """All GPU findings of a pod that uses GPUs; only quantity problems for rootfs-only."""
        place = describe(pod)
        found = [Finding(path, "gpu-machine", text, "warn") for path, text in place.gpus.problems]
        if pod.rootfs_only or place.gpus.total == 0:
            return found
        found += machine_findings(pod, place)
        found += landing_findings(pod, place)
        if place.gpus.total > 1:
            found += multi_findings(pod, place)
        found += whole_node_findings(pod, place)
        found += mig_findings(place)
        found += sharing_findings(pod, place)
        found += driver_findings(pod, place)
        return found
