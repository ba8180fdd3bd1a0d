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

Domain = frozenset[str | None] | Callable[[str | None], bool] | None
"""What is known of one label of the node: its possible values (None in the set: the label may
be absent); or a test of a value (None: whether the label may be absent), where infinitely
many values may pass (a machine type of the series, a GPU model no table lists); or None,
nothing known."""
MAX_VALUES = 1024
"""Values of one requirement judged at most: past it the requirement is not judged (real ones
list a few names; admission runs before the API server checks the pod, and a tenant's 16,000
values cost seconds per pool, ``In`` against ``NotIn`` of the same list: a review)."""

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


MAX_REQUIREMENTS = 1024
"""Requirements over all terms judged at most: past it the terms are not judged (real pods
have a few; 3 MB of one-expression terms would cost seconds per pool, on the event loop)."""


def admits(selection: NodeSelection, domains: Mapping[str, Domain]) -> bool:
    """Whether a node described by ``domains`` (label key -> ``Domain``; absent: None) can meet
    ``selection``'s nodeSelector and one of its required affinity terms (terms of more than
    ``MAX_REQUIREMENTS`` requirements in all are not judged: True)."""
    terms = selection.requirements
    if len(terms) > MAX_REQUIREMENTS or sum(map(len, terms)) > MAX_REQUIREMENTS:
        return True
    for key, value in selection.selector:
        if not satisfiable(domains.get(key), (Requirement(key, "In", frozenset({value})),)):
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
    requirement of ``rules`` (one label's requirements in one term). Linear in the values:
    a requirement's are a set."""
    rules = tuple(rules)
    if not all(rule.valid() for rule in rules):
        return False
    if any(len(rule.values) > MAX_VALUES for rule in rules):
        return True  # not judged (``MAX_VALUES``)
    if isinstance(domain, frozenset):
        return any(all(rule.matches(value) for rule in rules) for value in domain)
    fits = domain or _anything
    listed = [rule.values for rule in rules if rule.operator == "In"]
    if listed:
        candidates = frozenset.intersection(*listed)
        return any(fits(v) and all(rule.matches(v) for rule in rules) for v in candidates)
    if any(rule.operator == "DoesNotExist" for rule in rules):
        return fits(None) and not any(rule.operator in ("Exists", "Gt", "Lt") for rule in rules)
    return True  # NotIn, Exists: one of infinitely many other values; Gt/Lt: not known


def _anything(_: str | None) -> bool:
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

    def pool_fits(name: str | None) -> bool:
        facts = pools.get(name) if name is not None else None
        if facts is None:
            return name is not None
        return (not facts.machine_families or family in facts.machine_families) and (
            arch is None or not facts.architectures or arch in facts.architectures
        )

    return {
        MACHINE_FAMILY: frozenset({family}),
        ARCHITECTURE: frozenset({arch}) if arch else None,
        INSTANCE_TYPE: lambda t: t is not None and instance_family(t) == family,
        NODE_POOL: pool_fits,
        ACCELERATOR: accelerators_of(family, gpu=gpu),
    }


def accelerators_of(family: str, *, gpu: bool) -> Domain:
    """The ``gke-accelerator`` values a node of ``family`` may carry: none on a series without
    GPUs; on a GPU series the models ``ACCELERATOR_FAMILIES`` puts there, or a model it does
    not list (Google runs GPUs beyond any list: docs/gke-facts.md#section-9), and no label
    only on N1 (GPUs are optional there). A pod asking for GPUs needs one. None when the series
    is on neither list."""
    if family in CPU_ONLY_SERIES:
        return frozenset() if gpu else frozenset({None})
    if family not in GPU_SERIES:
        return None
    optional = family == "n1" and not gpu

    def carries(model: str | None) -> bool:
        if model is None:
            return optional
        listed = ACCELERATOR_FAMILIES.get(model)
        return listed is None or family in listed

    return carries
