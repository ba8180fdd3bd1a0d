"""A namespace user's megabyte keys are answered and never kept: snapready's admission in this
process, on the cluster state its caches read from a real kube-apiserver (as its own
ServiceAccount with the chart's RBAC), where a Ready PodSnapshot has its origin record.

Admission sees a pod before the API server validates its metadata and selectors, so a tenant can
send keys up to the 3 MiB request limit (a dry run is enough). Each annotated pod below misses the
snapshot, so the prediction names the differing fields by path; a node selector is no part of the
fingerprint, so those pods are a hit, and their pins are read by key (node pinning joins each key
into a field path). Before ``e220dc0`` the count-bounded memos kept those keys: 376-395 MiB for
128 pods of 1,000 ~2.9 KB ``dev.gvisor.*`` annotation keys (the field-digest memo of
``webhook.pod.memo``) and 221 MiB for 40 pods of one ~2.9 MB ``nodeSelector`` key
(``join_path``'s cache); the chart's memory limit is 256 MiB.
"""

from __future__ import annotations

import gc
import tracemalloc

from tests.cluster.controllers.test_snapshots import Env, env, take_snapshot  # noqa: F401
from tests.envtest.plugin import wait_for
from webhook.base.keys import RESTORE_PREDICTION, RESTORE_REASON
from webhook.pod import memo
from webhook.pod.context import _cached_join_path

MAX_KEPT_MIB = 64
"""What the process may still hold (tracemalloc) after the hostile pods: one kept key per pod
would be hundreds of MiB; the memos' own short entries are well under a MiB."""
ANNOTATED_PODS = 48
"""Pods of 1,000 long annotation keys: a memo keeping them would hold ~139 MiB, over
``MAX_KEPT_MIB`` (the full ``memo.DIGESTS_SIZE`` of 128 took 29 s of a 2-core suite)."""


def _miss_naming_fields(env: Env) -> None:  # noqa: F811
    """A Ready snapshot and a probe pod that misses it with the fields named."""
    take_snapshot(env)
    probe = env.pod("probe", container={"image": "other:1"})

    def named() -> bool:
        annotations = env.annotations(probe)
        reason = annotations.get("snapready.io/" + RESTORE_REASON, "")
        missed = annotations.get("snapready.io/" + RESTORE_PREDICTION) == "miss"
        return missed and "differ" in reason

    wait_for("a miss naming fields", named, 30)
    memo._digests.clear()
    _cached_join_path.cache_clear()
    gc.collect()


def _kept_mib(make_pods: object) -> float:
    """MiB still allocated (tracemalloc) after ``make_pods()`` ran and its pods were dropped."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        make_pods()  # type: ignore[operator]
        gc.collect()
        return (tracemalloc.get_traced_memory()[0] - base) / 2**20
    finally:
        tracemalloc.stop()


def test_a_thousand_long_annotation_keys_per_pod_are_not_kept(env: Env) -> None:  # noqa: F811
    _miss_naming_fields(env)

    def make_pods() -> None:
        for number in range(ANNOTATED_PODS):
            keys = {f"dev.gvisor.t{number}-{j}-" + "k" * 2900: "v" for j in range(1000)}
            decision = env.mutate(env.pod(f"evil-{number}", annotations=keys))
            assert decision.allowed
            if number == 0:  # answered: a miss whose reason names one of those keys
                patch = decision.patch
                reason = [op["value"] for op in patch if op["path"].endswith(RESTORE_REASON)]
                assert reason and "dev.gvisor.t0-" in reason[0]

    kept = _kept_mib(make_pods)
    assert kept < MAX_KEPT_MIB, f"{kept:.0f} MiB kept after {ANNOTATED_PODS} pods"


def test_megabyte_node_selector_keys_are_not_kept(env: Env) -> None:  # noqa: F811
    _miss_naming_fields(env)

    def make_pods() -> None:
        for number in range(40):
            pod = env.pod(f"evil-{number}")
            pod["spec"]["nodeSelector"][f"k{number:03d}-" + "x" * 2_900_000] = "v"
            decision = env.mutate(pod)
            assert decision.allowed
            if number == 0:  # answered: the node selector is no part of the fingerprint, so
                # the prediction is the snapshot's hit; its pins were read (their paths joined)
                patch = decision.patch
                said = {op["path"].rsplit("~1", 1)[-1]: op["value"] for op in patch}
                assert said.get(RESTORE_PREDICTION) == "hit", said

    kept = _kept_mib(make_pods)
    assert kept < MAX_KEPT_MIB, f"{kept:.0f} MiB kept after 40 pods"
