"""``snapshots.prune`` and ``snapshots.refresh``: which snapshots no pod can restore from,
which groups to refresh."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from webhook.base.tracking import LifecycleSettings
from webhook.kube.matching import Policy, PolicyIndex, compile_selector
from webhook.snapshots.config_refs import ConfigMeta
from webhook.snapshots.index import SnapshotIndex
from webhook.snapshots.outcomes import snapshot_state
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.prune import Usage, prune_memo, prune_plan, unused_candidates
from webhook.snapshots.refresh import refresh_plan, trigger_name
from webhook.snapshots.state import ClusterState, NodePoolFacts, NodeView, parse_policy
from webhook.snapshots.usage import pod_uses
from webhook.snapshots.views import ConfigRef, OriginRecord, SnapshotView, WorkloadRef

NOW = datetime(2026, 12, 20, 12, 0, tzinfo=UTC)
OLD, NEW = "1.35.3-gke.1234000", "1.35.4-gke.100"
HASH, OTHER_HASH = "v1:sha256:" + "a" * 64, "v1:sha256:" + "b" * 64
SETTINGS = LifecycleSettings(prune_grace_seconds=3600, unused_days=7)


def policy(trigger: str = "manual") -> Policy:
    return Policy(
        "llm",
        "ml",
        compile_selector({"matchLabels": {"app": "llm"}}),
        "storage",
        trigger_type=trigger,
        grouping_labels=("model",),
    )


def snap(
    name: str,
    *,
    version: str = OLD,
    ready: bool = True,
    created: str = "2026-12-19T10:00:00Z",
    spec_hash: str | None = HASH,
    group: str = "m1",
    workload: WorkloadRef | None = None,
    **extra: Any,
) -> SnapshotView:
    origin = OriginRecord(
        pod="origin",
        spec_hash=spec_hash,
        node={"pool": "l4", "version": version, "gpuDriver": "latest"},
        group={"model": group},
        workload=workload,
    )
    return SnapshotView(
        "ml", name, "llm", "origin", ready, "", created, origin=origin, uid=f"uid-{name}", **extra
    )


def pod(name: str, *, spec_hash: str = HASH, node: str = "n-new", **extra: Any) -> PodRecord:
    fields: dict[str, Any] = {
        "labels": {"app": "llm", "model": "m1"},
        "spec_hash": spec_hash,
        "node_name": node,
        "ready_at": "2026-12-20T11:00:00Z",
        "phase": "Running",
        **extra,
    }
    return PodRecord("ml", name, uid=f"uid-{name}", **fields)


def state(
    snapshots: list[SnapshotView],
    pods: list[PodRecord] = (),  # type: ignore[assignment]
    *,
    versions: tuple[str, ...] = (NEW,),
    trigger: str = "manual",
    synced: bool = True,
) -> ClusterState:
    pool = NodePoolFacts("l4", 1, versions=frozenset(versions), gpu_drivers=frozenset({"latest"}))
    node = NodeView("l4", (("cloud.google.com/gke-gpu-driver-version", "latest"),), versions[0])
    return ClusterState(
        policies=PolicyIndex.build([policy(trigger)]),
        node_pools={"l4": pool},
        nodes={"n-new": node},
        snapshots=SnapshotIndex.build(snapshots),
        snapshots_known=True,
        pods={f"ml/{p.name}": p for p in pods},
        pods_known=True,
        synced=synced,
    )


def plan(current: ClusterState, usage: Usage | None = None, **kwargs: Any) -> dict[str, str]:
    usage = usage if usage is not None else Usage(pod_uses(current))
    found = prune_plan(current, NOW, SETTINGS, usage=usage, **kwargs)
    return {p.name: p.reason for p in found if p.ready(NOW)}


LONG_AGO = {("ml", "old"): NOW - timedelta(hours=2)}


NEWER = "2026-12-20T09:00:00Z"


def test_unrunnable_after_the_grace_and_the_newest_usable_is_kept() -> None:
    current = state([snap("old"), snap("new", version=NEW, created=NEWER)], [pod("p")])
    assert plan(current, unrunnable_since=LONG_AGO) == {"old": "unrunnable"}


def test_unrunnable_waits_for_the_grace() -> None:
    current = state([snap("old"), snap("new", version=NEW, created=NEWER)], [pod("p")])
    recent = {("ml", "old"): NOW - timedelta(minutes=5)}
    assert plan(current, unrunnable_since=recent) == {}
    assert plan(current, unrunnable_since={}) == {}, "first seen now: the grace starts now"


def test_a_pool_that_still_runs_the_old_version_keeps_it() -> None:
    current = state(
        [snap("old"), snap("new", version=NEW, created=NEWER)], [pod("p")], versions=(NEW, OLD)
    )
    assert plan(current, unrunnable_since=LONG_AGO) == {}


def test_the_only_snapshot_a_live_pod_matches_is_never_pruned() -> None:
    current = state([snap("old")], [pod("p")])
    assert plan(current, unrunnable_since=LONG_AGO) == {}
    without_pod = state([snap("old")])
    assert plan(without_pod, unrunnable_since=LONG_AGO) == {"old": "unrunnable"}


def test_a_template_protects_like_a_pod() -> None:
    current = state([snap("old")])
    template = Usage(templates=frozenset({("ml", "llm", (("model", "m1"),), HASH)}))
    assert plan(current, template, unrunnable_since=LONG_AGO) == {}


def test_failed_checkpoint_after_the_grace() -> None:
    failed = snap("bad", ready=False, checkpoint="failed", checkpoint_at="2026-12-20T10:00:00Z")
    fresh = replace(failed, name="fresh", checkpoint_at="2026-12-20T11:30:00Z")
    assert plan(state([failed, fresh]), unrunnable_since={}) == {"bad": "checkpoint-failed"}


UNUSED_CREATED = "2026-12-01T10:00:00Z"


@pytest.mark.parametrize(
    ("view", "listed", "expected"),
    [
        pytest.param(snap("u", version=NEW, created=UNUSED_CREATED), True, {"u": "unused"},
                     id="no-pod-no-template-for-7-days"),
        pytest.param(snap("u", version=NEW, created=UNUSED_CREATED), False, {},
                     id="templates-not-listed-unknown-keep"),
        pytest.param(snap("u", version=NEW, created=UNUSED_CREATED,
                          last_access="2026-12-18T10:00:00Z"), True, {},
                     id="restored-from-recently"),
        pytest.param(snap("u", version=NEW, created="2026-12-18T10:00:00Z"), True, {},
                     id="younger-than-unused-days"),
        pytest.param(snap("u", version=NEW, created=UNUSED_CREATED, spec_hash=None), True, {},
                     id="fingerprint-unknown-keep"),
        pytest.param(snap("u", version=NEW, created=UNUSED_CREATED,
                          workload=WorkloadRef("Sandbox", "s")), True, {},
                     id="custom-workload-templates-unknown-keep"),
    ],
)  # fmt: skip
def test_unused(view: SnapshotView, listed: bool, expected: dict[str, str]) -> None:
    current = state([view], [pod("p", spec_hash=OTHER_HASH)])
    usage = Usage(pod_uses(current), listed=frozenset({"ml"} if listed else set()))
    assert plan(current, usage, unrunnable_since={}) == expected


def test_unused_candidates_name_only_namespaces_that_need_a_template_lookup() -> None:
    old = snap("u", version=NEW, created=UNUSED_CREATED)
    current = state([old], [pod("p", spec_hash=OTHER_HASH)])
    assert unused_candidates(current, NOW, SETTINGS, pod_uses(current)) == {"ml"}
    used = state([old], [pod("p")])
    assert unused_candidates(used, NOW, SETTINGS, pod_uses(used)) == set()


def test_a_pod_of_another_group_does_not_use_it() -> None:
    view = snap("u", version=NEW, created=UNUSED_CREATED)
    other = pod("p", labels={"app": "llm", "model": "m2"})
    current = state([view], [other])
    usage = Usage(pod_uses(current), listed=frozenset({"ml"}))
    assert plan(current, usage, unrunnable_since={}) == {"u": "unused"}


def test_nothing_before_the_caches_are_synced() -> None:
    current = state([snap("old")], synced=False)
    assert prune_plan(current, NOW, SETTINGS, usage=Usage(), unrunnable_since=LONG_AGO) == []
    assert refresh_plan(current) == []
    unknown_pods = replace(state([snap("old")]), pods_known=False)
    assert prune_plan(unknown_pods, NOW, SETTINGS, usage=Usage(), unrunnable_since=LONG_AGO) == []


def test_deleting_and_untracked_snapshots_are_left_alone() -> None:
    deleting = snap("old", deleting_since="2026-12-20T11:00:00Z")
    assert plan(state([deleting]), unrunnable_since={("ml", "old"): NOW - timedelta(days=1)}) == {}
    assert plan(state([snap("old")]), unrunnable_since=LONG_AGO, mine=lambda ns: ns != "ml") == {}


@pytest.mark.parametrize(
    ("view", "reason"),
    [
        pytest.param(snap("s", ready=False, checkpoint="failed",
                          checkpoint_at="2026-12-20T10:00:00Z"), "checkpoint-failed", id="failed"),
        pytest.param(snap("s"), "unrunnable", id="unrunnable"),
        pytest.param(snap("s", version=NEW, created=UNUSED_CREATED), "unused", id="unused"),
    ],
)  # fmt: skip
def test_no_reason_prunes_a_snapshot_being_deleted(view: SnapshotView, reason: str) -> None:
    """Each reason prunes the snapshot, and none once it is being deleted (GKE deletes it)."""
    for deleting, expected in ((None, {"s": reason}), ("2026-12-20T11:00:00Z", {})):
        current = state([replace(view, deleting_since=deleting)], [pod("p", spec_hash=OTHER_HASH)])
        usage = Usage(pod_uses(current), listed=frozenset({"ml"}))
        since = {("ml", "s"): NOW - timedelta(days=1)}
        assert plan(current, usage, unrunnable_since=since) == expected, deleting


def test_prunable_is_the_one_state_a_snapshot_counts_in() -> None:
    view = snap("old")
    pools = state([view]).node_pools
    assert snapshot_state(view, pools) == "stale"
    assert snapshot_state(view, pools, prunable={("ml", "old")}) == "prunable"


def test_refresh_picks_the_ready_cold_pod_on_the_upgraded_pool() -> None:
    pods = [
        pod("restored", restored=True, ready_at="2026-12-20T10:00:00Z"),
        pod("outcome-restored", outcome="restored", ready_at="2026-12-20T10:00:00Z"),
        pod("not-ready", ready_at=None),
        pod("pending", phase="Pending"),
        pod("other-group", labels={"app": "llm", "model": "m2"}),
        pod("unselected", labels={"app": "web", "model": "m1"}),
        pod("elsewhere", node="n-unknown"),
        pod("cold"),
    ]
    found = refresh_plan(state([snap("old")], pods))
    assert [(r.pod, r.manual, r.old, r.new) for r in found] == [("cold", True, OLD, NEW)]


def test_refresh_picks_a_pod_of_the_stale_snapshots_fingerprint() -> None:
    # Another template of the group was Ready first: its checkpoint would refresh nothing stale.
    pods = [pod("other-template", spec_hash=OTHER_HASH, ready_at="2026-12-20T09:00:00Z"),
            pod("cold")]  # fmt: skip
    assert [r.pod for r in refresh_plan(state([snap("old")], pods))] == ["cold"]
    # Without a recorded fingerprint any template of the group will do: the earliest Ready.
    unknown = snap("old", spec_hash=None)
    assert [r.pod for r in refresh_plan(state([unknown], pods))] == ["other-template"]


def test_a_snapshot_is_judged_again_against_each_new_set_of_node_pools() -> None:
    view = snap("old")
    upgraded = state([view]).node_pools
    assert snapshot_state(view, upgraded) == "stale"
    rolled_back = state([view], versions=(OLD,)).node_pools  # the caches' next pools mapping
    assert snapshot_state(view, rolled_back) == "ready"
    assert snapshot_state(view, upgraded) == "stale"


def test_refresh_picks_a_pod_of_each_stale_group() -> None:
    m2 = {"app": "llm", "model": "m2"}
    pods = [pod("cold-m2", labels=m2, ready_at="2026-12-20T09:00:00Z"), pod("cold-m1")]
    found = refresh_plan(state([snap("old"), snap("old-m2", group="m2")], pods))
    assert sorted((r.group, r.pod) for r in found) == [
        ((("model", "m1"),), "cold-m1"),
        ((("model", "m2"),), "cold-m2"),
    ]


def test_refresh_waits_while_the_group_has_a_usable_or_uploading_snapshot() -> None:
    assert refresh_plan(state([snap("old"), snap("new", version=NEW)], [pod("cold")])) == []
    uploading = snap("up", version=NEW, ready=False, checkpoint="awaiting")
    assert refresh_plan(state([snap("old"), uploading], [pod("cold")])) == []


def test_refresh_of_a_workload_policy_is_reported_not_manual() -> None:
    found = refresh_plan(state([snap("old")], [pod("cold")], trigger="workload"))
    assert [(r.pod, r.manual) for r in found] == [("cold", False)]


def test_source_label_required_by_the_manual_trigger_rule() -> None:
    label = "snapready.io/snapshot-source"
    current = state([snap("old")], [pod("cold")])
    assert [r.pod for r in refresh_plan(current, source_label=label)] == [None]
    marked = pod("cold", labels={"app": "llm", "model": "m1", label: "true"})
    assert [r.pod for r in refresh_plan(state([snap("old")], [marked]), source_label=label)] == [
        "cold"
    ]


def test_trigger_names_are_deterministic_dns_labels_per_upgrade() -> None:
    group = (("model", "m1"),)
    first = trigger_name("ml", "llm", group, ("l4", "version", OLD, NEW))
    assert first == trigger_name("ml", "llm", group, ("l4", "version", OLD, NEW))
    assert re.fullmatch(r"snapready-refresh-[0-9a-f]{16}", first)
    others = {
        trigger_name("ml", "llm", (("model", "m2"),), ("l4", "version", OLD, NEW)),
        trigger_name("ml", "llm", group, ("l4", "version", NEW, "1.36.0-gke.1")),
        trigger_name("ml", "other", group, ("l4", "version", OLD, NEW)),
    }
    assert first not in others and len(others) == 3


def _config_state(snapshots: list[SnapshotView], pods: list[PodRecord]) -> ClusterState:
    """Pools on the snapshots' own version (not stale); Secret hf-token rotated at 10:30."""
    current = state(snapshots, pods, versions=(OLD,))
    configs = {"ml": {("Secret", "hf-token"): ConfigMeta("11", "2026-12-20T10:30:00Z")}}
    return replace(current, configs=configs)


