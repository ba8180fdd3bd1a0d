"""``snapshots.usage.PodUses``: the leader's use keys of the live pods, kept from the pod
cache's events instead of a walk of every pod per lifecycle pass (issue 35)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import replace

import pytest

from webhook.kube.matching import Policy, PolicyIndex, compile_selector
from webhook.snapshots import usage
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.state import ClusterState
from webhook.snapshots.usage import PodUses, pod_uses

HASH_A, HASH_B = "v1:sha256:" + "a" * 64, "v1:sha256:" + "b" * 64


def policy(name: str = "llm", *, selector: dict[str, str] | None = None) -> Policy:
    chosen = selector if selector is not None else {"app": "llm"}
    return Policy(
        name,
        "ml",
        compile_selector({"matchLabels": chosen}),
        "storage",
        grouping_labels=("model",),
    )


def pod(name: str, *, spec_hash: str | None = HASH_A, model: str = "m1") -> PodRecord:
    labels = {"app": "llm", "model": model}
    return PodRecord("ml", name, labels=labels, spec_hash=spec_hash, phase="Running")


class Cache:
    """The pod cache as ``caches.ClusterSource`` keeps it: one dict edited in place, the
    ``pods`` hook after a record is stored, ``pods_gone`` after it left; a relist swaps in a
    new dict and calls the hook for each listed pod only."""

    def __init__(self, uses: PodUses, policies: PolicyIndex) -> None:
        self.uses, self.pods, self.policies = uses, dict[str, PodRecord](), policies

    def put(self, record: PodRecord) -> None:
        self.pods[f"{record.namespace}/{record.name}"] = record
        self.uses.changed(record)

    def drop(self, name: str) -> None:
        self.uses.changed(self.pods.pop(f"ml/{name}"))

    def relist(self, records: list[PodRecord]) -> None:
        self.pods = {f"{r.namespace}/{r.name}": r for r in records}
        for record in records:
            self.uses.changed(record)

    def state(self) -> ClusterState:
        return ClusterState(policies=self.policies, pods=self.pods, pods_known=True, synced=True)


def test_pod_events_between_passes_change_the_keys_as_a_walk_would() -> None:
    uses = PodUses()
    cache = Cache(uses, PolicyIndex.build([policy()]))
    cache.put(pod("a"))
    cache.put(pod("b"))
    key_a = ("ml", "llm", (("model", "m1"),), HASH_A)
    assert uses.uses(cache.state()) == {key_a}
    # Another fingerprint and group: a second key; one pod of two leaving keeps the first.
    cache.put(pod("c", spec_hash=HASH_B, model="m2"))
    cache.drop("a")
    key_c = ("ml", "llm", (("model", "m2"),), HASH_B)
    assert uses.uses(cache.state()) == {key_a, key_c}
    # The last pod with key_a ends (Succeeded): its key is gone; c is deleted: so is key_c.
    cache.put(replace(pod("b"), phase="Succeeded"))
    cache.drop("c")
    assert uses.uses(cache.state()) == frozenset()
    # A pod that is not stamped yet has no key; once stamped, it has.
    cache.put(pod("d", spec_hash=None))
    assert uses.uses(cache.state()) == frozenset()
    cache.put(pod("d"))
    assert uses.uses(cache.state()) == {key_a}


def test_a_relist_and_a_policy_change_are_read_again_whole() -> None:
    uses = PodUses()
    cache = Cache(uses, PolicyIndex.build([policy()]))
    cache.put(pod("a"))
    assert len(uses.uses(cache.state())) == 1
    # A relist after a lost watch: pod a was deleted meanwhile (no hook for it).
    cache.relist([pod("b", spec_hash=HASH_B)])
    assert uses.uses(cache.state()) == {("ml", "llm", (("model", "m1"),), HASH_B)}
    # A new policy index (no hook for pods): b is selected by a second policy too.
    cache.policies = PolicyIndex.build([policy(), policy("all", selector={})])
    assert uses.uses(cache.state()) == {
        ("ml", "all", (("model", "m1"),), HASH_B),
        ("ml", "llm", (("model", "m1"),), HASH_B),
    }


def test_any_sequence_of_events_gives_what_a_walk_of_the_cache_gives() -> None:
    rng = random.Random(35)
    policies = [
        PolicyIndex.build([policy()]),
        PolicyIndex.build([policy(), policy("m2", selector={"model": "m2"})]),
    ]
    uses = PodUses()
    cache = Cache(uses, policies[0])
    for step in range(3000):
        name = f"p{rng.randrange(40)}"
        roll = rng.random()
        if roll < 0.55:
            record = pod(
                name,
                spec_hash=rng.choice((HASH_A, HASH_B, None)),
                model=rng.choice(("m1", "m2")),
            )
            cache.put(replace(record, phase=rng.choice(("Running", "Pending", "Failed"))))
        elif roll < 0.85 and f"ml/{name}" in cache.pods:
            cache.drop(name)
        elif roll < 0.9:
            cache.relist(
                [pod(f"p{i}", model=rng.choice(("m1", "m2"))) for i in rng.sample(range(40), 10)]
            )
        elif roll < 0.93:
            cache.policies = rng.choice(policies)
        if rng.random() < 0.3:
            current = cache.state()
            assert uses.uses(current) == pod_uses(current), step


def test_no_marks_are_kept_while_nothing_asks() -> None:
    """``lifecycle.prune: off`` with nothing stale (or caches not synced): ``uses`` is never
    called, so 10,000 pod events must not grow the leader's memory; once asked, every pod is
    read."""
    uses = PodUses()
    cache = Cache(uses, PolicyIndex.build([policy()]))
    for n in range(10_000):
        cache.put(pod(f"job-{n}"))
        cache.drop(f"job-{n}")
    assert len(uses._marked) == 0
    cache.put(pod("a"))
    assert len(uses.uses(cache.state())) == 1
    uses.forget()  # a pass that stopped asking
    for n in range(100):
        cache.put(pod(f"job-{n}"))
    assert len(uses._marked) == 0
    assert uses.uses(cache.state()) == pod_uses(cache.state())


class Failing(PolicyIndex):
    """A policy index whose ``select`` raises once ``armed``."""

    armed = False

    def select(self, namespace: str, labels: Mapping[str, str]) -> tuple[Policy, ...]:
        if self.armed:
            raise RuntimeError("planted")
        return super().select(namespace, labels)


def test_a_read_that_raises_is_read_again_whole() -> None:
    policies = Failing(PolicyIndex.build([policy()]).by_namespace)
    uses = PodUses()
    cache = Cache(uses, policies)
    cache.put(pod("a"))
    assert len(uses.uses(cache.state())) == 1
    cache.put(pod("b", spec_hash=HASH_B))
    cache.drop("a")
    policies.armed = True
    with pytest.raises(RuntimeError):
        uses.uses(cache.state())
    policies.armed = False
    reads = uses.full_reads
    assert (
        uses.uses(cache.state())
        == pod_uses(cache.state())
        == {("ml", "llm", (("model", "m1"),), HASH_B)}
    )
    assert uses.full_reads == reads + 1


def test_replicas_share_one_selection_and_label_sets_stay_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A full read selects once per namespace, label set and fingerprint (the replicas of a
    template), and pods with labels of their own (a StatefulSet's) keep at most ``LABEL_SETS``
    of them, with the same keys as a walk."""
    monkeypatch.setattr(usage, "LABEL_SETS", 50)
    selects = 0
    index = PolicyIndex.build([policy()])
    real = index.select

    def counting(namespace: str, labels: Mapping[str, str]) -> tuple[Policy, ...]:
        nonlocal selects
        selects += 1
        return real(namespace, labels)

    monkeypatch.setattr(index, "select", counting)
    uses = PodUses()
    cache = Cache(uses, index)
    for number in range(300):  # 3 templates (group and fingerprint), 100 replicas each
        template = number % 3
        cache.put(pod(f"r{number}", model=f"m{template}", spec_hash=(HASH_A, HASH_B)[template % 2]))
    kept = uses.uses(cache.state())
    assert selects == 3
    assert kept == pod_uses(cache.state())
    for number in range(200):  # a StatefulSet's pods: a label of their own each
        own = replace(
            pod(f"s{number}"), labels={"app": "llm", "model": "m1", "pod-name": f"s{number}"}
        )
        cache.put(own)
    assert uses.uses(cache.state()) == pod_uses(cache.state())
    assert len(uses._by_labels) <= 50


