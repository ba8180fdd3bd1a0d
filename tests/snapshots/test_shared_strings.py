"""The caches keep each repeated string once (``webhook.base.types.shared``).

Replicas of one template, and the PodSnapshots and SnapshotRecords taken from them, repeat
their namespace, labels, fingerprint, field digests, node facts and policy; the nodes of a pool
repeat their labels and version. Each object decoded from the API server brings its own copies;
``pod_record``, ``snapshot_view``, ``record_view`` and ``node_view`` keep one copy for all
(``make bench-scale``: RSS at 2,000 nodes, 20,000 pods and 5,000 PodSnapshots was within a few
MiB of its 250 MiB target). Each test decodes two objects from separate JSON documents, as two
watch events are, and checks the values are the same objects, and equal to what was sent.
"""

from __future__ import annotations

from typing import Any

import orjson

from webhook.base import types
from webhook.base.types import SHARED_MAX_CHARS, SHARED_MAX_ENTRIES, shared
from webhook.cluster.api.stamped_pods import pod_record
from webhook.snapshots.facts import node_view
from webhook.snapshots.records import record_object, record_view
from webhook.snapshots.views import OriginRecord, SnapshotView, WorkloadRef, snapshot_view

PREFIX = "snapready.io/"
HASH = "v1:sha256:" + "ab" * 32