def _reads_token(name: str, **extra: Any) -> SnapshotView:
    view = snap(name, version=OLD, **extra)
    assert view.origin is not None
    ref = ConfigRef("Secret", "hf-token", "10", "2026-12-01T00:00:00Z")
    return replace(view, origin=replace(view.origin, config=(ref,)))


def test_rotated_configuration_refreshes_on_a_pod_created_after_the_change() -> None:
    pods = [
        pod("before", created="2026-12-20T10:00:00Z"),  # read the old value
        pod("restored", created="2026-12-20T11:00:00Z", restored=True),
        pod("after", created="2026-12-20T11:00:00Z"),
    ]
    (found,) = refresh_plan(_config_state([_reads_token("old")], pods))
    assert (found.what, found.old, found.new, found.pod) == (
        "config",
        "Secret/hf-token",
        "2026-12-20T10:30:00Z",
        "after",
    )
    assert found.change() == "Secret/hf-token changed at 2026-12-20T10:30:00Z"
    assert found.trigger == refresh_plan(_config_state([_reads_token("old")], pods))[0].trigger
    # Without a pod started after the change: planned, no target.
    (waiting,) = refresh_plan(_config_state([_reads_token("old")], pods[:2]))
    assert waiting.pod is None


def test_a_clean_snapshot_in_the_group_means_no_config_refresh() -> None:
    pods = [pod("after", created="2026-12-20T11:00:00Z")]
    clean = snap("fresh", version=OLD, created="2026-12-20T11:30:00Z")
    assert refresh_plan(_config_state([_reads_token("old"), clean], pods)) == []
    unchanged = _reads_token("old")
    current = replace(
        _config_state([unchanged], pods),
        configs={"ml": {("Secret", "hf-token"): ConfigMeta("10", "2026-12-01T00:00:00Z")}},
    )
    assert refresh_plan(current) == []