def test_a_tenants_megabyte_labels_are_answered_and_never_kept() -> None:
    """A pod may carry megabytes of labels (a hostile trial kept 623 MiB for 400 pods created
    and deleted): a label set over 1/64 of ``LABEL_CHARS`` is not remembered, and the others
    together stay within it, with the same keys as a walk."""
    uses = PodUses()
    cache = Cache(uses, PolicyIndex.build([policy()]))
    cache.put(pod("first"))
    uses.uses(cache.state())  # from here on, pods are read from their events
    for number in range(300):
        size = 20_000 if number % 2 else 10_000  # over 1/64 of LABEL_CHARS, or under
        labels = {"app": "llm", "model": "m1", "filler": "x" * 60, f"k{number}": "v" * size}
        cache.put(replace(pod(f"big-{number}"), labels=labels))
        assert uses.uses(cache.state()) == pod_uses(cache.state())
        cache.drop(f"big-{number}")
    assert uses.uses(cache.state()) == pod_uses(cache.state())
    kept = sum(len(k) + len(v) for _, labels, _ in uses._by_labels for k, v in labels)
    assert kept <= usage.LABEL_CHARS
    assert all(len(labels) < 1_000 and max(map(len, dict(labels).values())) < 16_384
               for _, labels, _ in uses._by_labels)  # fmt: skip


