"""Whether some node with partly known labels can meet a pod's node selection: the scheduler's
``NodeAffinity`` filter (k8s.io/component-helpers scheduling/corev1/nodeaffinity: the
nodeSelector AND at least one required term, a term's requirements ANDed; an empty term, or one
with a requirement Kubernetes cannot parse, matches no node), asked of a node described by what
is known of each label (``Domain``). Pure module.

The restore prediction asks it twice (``pod.pools``): of each node pool it could land on (its
nodes' label values), and of "a node of the snapshot's machine series and CPU architecture"
(``series_domains``), whose other labels follow from the series: a machine type names its
family (``kube.gke.instance_family``), each GPU model runs on one series
(``kube.gke.ACCELERATOR_FAMILIES``), a node pool with nodes runs the families its nodes do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from webhook.kube.gke import (
    ACCELERATOR,
    ACCELERATOR_COUNT,
    ACCELERATOR_FAMILIES,
    ARCHITECTURE,
    INSTANCE_TYPE,
    MACHINE_FAMILY,
    NODE_POOL,
    SANDBOX_RUNTIME,
    instance_family,
)
from webhook.pod.node_pins import NodeSelection, Requirement
from webhook.snapshots.state import NodePoolFacts

Domain = frozenset[str | None] | Callable[[str], bool] | None
"""What is known of one label of the node: its possible values (None in the set: the label may
be absent); or a test of the values it may have (the label is always there, with one of
infinitely many values: a machine type of the series); or None, nothing known."""

GPU_SERIES = frozenset(f for families in ACCELERATOR_FAMILIES.values() for f in families)
"""Machine series with GPUs: Compute Engine attaches GPUs only to N1 and the accelerator-
optimized series (Compute Engine docs "GPU machine types")."""
CPU_ONLY_SERIES = frozenset(
    {"e2", "n2", "n2d", "n4", "n4a", "n4d", "c2", "c2d", "c3", "c3d", "c4", "c4a", "c4d",
     "t2a", "t2d", "m1", "m2", "m3", "m4", "h3", "h4d", "z3", "x4"}
)  # fmt: skip
"""General-purpose, compute-, memory- and storage-optimized series: no GPU attaches to them
(Compute Engine docs "GPU machine types": GPUs only on N1 and accelerator-optimized series).
A series on neither list is not known (a GPU pod is not judged against it)."""


def admits(selection: NodeSelection, domains: Mapping[str, Domain]) -> bool:
    """Whether a node described by ``domains`` (label key -> ``Domain``; absent: None) can meet
    ``selection``'s nodeSelector and one of its required affinity terms."""
    for key, value in selection.selector:
        if not satisfiable(domains.get(key), (Requirement(key, "In", (value,)),)):
            return False
    if not selection.requirements:
        return True
    return any(_term(term, domains) for term in selection.requirements)


def _term(term: tuple[Requirement, ...], domains: Mapping[str, Domain]) -> bool:
    if not term:
        return False
    by_key: dict[str, list[Requirement]] = {}
    for requirement in term:
        by_key.setdefault(requirement.key, []).append(requirement)
    return all(satisfiable(domains.get(key), rules) for key, rules in by_key.items())


def satisfiable(domain: Domain, rules: Iterable[Requirement]) -> bool:
    """Whether one value of ``domain`` (or the label's absence, where allowed) meets every
    requirement of ``rules`` (one label's requirements in one term)."""
    rules = tuple(rules)
    if not all(rule.valid() for rule in rules):
        return False
    if isinstance(domain, frozenset):
        return any(all(rule.matches(value) for rule in rules) for value in domain)
    listed = [set(rule.values) for rule in rules if rule.operator == "In"]
    if listed:
        candidates = set.intersection(*listed)
        fits = domain or _anything
        return any(fits(v) and all(rule.matches(v) for rule in rules) for v in candidates)
    absent = any(rule.operator == "DoesNotExist" for rule in rules)
    if domain is None:  # absent or any value: not both at once
        return not (absent and any(rule.operator in ("Exists", "Gt", "Lt") for rule in rules))
    return not absent


def _anything(_: str) -> bool:
    return True


def pool_domains(facts: NodePoolFacts) -> dict[str, Domain]:
    """A node of pool ``facts``: the values its nodes carry (a label they do not report is not
    known, but for the GPU and GKE Sandbox labels: a pool without them has none)."""
    return {
        NODE_POOL: frozenset({facts.name}),
        MACHINE_FAMILY: frozenset(facts.machine_families) or None,
        INSTANCE_TYPE: frozenset(facts.instance_types) or None,
        ARCHITECTURE: frozenset(facts.architectures) or None,
        ACCELERATOR: frozenset(facts.accelerators) or frozenset({None}),
        ACCELERATOR_COUNT: frozenset(facts.accelerator_counts) or frozenset({None}),
        SANDBOX_RUNTIME: frozenset(facts.sandboxes) or frozenset({None}),
    }


def series_domains(
    family: str, arch: str | None, pools: Mapping[str, NodePoolFacts], *, gpu: bool
) -> dict[str, Domain]:
    """A node of machine series ``family`` and CPU architecture ``arch`` (None: not known), as
    a pod asking for GPUs (``gpu``) or not would need it. Its pool is one not known (scaled to
    zero, or yet to be made) or a known one running that series and architecture."""

    def pool_fits(name: str) -> bool:
        facts = pools.get(name)
        if facts is None:
            return True
        return (not facts.machine_families or family in facts.machine_families) and (
            arch is None or not facts.architectures or arch in facts.architectures
        )

    return {
        MACHINE_FAMILY: frozenset({family}),
        ARCHITECTURE: frozenset({arch}) if arch else None,
        INSTANCE_TYPE: lambda machine_type: instance_family(machine_type) == family,
        NODE_POOL: pool_fits,
        ACCELERATOR: accelerators_of(family, gpu=gpu),
    }


def accelerators_of(family: str, *, gpu: bool) -> Domain:
    """The ``gke-accelerator`` values a node of ``family`` may carry (None in the set: none);
    only GPU ones for a pod asking for GPUs. None when the series is on neither list."""
    models = frozenset(a for a, families in ACCELERATOR_FAMILIES.items() if family in families)
    if family in CPU_ONLY_SERIES:
        found: frozenset[str | None] = frozenset({None})
    elif family in GPU_SERIES:
        found = models if family != "n1" else models | {None}
    else:
        return None
    return frozenset(value for value in found if value is not None) if gpu else found