def test_a_snapshots_use_key_and_last_use_read_its_record_and_gke_clock() -> None:
    """What the lifecycle pass compares per snapshot (kept on the view, computed once): the
    group's values in label order whatever order the record lists them in, and the newer of
    GKE's ``lastAccessTime`` and the creation (a value that is no time is not used)."""
    view = replace(
        snap("s"),
        origin=OriginRecord("origin", HASH, group={"zone": "b", "model": "m1"}),
        created="2026-12-19T10:00:00Z",
        last_access="2026-12-19T11:30:00Z",
    )
    assert view.use_key == ("ml", "llm", (("model", "m1"), ("zone", "b")), HASH)
    assert view.last_used == datetime(2026, 12, 19, 11, 30, tzinfo=UTC)
    older_access = replace(view, last_access="2026-12-18T00:00:00Z")
    assert older_access.last_used == datetime(2026, 12, 19, 10, 0, tzinfo=UTC)
    assert replace(view, last_access="yesterday").last_used == datetime(
        2026, 12, 19, 10, 0, tzinfo=UTC
    )
    assert replace(view, last_access=None, created="").last_used is None
    assert replace(view, origin=OriginRecord("origin", None)).use_key is None
    assert replace(view, origin=None).use_key is None


def test_a_grouping_label_named_twice_groups_as_once() -> None:
    """The CRD accepts ``labels: [model, model]``; the snapshot's recorded group holds each
    label once (a mapping), so the live pod's use key must too, or a snapshot in use would look
    unused (and ``prune: on`` would delete it) and no refresh pod would ever be found."""
    twice = replace(policy(), grouping_labels=("model", "model"))
    parsed = parse_policy(
        {
            "metadata": {"name": "llm", "namespace": "ml"},
            "spec": {
                "storageConfigName": "storage",
                "selector": {"matchLabels": {"app": "llm"}},
                "snapshotGroupingRules": {"groupByLabelValue": {"labels": ["model", "model"]}},
            },
        },
        prefix="snapready.io/",
    )
    assert parsed.grouping_labels == ("model",)
    old = snap("u", version=NEW, created=UNUSED_CREATED)
    current = replace(state([old], [pod("p")]), policies=PolicyIndex.build([twice]))
    usage = Usage(pod_uses(current), listed=frozenset({"ml"}))
    assert plan(current, usage, unrunnable_since={}) == {}, "its pod still uses it"
    upgraded = replace(state([snap("s")], [pod("p")]), policies=PolicyIndex.build([twice]))
    [refresh] = refresh_plan(upgraded)
    assert refresh.pod == "p"


