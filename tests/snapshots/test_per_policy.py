"""``snapshots.per_policy``: the lifecycle decisions from per-policy digests, kept between
passes or computed afresh, are those of one walk over every snapshot (``plans_reference``),
whatever changes between two passes (a snapshot replaced, added or deleted, the node pools or
the configuration replaced); and only the policies whose inputs changed are digested again."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from webhook.base.tracking import LifecycleSettings
from webhook.kube.matching import Policy, PolicyIndex, compile_selector
from webhook.snapshots.config_refs import ConfigMeta
from webhook.snapshots.index import SnapshotIndex
from webhook.snapshots.per_policy import PerPolicy
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.prune import Usage, prune_memo, prune_plan, unused_candidates
from webhook.snapshots.refresh import refresh_memo, refresh_plan
from webhook.snapshots.state import ClusterState, NodePoolFacts, NodeView
from webhook.snapshots.usage import pod_uses
from webhook.snapshots.views import ConfigRef, OriginRecord, SnapshotView, WorkloadRef

from . import plans_reference as reference

NOW = datetime(2026, 12, 20, 12, 0, tzinfo=UTC)
SETTINGS = LifecycleSettings(prune_grace_seconds=3600, unused_days=7)
NAMESPACES = ("a", "b", "c")
POLICIES = ("p1", "p2")
VERSIONS = ("1.35.3-gke.1", "1.35.4-gke.2")
HASHES = tuple(f"v1:sha256:{n:064x}" for n in range(3))
TIMES = ("2026-11-01T10:00:00Z", "2026-12-10T10:00:00Z", "2026-12-19T10:00:00Z", None)
WORKLOADS = (None, WorkloadRef("Deployment", "d"), WorkloadRef("Sandbox", "s"))
SELECTOR = compile_selector({"matchLabels": {"app": "llm"}})


def random_view(rng: random.Random, namespace: str, name: str) -> SnapshotView:
    origin = None
    if rng.random() < 0.9:
        origin = OriginRecord(
            pod="origin",
            spec_hash=rng.choice((*HASHES, None)),
            node={"pool": rng.choice(("l4", "a3")), "version": rng.choice(VERSIONS),
                  "gpuDriver": rng.choice(("latest", "R570", None))},
            group={"model": rng.choice(("m1", "m2"))},
            workload=rng.choice(WORKLOADS),
            config=rng.choice((None, (ConfigRef("Secret", "token", rng.choice(("1", "2"))),))),
        )  # fmt: skip
    checkpoint = rng.choice(("", "succeeded", "failed", "awaiting"))
    return SnapshotView(
        namespace, name, rng.choice(POLICIES), "origin", rng.random() < 0.7, "",
        rng.choice(TIMES[:3]), last_access=rng.choice(TIMES), origin=origin,
        checkpoint=checkpoint, checkpoint_at=rng.choice(TIMES),
        checkpoint_message=rng.choice(("", "runsc error")),
        deleting_since="2026-12-20T11:00:00Z" if rng.random() < 0.1 else None,
        uid=f"uid-{name}-{rng.random()}",
    )  # fmt: skip


def random_pools(rng: random.Random) -> dict[str, NodePoolFacts]:
    return {
        pool: NodePoolFacts(
            pool,
            rng.choice((0, 2)),
            versions=frozenset(rng.sample(VERSIONS, rng.choice((1, 2)))),
            gpu_drivers=frozenset(rng.sample(("latest", "R570"), rng.choice((1, 2)))),
        )
        for pool in ("l4", "a3")
    }


def random_configs(rng: random.Random) -> dict[str, Any]:
    return {
        namespace: {("Secret", "token"): ConfigMeta(rng.choice(("1", "2")), TIMES[2])}
        for namespace in NAMESPACES
        if rng.random() < 0.8
    }


def pods(rng: random.Random) -> dict[str, PodRecord]:
    out = {}
    for number in range(12):
        namespace = rng.choice(NAMESPACES)
        labels = {"app": "llm", "model": rng.choice(("m1", "m2"))}
        out[f"{namespace}/pod-{number}"] = PodRecord(
            namespace, f"pod-{number}", uid=f"u{number}", labels=labels,
            spec_hash=rng.choice(HASHES), node_name=rng.choice(("n-l4", "n-a3")),
            created=TIMES[2] or "", ready_at="2026-12-20T11:00:00Z", phase="Running",
        )  # fmt: skip
    return out


def decisions(
    state: ClusterState,
    prune: PerPolicy[Any] | None,
    refresh: PerPolicy[Any] | None,
    rng: random.Random,
    *,
    walk: bool = False,
) -> tuple[Any, ...]:
    """Everything the lifecycle pass decides on ``state`` with these memos (None: afresh), or
    by the reference walk (``walk``); ``rng`` picks the live templates, listed namespaces, the
    unrunnable clock, the tracked namespaces and the source label."""
    live = pod_uses(state)
    listed = frozenset(n for n in NAMESPACES if rng.random() < 0.7)
    templates = frozenset(
        {("b", "p1", (("model", "m2"),), HASHES[1])} if rng.random() < 0.5 else ()
    )
    usage = Usage(live, templates, listed)
    since = {key: NOW.replace(hour=3) for key in list(state.snapshots.by_name)[::3]}
    mine = rng.choice((lambda _: True, lambda namespace: namespace != "b"))
    label = rng.choice((None, "app"))
    if walk:
        return (
            reference.prune_plan(
                state, NOW, SETTINGS, usage=usage, unrunnable_since=since, mine=mine
            ),
            sorted(reference.unused_candidates(state, NOW, SETTINGS, live)),
            reference.refresh_plan(state, mine, source_label=label),
        )
    return (
        prune_plan(
            state, NOW, SETTINGS, usage=usage, unrunnable_since=since, mine=mine, memo=prune
        ),
        sorted(unused_candidates(state, NOW, SETTINGS, live, memo=prune)),
        refresh_plan(state, mine, source_label=label, memo=refresh),
    )


def walk(seed: int) -> set[str]:
    """400 random changes from a random state, comparing the decisions after each; the kinds
    of decision reached."""
    rng = random.Random(seed)
    prune, refresh = prune_memo(), refresh_memo()
    views = {(ns, f"s{n}"): random_view(rng, ns, f"s{n}") for ns in NAMESPACES for n in range(6)}
    state = ClusterState(
        policies=PolicyIndex.build(
            Policy(
                name,
                ns,
                SELECTOR,
                "storage",
                trigger_type=rng.choice(("manual", "workload")),
                grouping_labels=("model",),
            )
            for ns in NAMESPACES
            for name in POLICIES
        ),
        node_pools=random_pools(rng),
        nodes={"n-l4": NodeView("l4", (), VERSIONS[1]), "n-a3": NodeView("a3", (), VERSIONS[0])},
        snapshots=SnapshotIndex.build(views.values()),
        snapshots_known=True,
        pods=pods(rng),
        pods_known=True,
        synced=True,
        configs=random_configs(rng),
    )
    decided: set[str] = set()
    for step in range(400):
        move = rng.choice(("replace", "replace", "add", "delete", "pools", "configs", "none"))
        index = state.snapshots
        if move == "replace" and index.by_name:
            key = rng.choice(sorted(index.by_name))
            index = index.updated(index.by_name[key], random_view(rng, *key))
        elif move == "add":
            namespace = rng.choice(NAMESPACES)
            index = index.updated(None, random_view(rng, namespace, f"n{step}"))
        elif move == "delete" and index.by_name:
            index = index.updated(index.by_name[rng.choice(sorted(index.by_name))], None)
        elif move == "pools":
            state = replace(state, node_pools=random_pools(rng))
        elif move == "configs":
            state = replace(state, configs=random_configs(rng))
        state = replace(state, snapshots=index)
        draw = rng.random()
        walked = decisions(state, None, None, random.Random(draw), walk=True)
        kept = decisions(state, prune, refresh, random.Random(draw))
        assert kept == walked, f"step {step} ({move}), digests kept"
        assert decisions(state, None, None, random.Random(draw)) == walked, f"step {step} afresh"
        decided |= {p.reason for p in kept[0]} | {r.what for r in kept[2]}
        decided |= {"candidates"} if kept[1] else set()
        decided |= {"refresh pod"} if any(r.pod for r in kept[2]) else set()
    return decided


def test_digests_decide_as_the_walk_over_every_snapshot_through_every_change() -> None:
    decided = set().union(*(walk(seed) for seed in range(4)))
    # every kind of decision was reached, so each was compared
    assert decided >= {
        "checkpoint-failed", "unrunnable", "unused", "version", "config", "candidates",
        "refresh pod",
    }  # fmt: skip


def test_only_the_policies_whose_inputs_changed_are_digested_again() -> None:
    views = [
        SnapshotView(ns, f"s-{ns}", "p1", "origin", True, "", TIMES[2], uid=ns) for ns in NAMESPACES
    ]
    configs = {ns: {("Secret", "token"): ConfigMeta("1", TIMES[2])} for ns in NAMESPACES}
    state = ClusterState(snapshots=SnapshotIndex.build(views), synced=True, configs=configs)
    prune, refresh = prune_memo(), refresh_memo()
    for memo in (prune, refresh):
        memo.of(state)
    assert (prune.computed, refresh.computed) == (3, 3)
    assert prune.of(state) is prune.of(state) and prune.computed == 3, "nothing changed"
    old = state.snapshots.by_name[("b", "s-b")]
    state = replace(state, snapshots=state.snapshots.updated(old, replace(old)))
    for memo in (prune, refresh):
        memo.of(state)
    assert (prune.computed, refresh.computed) == (4, 4), "one policy's snapshots changed"
    # the caches rebuild equal objects: an empty index per state when configs are not watched
    state = replace(state, node_pools=dict(state.node_pools), configs=dict(configs))
    for memo in (prune, refresh):
        memo.of(state)
    assert (prune.computed, refresh.computed) == (4, 4), "equal pools and configuration"
    rotated = {**configs, "c": {("Secret", "token"): ConfigMeta("2", TIMES[2])}}
    state = replace(state, configs=rotated)
    for memo in (prune, refresh):
        memo.of(state)
    assert (prune.computed, refresh.computed) == (4, 5), "a Secret of c: only c's refresh"
    state = replace(state, node_pools={"l4": NodePoolFacts("l4", 1)})
    for memo in (prune, refresh):
        memo.of(state)
    assert (prune.computed, refresh.computed) == (7, 8), "other node pools: every policy"
    state = replace(state, snapshots=state.snapshots.updated(old, None))
    assert set(prune.of(state)) == {("a", "p1"), ("c", "p1")}, "a policy without snapshots"
