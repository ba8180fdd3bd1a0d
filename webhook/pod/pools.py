"""The node pools a pod can land on, by its exhaustive pins: what the restore prediction and
``gpu-driver`` compare node versions and GPU drivers against. Pure module (one bounded memo).
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.kube.gke import ARCHITECTURE, INSTANCE_TYPE, MACHINE_FAMILY, NODE_POOL
from webhook.pod.node_pins import NodeSelection
from webhook.snapshots.state import NodePoolFacts

_LANDING_PINS = (NODE_POOL, MACHINE_FAMILY, INSTANCE_TYPE, ARCHITECTURE)
Landing = tuple[frozenset[str] | None, ...]
"""The values of a pod's exhaustive pool, family, instance-type and architecture pins, in
``_LANDING_PINS`` order (None: no such exhaustive pin)."""
LANDING_MEMO_SIZE = 64
"""Pin sets whose landing pools are remembered per node-pool map (pods pin few distinct ones)."""
LANDING_MAX_CHARS = 1024
"""Characters of pin values a remembered pin set holds at most (real ones: a few names of up
to 63 characters; admission runs before the API server validates the pod)."""
_LANDING: list[tuple[Mapping[str, NodePoolFacts], dict[Landing, tuple[NodePoolFacts, ...]]]] = []
"""The last node-pool map seen and, per pin set (``Landing``), the pools a pod with those pins
can land on. The cluster state replaces that map on a change and never edits it, so identity
is enough: 20 pools cost a pinned pod ~30 us per admission before (``make bench-scale --profile``:
``landing_pools`` was the top frame of its own at scale)."""


def landing_pools(
    selection: NodeSelection, pools: Mapping[str, NodePoolFacts]
) -> list[NodePoolFacts]:
    """Known node pools the pod can be scheduled on, judged by its exhaustive pins.

    A pod without an exhaustive pool, family, instance-type or architecture pin can land on
    every pool with nodes. The answer is computed once per node-pool map and set of exhaustive
    pins (``_LANDING``), not per admission.
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
    found = known.get(wanted)
    if found is None:
        found = _landing(wanted, pools)
        if sum(len(value) for values in wanted if values for value in values) > LANDING_MAX_CHARS:
            return list(found)  # a tenant's huge pins are not kept
        if len(known) >= LANDING_MEMO_SIZE:
            known.clear()
        known[wanted] = found
    return list(found)


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
        if all(
            pinned is None or not values or pinned & values
            for pinned, values in zip(wanted, known, strict=True)
        ):
            out.append(facts)
    return tuple(sorted(out, key=lambda f: f.name))
