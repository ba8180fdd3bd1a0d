"""Snapshot lifecycle on a real API server (issue 25): refresh triggers after a node-pool
upgrade, prunable snapshots in dry-run, prunes when on.

GKE is simulated as docs/gke-facts.md#section-2, #section-3 and #section-9 describe: a node-pool
upgrade changes the kubelet version the pool's nodes report; a pod that lands there starts cold (no
``PodRestored``); GKE turns a PodSnapshotManualTrigger into a PodSnapshot naming the target pod as
its origin (``GkeAgent.serve_trigger``). snapready runs as a real cluster source with leader
election.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any, cast

import jsonpatch
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.cluster.controllers.test_snapshots import (
    GROUP,
    NEW,
    VERSION,
    Env,
    make_env,
    set_node_version,
    take_snapshot,
)
from tests.envtest.controlplane import ControlPlane
from tests.envtest.plugin import wait_for
from tests.support.gke_agent import GkeAgent
from webhook.cluster.controllers.snapshot_lifecycle import LifecycleWorker
from webhook.cluster.manager import start_cluster
from webhook.server.collectors import SnapshotCollector
from webhook.snapshots.usage import ReadyPods, pod_uses, ready_pods
from webhook.snapshots.views import UseKey

FAST = {"recheck_seconds": 1, "prune_grace_seconds": 0}
PAUSE = 1.0
"""Seconds between two lifecycle passes here (``MIN_INTERVAL``, 5 s, in production), so a test
that waits for passes (``two_passes``) waits seconds, not tens of seconds."""


@contextlib.contextmanager
def lifecycle_env(
    control_plane: ControlPlane,
    api: client.ApiClient,
    namespace: str,
    *,
    trigger: str = "manual",
    **lifecycle: Any,
) -> Iterator[Env]:
    """``make_env`` with a ``trigger`` policy and ``lifecycle`` settings (fast passes)."""
    with make_env(
        control_plane, api, namespace, trigger=trigger, lifecycle={**FAST, **lifecycle}
    ) as env:
        env.source.lifecycle.min_interval = PAUSE
        yield env


def two_passes(env: Env, lifecycle: LifecycleWorker | None = None) -> None:
    """Wait until a lifecycle pass (of ``env``'s source, or ``lifecycle``) began and ended after
    this call (one in flight may have read the state before it): what "nothing happened" must
    wait for before it is asserted."""
    worker = lifecycle if lifecycle is not None else env.source.lifecycle
    seen = worker.pass_count
    wait_for("a lifecycle pass", lambda: worker.pass_count >= seen + 2, timeout=30)


def running_pod(env: Env, name: str, *, restored: bool = False, **changes: Any) -> None:
    """Admit ``name`` through snapready, create it on the pool's node, Running and Ready (and
    ``PodRestored`` when ``restored``: a restored copy)."""
    pod = env.pod(name, **changes)
    decision = env.mutate(pod)
    assert decision.allowed, decision.message
    admitted = jsonpatch.apply_patch(pod, list(decision.patch))
    admitted["spec"]["nodeName"] = env.node
    core = client.CoreV1Api(env.api)
    core.create_namespaced_pod(env.namespace, client.V1Pod.model_validate(admitted))
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    rows = [("PodScheduled", "True"), ("ContainersReady", "True"), ("Ready", "True")]
    if restored:
        rows.append(("PodRestored", "True"))
    conditions = [{"type": t, "status": s, "lastTransitionTime": stamp} for t, s in rows]
    core.patch_namespaced_pod_status(
        name, env.namespace, {"status": {"phase": "Running", "conditions": conditions}}
    )
    key = f"{env.namespace}/{name}"

    def cached() -> bool:
        record = env.source.state().pods.get(key)
        return record is not None and record.ready_at is not None and record.phase == "Running"

    wait_for(f"{name} Ready in the cache", cached, timeout=10)


def upgrade(env: Env) -> None:
    """The pool's node now runs ``NEW``: the snapshot taken on the old version is stale."""
    set_node_version(env.api, env.node, NEW)
    wait_for(
        "upgrade seen",
        lambda: NEW[1:] in env.source.state().node_pools[env.pool].versions,
        timeout=10,
    )


