"""Lookup tables derived from ``RuleSettings``, built once per settings object (pure module).

The GPU rules read the same sets and sorted lists of ``rules.gpu_machine_types``,
``gpu_accelerators`` and ``multi_gpu_accelerators`` for every pod; rebuilding them per pod was
~6 us of a ~105 us validation (``make bench``, docs/performance.md). ``RuleSettings`` is frozen
(assignment is refused) and settings are built once per process and never edited in place, so a
table kept with the very settings object it came from (identity, not equality) cannot go stale.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from webhook.base.sections import RuleSettings
from webhook.kube.gke import instance_family

MAX_KEPT = 8
"""Settings objects remembered (one per load or reload; a few suffice)."""


@dataclass(frozen=True)
class GpuTables:
    """What the GPU rules derive from the settings.

    Attributes:
        machine_types: ``rules.gpu_machine_types`` keys.
        families: their machine families (``g2``, ``a2``, ``a3``).
        accelerators: ``rules.gpu_accelerators`` keys; ``accelerators_text`` them joined by
            ``, `` in settings order; ``families_text`` the families sorted and joined.
        multi_families: families carrying a multi-GPU accelerator (``g2``).
        multi_counts: ``(machine type, GPUs)`` of those families, fewest GPUs first, then name.
        single_accelerators, single_families: GPU accelerators and families without multi-GPU
            support.
        counts: GPU count per machine type over both lists (documented first, then validated
            in the field: ``rules.validated_gpu_machine_types``).
        accelerator_families: families per accelerator over both lists.
        documented_types, documented_accelerators: the docs' lists alone (messages say which
            list a value is missing from).
    """

    machine_types: frozenset[str]
    families: frozenset[str]
    accelerators: frozenset[str]
    accelerators_text: str
    families_text: str
    multi_families: frozenset[str]
    multi_counts: tuple[tuple[str, int], ...]
    single_accelerators: frozenset[str]
    single_families: frozenset[str]
    counts: Mapping[str, int]
    accelerator_families: Mapping[str, tuple[str, ...]]
    documented_types: frozenset[str]
    documented_accelerators: frozenset[str]


def _build(rules: RuleSettings) -> GpuTables:
    counts = {**rules.gpu_machine_types, **rules.validated_gpu_machine_types}
    carriers = {
        name: tuple(families)
        for name, families in {**rules.gpu_accelerators, **rules.validated_gpu_accelerators}.items()
    }
    families = frozenset(instance_family(t) for t in counts)
    multi = frozenset(f for a in rules.multi_gpu_accelerators for f in carriers.get(a, ()))
    fits = [(t, n) for t, n in counts.items() if instance_family(t) in multi]
    return GpuTables(
        machine_types=frozenset(counts),
        families=families,
        accelerators=frozenset(carriers),
        accelerators_text=", ".join(carriers),
        families_text=", ".join(sorted(families)),
        multi_families=multi,
        multi_counts=tuple(sorted(fits, key=lambda item: (item[1], item[0]))),
        single_accelerators=frozenset(carriers) - frozenset(rules.multi_gpu_accelerators),
        single_families=families - multi,
        counts=counts,
        accelerator_families=carriers,
        documented_types=frozenset(rules.gpu_machine_types),
        documented_accelerators=frozenset(rules.gpu_accelerators),
    )


_kept: dict[int, tuple[RuleSettings, GpuTables]] = {}
_lock = threading.Lock()


def gpu_tables(rules: RuleSettings) -> GpuTables:
    """The ``GpuTables`` of ``rules`` (built on first use; the entry holds ``rules`` itself, so
    its id cannot be reused by another object while the entry lives)."""
    kept = _kept.get(id(rules))
    if kept is not None and kept[0] is rules:
        return kept[1]
    tables = _build(rules)
    with _lock:
        _kept[id(rules)] = (rules, tables)
        while len(_kept) > MAX_KEPT:
            del _kept[next(iter(_kept))]
    return tables