def test_the_ready_pods_kept_are_what_a_walk_of_the_cache_gives() -> None:
    # ``PodUses.ready`` replaces the refresh plan's walk of every pod: after any sequence of
    # pod events, relists and policy changes it holds what ``ready_pods`` finds, by
    # namespace and fingerprint (readiness, a restored copy and its outcome all change).
    rng = random.Random(36)
    policies = [PolicyIndex.build([policy()]), PolicyIndex.build([policy("all", selector={})])]
    uses = PodUses()
    cache = Cache(uses, policies[0])

    def random_pod(name: str) -> PodRecord:
        return replace(
            pod(name, spec_hash=rng.choice((HASH_A, HASH_B, None)), model=rng.choice(("m1", "m2"))),
            namespace=rng.choice(("ml", "ops")),
            phase=rng.choice(("Running", "Running", "Pending", "Succeeded")),
            ready_at=rng.choice(("2026-12-01T10:00:00Z", None)),
            restored=rng.random() < 0.2,
            outcome=rng.choice((None, None, "restored", "cold_first", "restored_unexpected")),
        )

    seen = {"ready": 0, "restored": 0, "moved": 0}
    for step in range(3000):
        roll = rng.random()
        if roll < 0.6:
            record = random_pod(f"p{rng.randrange(30)}")
            key = f"{record.namespace}/{record.name}"
            old = cache.pods.get(key)
            if old is not None and old.spec_hash != record.spec_hash:
                seen["moved"] += 1
            cache.put(record)
        elif roll < 0.85 and cache.pods:
            key = rng.choice(sorted(cache.pods))
            uses.changed(cache.pods.pop(key))
        elif roll < 0.9:
            cache.relist([random_pod(f"p{i}") for i in rng.sample(range(30), 10)])
        elif roll < 0.93:
            cache.policies = rng.choice(policies)
        if rng.random() < 0.3:
            current = cache.state()
            uses.uses(current)
            expected = usage.ready_pods(current)
            assert uses.ready == expected, step
            seen["ready"] += sum(len(p) for by_hash in expected.values() for p in by_hash.values())
            seen["restored"] += sum(r.restored for r in current.pods.values())
    assert all(seen.values()), seen  # the walk met ready pods, restored copies and moves


def test_checkpointable_is_running_ready_and_not_a_restored_copy() -> None:
    ready = replace(pod("a"), ready_at="2026-12-01T10:00:00Z")
    assert usage.checkpointable(ready)
    assert not usage.checkpointable(replace(ready, ready_at=None))
    assert not usage.checkpointable(replace(ready, phase="Pending"))
    assert not usage.checkpointable(replace(ready, restored=True))
    assert not usage.checkpointable(replace(ready, outcome="restored"))
    assert not usage.checkpointable(replace(ready, outcome="restored_unexpected"))
    assert usage.checkpointable(replace(ready, outcome="cold_first"))