def triggers(env: Env) -> list[dict[str, Any]]:
    """The PodSnapshotManualTriggers of the test namespace."""
    listed = client.CustomObjectsApi(env.api).list_namespaced_custom_object(
        GROUP, VERSION, env.namespace, "podsnapshotmanualtriggers"
    )
    return list(cast("dict[str, Any]", listed)["items"])


def events(env: Env, reason: str) -> list[Any]:
    """snapready's events.k8s.io Events of ``reason`` in the test namespace."""
    listed = client.EventsV1Api(env.api).list_namespaced_event(env.namespace)
    return [e for e in listed.items if e.reason == reason]


def planned(env: Env, pod: str) -> bool:
    """The lifecycle worker has chosen ``pod`` for the stale group's refresh."""
    return any(r.pod == pod for r in env.source.lifecycle.refreshes)


def snapshot_names(env: Env) -> set[str]:
    listed = client.CustomObjectsApi(env.api).list_namespaced_custom_object(
        GROUP, VERSION, env.namespace, "podsnapshots"
    )
    return {item["metadata"]["name"] for item in cast("dict[str, Any]", listed)["items"]}


@pytest.fixture
def crds(podsnapshot_crds: list[str]) -> list[str]:
    return podsnapshot_crds


def test_refresh_on_triggers_one_cold_pod_of_the_upgraded_pool_once(
    control_plane: ControlPlane, kube_admin: client.ApiClient, namespace: str, crds: list[str]
) -> None:
    with lifecycle_env(control_plane, kube_admin, namespace, refresh="on") as env:
        take_snapshot(env)
        upgrade(env)
        running_pod(env, "copy", restored=True)  # a restored copy: never a source
        running_pod(env, "other-group", labels={"model": "m2"})  # not of the stale group
        running_pod(env, "cold")
        found = wait_for("one trigger", lambda: triggers(env) or None, timeout=15)
        assert found is not None
        assert [t["spec"]["targetPod"] for t in found] == ["cold"]
        name = found[0]["metadata"]["name"]
        assert name.startswith("snapready-refresh-") and len(name) <= 63
        notes = [e.note for e in events(env, "SnapshotRefreshTriggered")]
        assert len(notes) == 1 and "cold" in notes[0] and name in notes[0]
        assert events(env, "SnapshotRefreshTriggered")[0].type == "Normal"
        settings = env.source.lifecycle.settings
        assert env.source.stop(timeout=30), "the first snapready did not stop"  # a restart
        time.sleep(0.5)
        second = start_cluster(settings)
        second.lifecycle.min_interval = PAUSE
        try:
            wait_for("restarted source synced", second.synced, timeout=30)
            wait_for(
                "restarted worker planned",
                lambda: any(r.pod == "cold" for r in second.lifecycle.refreshes),
                timeout=15,
            )
            wait_for("restarted source leads", second.lifecycle.is_leader, timeout=30)
            two_passes(env, second.lifecycle)  # passes as leader
            assert [t["metadata"]["name"] for t in triggers(env)] == [name]
            assert len(events(env, "SnapshotRefreshTriggered")) == 1
            assert second.lifecycle.created == 0
            # GKE checkpoints the target: the group has a usable snapshot, nothing more to do.
            GkeAgent(kube_admin, namespace, env.gke).serve_trigger(name, "snap-refreshed")
            wait_for(
                "refreshed snapshot cached",
                lambda: second.state().snapshots.named(namespace, "snap-refreshed") is not None,
                timeout=10,
            )
            wait_for("group no longer stale", lambda: not second.lifecycle.refreshes, timeout=15)
        finally:
            second.stop()


