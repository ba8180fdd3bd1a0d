"""The leader's lifecycle pass in-process at bench-scale's size (``make bench-lifecycle``;
docs/performance.md).

Why: the pass (``LifecycleWorker.reconcile``: prunes, unrunnable clock, refreshes, rotated
configuration) runs beside the event loop that answers the API server, at most once per 5 s;
its length is what an admission arriving meanwhile may wait behind (``make bench-scale``'s
busy rounds, target: in-handler p99 <= 1.5x the empty cluster's). ``make bench-scale`` prints the
pass's thread CPU from ``/metrics``; this benchmark times the same pass on a synthetic state of
that size in seconds instead of minutes, for before/after comparisons of the pass's code.

State (``synthetic_state``): 50 namespaces with one grouped policy each, 20,000 stamped Running
pods (400 templates, 8 groups), 5,000 Ready PodSnapshots with origin records, 20 node pools.
Two scenarios:

* ``in use``: bench-scale's proportions: every snapshot's fingerprint has live pods, none is
  stale (a pass decides nothing);
* ``upgrade``: one snapshot in ten was taken on a node version no pool runs any more (stale and
  unrunnable: 20 stale groups to refresh) and most fingerprints have no live pod (4,500
  snapshots prunable as unused): the pass's worst days.

Each scenario's first pass reads every pod and digests every policy's snapshots
(``snapshots.per_policy``); then ``--passes`` passes with nothing changed, and as many with
``--changes`` snapshots of as many policies replaced before each (bench-scale's busy rounds:
1.6 PodSnapshot changes per second, a pass every 5 s at most).

Baseline: the figures of the last run in docs/performance.md (no target of its own; the pass's
effect is bench-scale's busy-round target). No assertions: exit 0 whatever the figures. Usage:
``python -m bench.lifecycle [--pods 20000] [--snapshots 5000] [--passes 10] [--changes 8]``
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any, cast

from webhook.base.config import Settings
from webhook.cluster.controllers.snapshot_lifecycle import LifecycleWorker
from webhook.kube.matching import Policy, PolicyIndex, compile_selector
from webhook.snapshots.index import SnapshotIndex
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.state import ClusterState, NodePoolFacts
from webhook.snapshots.views import OriginRecord, SnapshotView

NAMESPACES = 50
POOLS = 20
TEMPLATES = 400
GROUPS = 8
CHANGES = 8
"""Snapshots replaced between two passes: ``make bench-scale``'s busy rounds change 1.6
PodSnapshots per second, a pass runs at most every 5 s."""
VERSION, OLD_VERSION = "1.35.3-gke.1234000", "1.34.9-gke.1000"


def _hash(number: int) -> str:
    return f"v1:sha256:{number:064x}"


def synthetic_state(pods: int, snapshots: int, *, upgrade: bool) -> ClusterState:
    """The state described in the module docstring (``upgrade``: the second scenario)."""
    namespaces = [f"bench-{n:03d}" for n in range(NAMESPACES)]
    selector = compile_selector({"matchLabels": {"app": "llm"}})
    policies = PolicyIndex.build(
        Policy("llm-policy", ns, selector, "storage", grouping_labels=("model",))
        for ns in namespaces
    )
    pools = {
        f"pool-{n}": NodePoolFacts(
            f"pool-{n}",
            node_count=100,
            versions=frozenset({VERSION}),
            gpu_drivers=frozenset({"R570"}),
        )
        for n in range(POOLS)
    }
    records = {}
    for n in range(pods):
        namespace = namespaces[n % NAMESPACES]
        labels = {"app": "llm", "model": f"m{n % GROUPS}", "snapready.io/selected": "true"}
        records[f"{namespace}/pod-{n}"] = PodRecord(
            namespace, f"pod-{n}", uid=f"uid-{n}", labels=labels,
            spec_hash=_hash(n % TEMPLATES), node_name=f"node-{n % 2000}",
            created="2026-12-01T10:00:00Z", ready_at="2026-12-01T10:01:00Z", phase="Running",
        )  # fmt: skip
    views = []
    for n in range(snapshots):
        stale = upgrade and n % 10 == 0
        template = n * 7 % 600 if upgrade else n % TEMPLATES  # upgrade: most have no live pod
        origin = OriginRecord(
            pod=f"pod-{n}",
            spec_hash=_hash(template),
            node={"pool": f"pool-{n % POOLS}", "version": OLD_VERSION if stale else VERSION,
                  "gpuDriver": "R570"},
            group={"model": f"m{template % GROUPS}"},
        )  # fmt: skip
        created = f"2026-11-{1 + n % 28:02d}T10:00:00Z"
        views.append(
            SnapshotView(
                namespaces[n % NAMESPACES],
                f"snap-{n}",
                "llm-policy",
                f"pod-{n}",
                True,
                "Ready",
                created,
                origin=origin,
                uid=f"snap-uid-{n}",
            )
        )
    return ClusterState(
        policies=policies, node_pools=pools, synced=True, snapshots=SnapshotIndex.build(views),
        snapshots_known=True, pods=records, pods_known=True,
    )  # fmt: skip


class _Quiet:
    """The transport and Event recorder: nothing listed, nothing written (the leader's reads
    of templates and its writes are not what is timed)."""

    def list(self, path: str, **options: Any) -> tuple[list[Any], None]:
        return [], None

    def get(self, path: str) -> dict[str, Any]:
        return {}

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return body

    def delete(self, path: str, *, uid: str = "") -> dict[str, Any]:
        return {}

    def emit(self, event: Any) -> bool:
        return True


@dataclasses.dataclass
class Passes:
    """What ``pass_millis`` measured: the first pass (every digest computed, every pod read) and
    each later one, in ms of thread CPU; the worker, for what it decided."""

    first: float
    later: list[float]
    worker: LifecycleWorker


def pass_millis(state: ClusterState, passes: int, changes: int = 0) -> Passes:
    """Thread CPU (``time.thread_time``) of a leader's worker's first pass over ``state`` and of
    ``passes`` more; before each of those, ``changes`` snapshots of as many policies are
    replaced by equal copies (as a watch event replaces a view: ``SnapshotIndex.updated``),
    so the pass finds those policies changed."""
    quiet = _Quiet()
    current = [state]
    worker = LifecycleWorker(
        quiet, cast(Any, quiet), state=lambda: current[0],
        snapshot_api=lambda: "/apis/podsnapshot.gke.io/v1",
        is_leader=lambda: True, lock=threading.Lock(), on_change=lambda: None,
        settings=Settings(),
    )  # fmt: skip
    first = _timed(worker.reconcile)
    # snap-<n> is in namespace n % NAMESPACES: consecutive numbers, one policy each
    names = sorted(state.snapshots.by_name, key=lambda key: int(key[1].removeprefix("snap-")))
    out = []
    for number in range(passes):
        for change in range(changes):
            old = current[0].snapshots.by_name[names[(number * changes + change) % len(names)]]
            index = current[0].snapshots.updated(old, dataclasses.replace(old))
            # a new state, as the caches publish one: an equal new configuration index too
            # (``caches.ClusterSource`` makes an empty one per state without the config watch)
            configs = dict(current[0].configs)
            current[0] = dataclasses.replace(current[0], snapshots=index, configs=configs)
        out.append(_timed(worker.reconcile))
    return Passes(first, out, worker)


def _timed(call: Callable[[], object]) -> float:
    began = time.thread_time()
    call()
    return (time.thread_time() - began) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lifecycle", description=__doc__)
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--snapshots", type=int, default=5_000)
    parser.add_argument("--passes", type=int, default=10)
    parser.add_argument("--changes", type=int, default=CHANGES)
    args = parser.parse_args()
    print(
        f"lifecycle pass in-process: {args.pods} stamped pods, {args.snapshots} Ready "
        f"PodSnapshots, {NAMESPACES} namespaces, {POOLS} pools; thread CPU per pass: the first, "
        f"then {args.passes} passes with nothing changed and {args.passes} with "
        f"{args.changes} snapshots (of as many policies) changed before each"
    )
    for name, upgrade in (("in use", False), ("upgrade", True)):
        state = synthetic_state(args.pods, args.snapshots, upgrade=upgrade)
        still = pass_millis(state, args.passes)
        moving = pass_millis(state, args.passes, args.changes)
        print(
            f"  {name:8} first {still.first:6.1f} ms; unchanged median "
            f"{statistics.median(still.later):6.1f} ms; {args.changes} changed median "
            f"{statistics.median(moving.later):6.1f} ms, max {max(moving.later):6.1f} ms"
            f"  ({len(still.worker.prunable)} prunable, {len(still.worker.refreshes)} groups "
            "to refresh)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
