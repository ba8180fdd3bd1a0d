"""``gpu-whole-node``: before GKE ``rules.gpu_subset_min_version`` a pod on a multi-GPU node must
use all of the node's GPUs (docs/gke-facts.md#section-4: up to GKE 1.35.0-gke.1738000; from then on
a subset is allowed). The cluster version comes from ``rules.gke_version`` or the cluster's
``/version`` (``snapready check --gke-version``); unknown means a GA version of Pod snapshots
(1.35.3-gke.1234000 or later, docs/gke-facts.md#section-4: every GA version allows a subset), so the
rule only fires on a known version earlier than the gate. Split from
``rules/gpu.py``, which runs it (``GpuRules``) and uses ``subset_allowed`` for its suggestions.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from webhook.base.sections import GKE_VERSION_PATTERN, RuleSettings
from webhook.base.text import clip, clip_all
from webhook.base.types import Finding
from webhook.kube.gke import instance_family
from webhook.pod.context import PodContext
from webhook.rules.constraints import POD_SOURCES, Constraint, fit, possible
from webhook.rules.landing import affinity_admits, gpu_count
from webhook.rules.placement import Placement, family_constraints
from webhook.rules.tables import gpu_tables

GkeVersion = tuple[int, int, int, int]


_COUNT = re.compile(r"[0-9]{1,4}")


@functools.lru_cache(maxsize=64)
def parse_gke_version(text: str | None) -> GkeVersion | None:
    """``1.35.0-gke.1738000`` -> ``(1, 35, 0, 1738000)``; a leading ``v`` is allowed and a missing
    ``-gke.N`` counts as 0. None for None or text that is not a version."""
    match = re.match(GKE_VERSION_PATTERN, text or "")
    if match is None:
        return None
    major, minor, patch, build = match.groups()
    return int(major), int(minor), int(patch), int(build or 0)


def _node_counts(place: Placement, rules: RuleSettings) -> Iterator[tuple[Constraint, int, str]]:
    """GPU counts of the nodes the pod is pinned to: ``(constraint, count, node description)``,
    one per count (a node's instance type and its ``gke-accelerator-count`` are one cause;
    the instance type names it best). A count no supported type of the pod's pinned families
    has (2 on G2) is skipped: those nodes are unsupported, which ``gpu-machine`` reports, so
    requesting all their GPUs would not help."""
    seen: set[int] = set()
    for c in place.instance_types:
        for name in sorted(c.values):
            count = gpu_tables(rules).counts.get(name)
            if count is not None and count not in seen:
                seen.add(count)
                yield c, count, name
    families = possible(family_constraints(place, rules))
    table = gpu_tables(rules).counts
    carried = {n for t, n in table.items() if families is None or instance_family(t) in families}
    for c in place.accelerator_counts:
        for value in sorted(c.values):
            # ASCII digits, bounded: isdigit() also accepts "²", and int() refuses 4300+ digits.
            if not _COUNT.fullmatch(value) or int(value) in seen:
                continue
            if families is None or int(value) in carried:
                seen.add(int(value))
                yield c, int(value), f"a {value}-GPU node"


def _candidate_counts(place: Placement, rules: RuleSettings) -> set[int]:
    """GPU counts of every supported machine type the pod may land on: in its families (all of
    them when it pins no family, accelerator or instance type; none when it pins only an
    unsupported accelerator, which ``gpu-machine`` reports) and admitted by its affinity
    terms' exclusions (``gke-accelerator-count Lt 2`` rules out 4- and 8-GPU nodes)."""
    families = possible(family_constraints(place, rules))
    if families is None and any(c.exhaustive for c in place.accelerators):
        return set()
    table = gpu_tables(rules).counts
    return {
        table[name]
        for name in affinity_admits(place.selection, table)
        if families is None or instance_family(name) in families
    }


def subset_allowed(ctx: PodContext) -> bool:
    """Whether the cluster runs GKE ``rules.gpu_subset_min_version`` or later (a pod may use a
    subset of a multi-GPU node's GPUs); True when the version is unknown: Pod snapshots are GA
    from 1.35.3-gke.1234000, later than the gate (docs/rules/index.md)."""
    rules = ctx.settings.rules
    version = parse_gke_version(rules.gke_version or ctx.cluster.gke_version)
    gate = parse_gke_version(rules.gpu_subset_min_version)
    return version is None or version >= (gate or version)


def whole_node_findings(ctx: PodContext, place: Placement) -> Iterator[Finding]:
    """``gpu-whole-node``: before GKE ``rules.gpu_subset_min_version`` a pod on a multi-GPU node
    must use all the node's GPUs. Only on a known version (``rules.gke_version``, ``--gke-version``
    or the cluster's ``/version``) earlier than the gate; the message names where it came from."""
    rules, gpus = ctx.settings.rules, place.gpus.total
    if subset_allowed(ctx):
        return
    gate = rules.gpu_subset_min_version
    source = "rules.gke_version/--gke-version" if rules.gke_version else "cluster /version"
    hint = f" (GKE {clip(rules.gke_version or ctx.cluster.gke_version)} from {source})"
    # A pod bound to a node we do not know (a DaemonSet pod) was judged on its template.
    named = any(u.kind == "node" for u in place.unknown)
    pinned = named or any(c.exhaustive for c in (*place.instance_types, *place.accelerator_counts))
    for c, count, node in _node_counts(place, rules):
        if count > gpus:
            drop, only = _drop(c, node, count, rules)
            rest = f"; before GKE {gate} a pod needs all: request {count}{drop}{hint}"
            path = c.path_of(node)
            text = fit(
                "gpu-whole-node",
                path,
                f"{node} has {count} GPUs{c.where}{rest}",
                f"{node} has {count} GPUs{rest}",
                f"request all {count} GPUs of {node}{drop}{hint}",
                f"request {count} GPUs{only}{hint}",
            )
            yield Finding(path, "gpu-whole-node", text)
    risky = sorted(n for n in _candidate_counts(place, rules) if n > gpus)
    if not pinned and risky:
        sizes = " or ".join(f"{n}-GPU" for n in risky)
        path = place.gpus.containers[0].path
        text = fit(
            "gpu-whole-node",
            path,
            f"{sizes} nodes need all GPUs before GKE {gate}; pin the instance type{hint}",
            f"pin the instance type: {sizes} nodes need all GPUs{hint}",
        )
        yield Finding(path, "gpu-whole-node", text, "warn")


def _drop(c: Constraint, node: str, count: int, rules: RuleSettings) -> tuple[str, str]:
    """How to leave only ``count``-GPU types in an instance-type pin that also allows others
    (before GKE ``rules.gpu_subset_min_version`` those cannot hold ``count`` GPUs, or would need
    all of theirs): `` and drop a, b`` (or `` and pin only node`` for long lists), and the
    short form; empty for a single-type pin, a count pin or a pool's facts."""
    if node not in c.values or c.source not in POD_SOURCES:
        return "", ""
    table = gpu_tables(rules).counts
    others = sorted(t for t in c.values if gpu_count(t, table) != count)
    if not others:
        return "", ""
    only = f" and pin only {clip(node)}"
    return (f" and drop {clip_all(others, limit=4)}" if len(others) <= 4 else only), only