def decoded(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` through JSON, as a watch event brings it (fresh strings every time)."""
    value: dict[str, Any] = orjson.loads(orjson.dumps(obj))
    return value


def replica(name: str) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "team-a",
            "name": name,
            "uid": f"uid-{name}",
            "labels": {"app": "llm-server", "model": "llama-3-8b-instruct"},
            "annotations": {PREFIX + "spec-hash": HASH, PREFIX + "policy": "llm-policy"},
            "ownerReferences": [
                {"kind": "ReplicaSet", "name": "llm-7d9f8c6b5", "uid": "rs-1", "controller": True}
            ],
        },
        "spec": {"nodeName": "gke-l4-pool-node-1"},
        "status": {"phase": "Running"},
    }


def test_two_replicas_pod_records_share_their_repeated_strings() -> None:
    first, second = (pod_record(decoded(replica(n)), PREFIX) for n in ("llm-a", "llm-b"))
    assert first is not None and second is not None
    assert (first.namespace, first.spec_hash, first.policy) == ("team-a", HASH, "llm-policy")
    assert first.labels == {"app": "llm-server", "model": "llama-3-8b-instruct"}
    assert first.namespace is second.namespace
    assert first.spec_hash is second.spec_hash
    assert first.policy is second.policy
    assert first.node_name is second.node_name
    assert first.phase is second.phase
    assert all(first.labels[key] is second.labels[key] for key in first.labels)
    assert first.owner is not None and second.owner is not None
    assert first.owner.name is second.owner.name
    assert first.name is not second.name  # per pod: left alone
    assert not hasattr(first, "__dict__")  # slots: no per-record dict either


def snapshot(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A PodSnapshot and its SnapshotRecord, taken from a replica of the same template."""
    view = SnapshotView("team-a", name, "llm-policy", "llm-a", True, "", "", uid=f"uid-{name}")
    record = OriginRecord(
        pod="llm-a",
        spec_hash=HASH,
        fields={"spec.containers[0].image": "1f2e3d4c5b6a", "spec.dnsPolicy": "0a1b2c3d4e5f"},
        node={"pool": "l4", "version": "1.35.3-gke.1234000", "gpuDriver": "latest"},
        group={"model": "llama-3-8b-instruct"},
        workload=WorkloadRef("Deployment", "llm", "d-1"),
        node_name="gke-l4-pool-node-1",
        node_from="gke",
    )
    podsnapshot = {
        "metadata": {
            "namespace": "team-a",
            "name": name,
            "uid": f"uid-{name}",
            "annotations": {"podsnapshot.gke.io/origin-pod": "llm-a"},
        },
        "spec": {"policyName": "llm-policy"},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]},
    }
    return podsnapshot, record_object(record, view, "podsnapshot.gke.io/v1", converted=False)


def test_two_snapshots_and_their_records_share_their_repeated_strings() -> None:
    (snap_a, record_a), (snap_b, record_b) = snapshot("snap-a"), snapshot("snap-b")
    view_a, view_b = (snapshot_view(decoded(s), origin_annotation=PREFIX + "origin")
                      for s in (snap_a, snap_b))  # fmt: skip
    assert view_a is not None and view_b is not None
    assert (view_a.namespace, view_a.policy, view_a.origin_pod) == ("team-a", "llm-policy", "llm-a")
    assert view_a.namespace is view_b.namespace
    assert view_a.policy is view_b.policy
    assert view_a.origin_pod is view_b.origin_pod
    assert view_a.reason is view_b.reason
    assert view_a.name is not view_b.name
    seen_a, seen_b = record_view(decoded(record_a)), record_view(decoded(record_b))
    assert seen_a is not None and seen_b is not None
    a, b = seen_a.record, seen_b.record
    assert a.fields == {
        "spec.containers[0].image": "1f2e3d4c5b6a",
        "spec.dnsPolicy": "0a1b2c3d4e5f",
    }
    assert a.spec_hash is b.spec_hash == HASH
    for path, digest in a.fields.items():
        other = next(key for key in b.fields if key == path)
        assert other is path and b.fields[path] is digest
    assert all(a.node[key] is b.node[key] for key in a.node)
    assert all(a.group[key] is b.group[key] for key in a.group)
    assert a.node_name is b.node_name


def test_shared_leaves_none_subclasses_and_long_strings_alone() -> None:
    class Tagged(str):
        pass

    tagged = Tagged("llm-policy")
    assert shared(None) is None
    assert shared(tagged) is tagged  # never decoded from JSON: kept as it is
    first = "".join(["llm-", "policy"])
    assert shared(first) is shared("".join(["llm-", "policy"])) == "llm-policy"
    long = "x" * (SHARED_MAX_CHARS + 1)
    assert shared(long) is long
    assert shared("".join(["x"] * (SHARED_MAX_CHARS + 1))) is not long  # not held


def test_the_table_is_bounded_whatever_values_a_tenant_invents() -> None:
    """A tenant relabelling a selected pod again and again brings new values every time: the
    table never holds more than ``SHARED_MAX_ENTRIES`` (``sys.intern`` would keep them all for
    ever on CPython 3.12.0-3.12.6), and what the caches hold stays shared after a reset."""
    kept = shared("".join(["team-", "a"]))
    for number in range(3 * SHARED_MAX_ENTRIES):
        shared(f"value-{number}")
        assert len(types._SHARED) <= SHARED_MAX_ENTRIES
    again = shared("".join(["team-", "a"]))
    assert again == kept
    assert shared("".join(["team-", "a"])) is again  # shared again from then on


def test_two_nodes_of_a_pool_share_their_kept_values() -> None:
    def node(name: str) -> dict[str, Any]:
        return {
            "metadata": {
                "name": name,
                "labels": {
                    "cloud.google.com/gke-nodepool": "l4-pool",
                    "node.kubernetes.io/instance-type": "g2-standard-48",
                    "cloud.google.com/gke-accelerator": "nvidia-l4",
                },
            },
            "status": {"nodeInfo": {"kubeletVersion": "v1.35.3-gke.1234000"}},
        }

    first, second = (node_view(decoded(node(n))) for n in ("node-1", "node-2"))
    assert first is not None and second is not None
    assert (first.pool, first.version) == ("l4-pool", "1.35.3-gke.1234000")
    assert first.label("cloud.google.com/machine-family") == "g2"  # derived from the type
    assert first.pool is second.pool
    assert first.version is second.version
    assert all(a[1] is b[1] for a, b in zip(first.labels, second.labels, strict=True))
