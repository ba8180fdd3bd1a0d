"""Filling ``make bench-scale``'s clusters: the base set-up, PodSnapshots, parallel creates.

Every cluster gets GKE's snapshot CRDs, the gVisor RuntimeClass, the storage config and namespaces
with a policy each; then kube-controller-manager is stopped (by pid) once every namespace has its
``default`` ServiceAccount: with no kubelets its node lifecycle controller would mark every node
unreachable after ~50 s and then every pod not ready, and its garbage collector would delete the
pods of ReplicaSets that do not exist; the bench measures a settled cluster, not that churn.
Objects are created by ``--concurrency`` threads over one pool of keep-alive connections, each
object with its status through the status subresource.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import urllib3

from bench.harness.api import SNAPSHOT_API, Api, create, install_crds, wait_service_accounts
from bench.harness.objects import Obj
from bench.harness.plane import BenchError, stop_named
from bench.scale.nodes import Pool, stamp, suffix
from bench.scale.workload import POLICY, PREFIX, Plan
from tests.envtest.controlplane import ControlPlane
from webhook.snapshots.records import record_object
from webhook.snapshots.views import OriginRecord, SnapshotView

STORAGE_CONFIG = "snapshots-us-central1"
BUCKET = "snapready-snapshots-us-central1"


def _pick(index: int, plan: Plan) -> tuple[random.Random, str, Any, str, bool, bool, str]:
    """The random choices of snapshot ``index`` (seeded by it: the same every run): the
    generator, origin pod, template, node, Ready (19 in 20), recorded (9 in 10), name."""
    rng = random.Random(index)  # noqa: S311 - reproducible test data, not security
    name, template, node = plan.pods[rng.randrange(len(plan.pods))]
    ready, recorded = rng.random() >= 0.05, rng.random() < 0.9
    return rng, name, template, node, ready, recorded, f"{POLICY}-{suffix(name, index, length=8)}"


def record_objects(
    index: int, plan: Plan, pool_of: dict[str, Pool], uids: dict[tuple[str, str], str]
) -> tuple[Obj, None] | None:
    """(SnapshotRecord, no status) of snapshot ``index`` as snapready's leader writes it (9 in
    10 snapshots; ``uids``: each PodSnapshot's uid by namespace and name); None for the rest."""
    _, name, template, node, _, recorded, snapshot = _pick(index, plan)
    if not recorded:
        return None
    pool = pool_of.get(node)
    record = OriginRecord(
        pod=name,
        spec_hash=template.spec_hash,
        fields=template.digests,
        node={
            "pool": pool.name if pool else None,
            "family": pool.family if pool else None,
            "instanceType": pool.instance_type if pool else None,
            "arch": pool.arch if pool else None,
            "version": pool.version.removeprefix("v") if pool else None,
            "accelerator": (pool.accelerator or None) if pool else None,
            "gpuDriver": pool.driver if pool and pool.gpus else None,
        },
        group={"model": template.model.name},
        node_name=node,
        node_from="gke",
    )
    view = SnapshotView(
        template.namespace, snapshot, POLICY, name, True, "", "",
        uid=uids[template.namespace, snapshot],
    )  # fmt: skip
    return record_object(record, view, "podsnapshot.gke.io/v1", converted=False), None


def snapshot_uids(api: Api) -> dict[tuple[str, str], str]:
    """Every PodSnapshot's uid by (namespace, name), listed page by page."""
    uids: dict[tuple[str, str], str] = {}
    token = ""
    while True:
        page = api.json("GET", f"{SNAPSHOT_API}/podsnapshots?limit=500&continue={token}")
        for item in page["items"]:
            meta = item["metadata"]
            uids[meta["namespace"], meta["name"]] = meta["uid"]
        token = page["metadata"].get("continue") or ""
        if not token:
            return uids