@pytest.mark.parametrize(
    ("trigger", "refresh"),
    [
        pytest.param("manual", "off", id="manual-policy-with-refresh-off"),
        pytest.param("workload", "on", id="workload-policy-with-refresh-on"),
    ],
)
def test_no_trigger_without_refresh_or_for_workload_policies(
    control_plane: ControlPlane,
    kube_admin: client.ApiClient,
    namespace: str,
    crds: list[str],
    *,
    trigger: str,
    refresh: str,
) -> None:
    with lifecycle_env(
        control_plane, kube_admin, namespace, trigger=trigger, refresh=refresh
    ) as env:
        take_snapshot(env)
        upgrade(env)
        running_pod(env, "cold")
        wait_for("refresh planned", lambda: planned(env, "cold"), timeout=15)
        wait_for("leading", env.source.lifecycle.is_leader, timeout=15)
        two_passes(env)  # passes as leader
        assert triggers(env) == []
        assert events(env, "SnapshotRefreshTriggered") == []
        plan = env.source.lifecycle.refreshes
        assert [r.manual for r in plan] == [trigger == "manual"]


def two_snapshots(env: Env) -> None:
    """``snap-1`` taken on the old version; after the upgrade ``snap-2`` on the new one; the
    live pods' fingerprint matches both (no pool runs the old version any more)."""
    take_snapshot(env, "snap-1", origin="origin-1")
    upgrade(env)
    time.sleep(1.1)  # creationTimestamp has seconds resolution: snap-2 is newer
    take_snapshot(env, "snap-2", origin="origin-2")


def gauge(env: Env) -> dict[str, float]:
    collector = SnapshotCollector(env.source.state, lambda: env.source.lifecycle.prunable)
    return {
        sample.labels["state"]: sample.value
        for family in collector.collect()
        for sample in family.samples
        if sample.labels["namespace"] == env.namespace
    }


def test_dry_run_lists_the_unrunnable_snapshot_keeps_the_usable_one_and_deletes_nothing(
    control_plane: ControlPlane, kube_admin: client.ApiClient, namespace: str, crds: list[str]
) -> None:
    with lifecycle_env(control_plane, kube_admin, namespace, prune="dry-run") as env:
        two_snapshots(env)
        wait_for(
            "snap-1 prunable",
            lambda: set(env.source.lifecycle.prunable) == {(namespace, "snap-1")},
            timeout=15,
        )
        assert env.source.lifecycle.prunable[(namespace, "snap-1")].reason == "unrunnable"
        found = wait_for("Event", lambda: events(env, "SnapshotsPrunable") or None, timeout=10)
        assert found is not None and len(found) == 1
        assert "snap-1" in found[0].note and "snap-2" not in found[0].note
        assert found[0].regarding.kind == "PodSnapshotPolicy"
        assert gauge(env) == {"prunable": 1.0, "ready": 1.0}
        two_passes(env)  # a dry run deletes nothing and announces once, pass after pass
        assert snapshot_names(env) == {"snap-1", "snap-2"}
        assert len(events(env, "SnapshotsPrunable")) == 1
        assert events(env, "SnapshotPruned") == []


def test_prune_on_deletes_the_unrunnable_snapshot_and_keeps_the_newest_usable(
    control_plane: ControlPlane, kube_admin: client.ApiClient, namespace: str, crds: list[str]
) -> None:
    with lifecycle_env(control_plane, kube_admin, namespace, prune="on") as env:
        two_snapshots(env)
        wait_for("snap-1 deleted", lambda: snapshot_names(env) == {"snap-2"}, timeout=20)
        pruned = wait_for("Event", lambda: events(env, "SnapshotPruned") or None, timeout=10)
        assert pruned is not None and len(pruned) == 1
        assert "snap-1" in pruned[0].note and "unrunnable" in pruned[0].note
        assert env.source.lifecycle.pruned == 1
        two_passes(env)  # the newest usable snapshot stays, pass after pass
        assert snapshot_names(env) == {"snap-2"}