def test_a_kept_digest_prunes_as_unused_days_says_now() -> None:
    # The leader's digests keep their ``unused`` Prunables between passes: a changed
    # lifecycle.unused_days must change the dues and the detail, and changing it back too.
    current = state(
        [snap("u", version=NEW, created=UNUSED_CREATED)], [pod("p", spec_hash=OTHER_HASH)]
    )
    usage = Usage(pod_uses(current), listed=frozenset({"ml"}))
    memo = prune_memo()

    def unused(days: float) -> list[tuple[str, datetime, str]]:
        found = prune_plan(
            current, NOW, LifecycleSettings(unused_days=days), usage=usage,
            unrunnable_since={}, memo=memo,
        )  # fmt: skip
        return [(p.name, p.due, p.detail) for p in found if p.reason == "unused"]

    created = datetime(2026, 12, 1, 10, tzinfo=UTC)
    [(name, due, detail)] = unused(7)
    assert (name, due) == ("u", created + timedelta(days=7)) and "unused_days 7)" in detail
    [(_, due, detail)] = unused(2)
    assert due == created + timedelta(days=2) and "unused_days 2)" in detail
    assert unused(30) == []  # used 19 days ago: not a candidate under 30 days
    [(_, due, detail)] = unused(7)
    assert due == created + timedelta(days=7) and "unused_days 7)" in detail