def snapshot_objects(index: int, plan: Plan, pool_of: dict[str, Pool]) -> tuple[Obj, Obj]:
    """(PodSnapshot as GKE creates it, merge patch of its status): a random origin pod and its
    node (GKE's ``origin-pod`` and ``origin-node``); 19 in 20 Ready (seeded by ``index``)."""
    _, name, template, node, ready, _, snapshot = _pick(index, plan)
    annotations = {"podsnapshot.gke.io/origin-pod": name, "podsnapshot.gke.io/origin-node": node}
    obj = {
        "apiVersion": "podsnapshot.gke.io/v1",
        "kind": "PodSnapshot",
        "metadata": {
            "name": snapshot,
            "namespace": template.namespace,
            "labels": {"podsnapshot.gke.io/policy": POLICY, "model": template.model.name},
            "annotations": annotations,
        },
        "spec": {"policyName": POLICY},
    }
    taken = datetime.now(UTC) - timedelta(minutes=10 + index % 5000)
    status = {
        "conditions": [
            {
                "type": "Ready",
                "status": "True" if ready else "False",
                "reason": "Ready" if ready else "CheckpointInProgress",
                "message": "snapshot stored" if ready else "checkpoint in progress",
                "lastTransitionTime": stamp(taken + timedelta(seconds=50)),
            }
        ],
        "lastAccessTime": stamp(taken + timedelta(minutes=index % 600)),
        "observedGeneration": 1,
        "storageStatus": {
            "gcs": {"observedGCSPath": f"gs://{BUCKET}/snapshots/{template.namespace}/{snapshot}"}
        },
    }
    return obj, {"status": status}


def policy_objects(namespace: str) -> list[Obj]:
    return [
        {
            "apiVersion": "podsnapshot.gke.io/v1",
            "kind": "PodSnapshotPolicy",
            "metadata": {"name": POLICY, "namespace": namespace},
            "spec": {
                "selector": {"matchLabels": {"app": "llm"}},
                "storageConfigName": STORAGE_CONFIG,
                "snapshotScope": "whole-pod",
                "triggerConfig": {"type": "workload", "postCheckpoint": "resume"},
                "retentionConfig": {"lastAccessTimeout": "30d"},
                "snapshotGroupingRules": {
                    "groupByLabelValue": {
                        "labels": ["model"],
                        "groupRetentionPolicy": {"maxSnapshotCountPerGroup": 3},
                    }
                },
            },
        }
    ]


def run_parallel(
    label: str,
    count: int,
    make: Callable[[int], tuple[Obj, Obj | None] | None],
    api: Api,
    *,
    concurrency: int,
    deadline: float,
) -> float:
    """Create ``count`` objects (``make(i)``: object and status patch, or None for none) with
    ``concurrency`` threads; progress every 5 s; returns the seconds it took."""
    tickets = itertools.count()
    done = itertools.count(1)
    finished = [0]
    errors: list[str] = []
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            index = next(tickets)
            if index >= count:
                return
            try:
                made = make(index)
                if made is not None:
                    create(api, *made)
            except (BenchError, urllib3.exceptions.HTTPError) as error:
                errors.append(str(error))
                stop.set()
                return
            finished[0] = next(done)

    started = time.monotonic()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    last = started
    try:
        while any(thread.is_alive() for thread in threads):
            time.sleep(0.2)  # short sleeps: Ctrl-C is seen
            now = time.monotonic()
            if now > deadline:
                raise BenchError(f"--timeout reached while creating {label}")
            if now - last >= 5:
                last = now
                rate = finished[0] / (now - started)
                print(f"    {label}: {finished[0]}/{count} ({rate:.0f}/s)", flush=True)
    finally:
        stop.set()
    if errors:
        raise BenchError(f"creating {label}: {errors[0]}")
    return time.monotonic() - started


def set_up_base(plane: ControlPlane, api: Api, namespaces: Sequence[str]) -> None:
    """CRDs, RuntimeClass, storage config, ``namespaces`` with a policy each; then stop
    kube-controller-manager once every namespace has its ``default`` ServiceAccount."""
    install_crds(api)
    create(api, {
        "apiVersion": "podsnapshot.gke.io/v1",
        "kind": "PodSnapshotStorageConfig",
        "metadata": {"name": STORAGE_CONFIG},
        "spec": {"snapshotStorageConfig": {"gcs": {"bucket": BUCKET, "path": "snapshots"}}},
    })  # fmt: skip
    for index, namespace in enumerate(namespaces):
        labels = {"team": f"team-{index % 7}"}
        if index % 5 == 4:
            labels[PREFIX + "enforcement"] = "warn"
        metadata = {"name": namespace, "labels": labels}
        create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata})
        for obj in policy_objects(namespace):
            create(api, obj)
    wait_service_accounts(api, list(namespaces))
    stop_named(plane, "kube-controller-manager")