def test_the_only_snapshot_a_live_pod_matches_is_kept_even_when_unrunnable(
    control_plane: ControlPlane, kube_admin: client.ApiClient, namespace: str, crds: list[str]
) -> None:
    with lifecycle_env(control_plane, kube_admin, namespace, prune="on") as env:
        uses = env.source.lifecycle.pod_uses
        wait_for("the pods read once", lambda: uses.full_reads >= 1, timeout=30)
        take_snapshot(env)  # its origin pod lives and has its fingerprint
        upgrade(env)
        wait_for("leading", env.source.lifecycle.is_leader, timeout=15)
        # Passes that read the pod (created after the pods were read: its event told the
        # leader, unless another test's policy went meanwhile and every pod was read again)
        # and the upgrade: the snapshot is unrunnable, yet kept.
        two_passes(env)
        assert snapshot_names(env) == {"snap-1"}
        assert env.source.lifecycle.prunable == {}
        # The pod goes: nothing matches the unrunnable snapshot any more.
        with contextlib.suppress(ApiException):
            client.CoreV1Api(env.api).delete_namespaced_pod(
                "origin", namespace, grace_period_seconds=0
            )
        wait_for("snap-1 deleted", lambda: snapshot_names(env) == set(), timeout=20)


def test_the_leaders_pod_use_keys_follow_the_pod_events(
    control_plane: ControlPlane, kube_admin: client.ApiClient, namespace: str, crds: list[str]
) -> None:
    """Through the real API server's watch: pods created after the first full read, one
    relabelled to another group, one ended (``Succeeded``), one deleted, and one a user took out
    of the policy and unstamped (its watch sends DELETED only: the pods-gone hook is all the
    leader hears of it); the keys the leader's passes keep equal a walk of the cache and the
    one pod left's key; the pods a refresh may checkpoint, kept the same way, equal a walk's
    (``PodUses.ready``)."""
    with lifecycle_env(control_plane, kube_admin, namespace, prune="dry-run") as env:
        uses = env.source.lifecycle.pod_uses
        wait_for("the pods read once", lambda: uses.full_reads >= 1, timeout=30)
        for name in ("gone", "moved", "ended", "unstamped"):
            running_pod(env, name)
        two_passes(env)  # the leader holds the four pods' keys before they change
        core = client.CoreV1Api(env.api)
        core.patch_namespaced_pod("moved", namespace, {"metadata": {"labels": {"model": "m4"}}})
        core.patch_namespaced_pod_status("ended", namespace, {"status": {"phase": "Succeeded"}})
        unstamp = {"metadata": {"labels": {"app": "web", "snapready.io/selected": None}}}
        core.patch_namespaced_pod("unstamped", namespace, unstamp)
        core.delete_namespaced_pod("gone", namespace, grace_period_seconds=0)
        spec_hash = env.source.state().pods[f"{namespace}/moved"].spec_hash
        assert spec_hash is not None
        expected = {(namespace, "llm-policy", (("model", "m4"),), spec_hash)}
        seen: list[object] = []

        def ours(keys: frozenset[UseKey]) -> set[UseKey]:
            return {key for key in keys if key[0] == namespace}  # other tests' pods: not ours

        def ready_of(ready: ReadyPods) -> dict[str | None, set[str]]:
            return {h: set(pods) for h, pods in dict(ready.get(namespace, {})).items()}

        def agreed() -> bool:
            try:  # the leader's thread files pods meanwhile: a copy may meet a change
                kept = ready_of(uses.ready)
            except RuntimeError:
                return False
            walked = ready_of(ready_pods(env.source.state()))
            seen[:] = [ours(uses.last), ours(pod_uses(env.source.state())), kept, walked]
            # the pods a refresh may checkpoint too: "moved" alone is Running and Ready
            only = {spec_hash: {f"{namespace}/moved"}}
            return seen[0] == seen[1] == expected and kept == walked == only

        try:
            wait_for("the leader's keys follow the pods", agreed, timeout=30)
        except pytest.fail.Exception:
            pytest.fail(f"keys and ready pods, the leader's and a walk's: {seen}; keys {expected}")
