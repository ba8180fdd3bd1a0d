"""``snapready explain POD [-n NS]``: why a pod will (or did not) restore from a snapshot.

GETs the pod and reads its namespace's PodSnapshotPolicies and PodSnapshots and the cluster's
Nodes (``snapshots_read``), then answers with the admission-time functions: the selecting
policies (``PolicyIndex.select``), the prediction recorded at admission (the
``<prefix>restore-*`` annotations), a fresh ``pod.restore.predict`` from the live objects
(fingerprint: the pod's ``<prefix>spec-hash``, else ``pod.distill.fingerprint`` of the live
object; fields: ``pod.fields.field_digests``; pins: ``pod.node_pins.node_selection``), every
candidate snapshot (``pod.restore.candidates``) with what differs and how to fix it
(``explain_hints``), and, once the pod is Ready, its outcome (``kube.outcomes.outcome_of``) and
start-up time.

Exit codes: 0 explained, 2 bad input, pod not found, or API server unreachable/refusing.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from webhook.base.types import RawObject
from webhook.cli.explain_hints import explain_differences
from webhook.cli.explain_text import render_text
from webhook.cli.snapshots_read import (
    FORMAT_VERSION,
    Live,
    add_cluster_arguments,
    read_live,
    read_pod,
    run_reader,
)
from webhook.cluster.records import pod_record
from webhook.kube.matching import PolicyIndex
from webhook.kube.outcomes import outcome_of, startup_seconds
from webhook.kube.snapshots import SnapshotView
from webhook.kube.state import NodePoolFacts
from webhook.pod.distill import fingerprint
from webhook.pod.fields import field_digests
from webhook.pod.node_pins import node_selection
from webhook.pod.restore import PodFacts, candidates, landing_pools, predict

if TYPE_CHECKING:
    from webhook.base.config import Settings
    from webhook.cluster.client import Connection

RECORDED = ("restore-prediction", "restore-snapshot", "restore-reason", "spec-hash", "policy")


def register(subparsers: Any) -> None:
    """Add the ``explain`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "explain", help="why a pod will (or did not) restore from a snapshot"
    )
    parser.add_argument("pod", metavar="POD", help="pod name")
    parser.add_argument("-n", "--namespace", help="namespace (default: the kubeconfig's)")
    add_cluster_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Read the pod and its namespace, print the explanation; 0, or 2 with one line."""

    def read(connection: Connection, settings: Settings) -> tuple[dict[str, Any], list[str]]:
        namespace = args.namespace or connection.namespace
        pod = read_pod(connection.transport, namespace, args.pod)
        live = read_live(connection.transport, namespace, settings, pods=False)
        return explain(pod, live, settings.prefix), live.notes

    return run_reader(args, read, render_text)


def _strings(value: Any) -> dict[str, str]:
    return {k: v for k, v in value.items() if isinstance(v, str)} if isinstance(value, dict) else {}


def pod_facts(pod: RawObject, live: Live, prefix: str) -> tuple[PodFacts, str]:
    """The live pod as the prediction reads it, and where its fingerprint came from
    (``annotation`` or ``computed``)."""
    metadata = pod.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "")
    labels, annotations = _strings(metadata.get("labels")), _strings(metadata.get("annotations"))
    stamped = annotations.get(prefix + "spec-hash")
    raw_spec = pod.get("spec")
    spec: RawObject = raw_spec if isinstance(raw_spec, dict) else {}
    facts = PodFacts(
        namespace=namespace,
        labels=labels,
        annotations=annotations,
        policies=PolicyIndex.build(live.policies).select(namespace, labels),
        spec_hash=stamped or fingerprint(pod),
        fields=field_digests(pod),
        selection=node_selection(spec, "spec"),
    )
    return facts, "annotation" if stamped else "computed"


def explain(pod: RawObject, live: Live, prefix: str) -> dict[str, Any]:
    """The JSON document (README "Snapshots")."""
    facts, hash_source = pod_facts(pod, live, prefix)
    metadata, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    annotations = facts.annotations
    rootfs_only = bool(facts.policies) and all(p.scope == "rootfs-only" for p in facts.policies)
    recorded = {key: annotations.get(prefix + key) for key in RECORDED}
    landing = landing_pools(facts.node_selection(), live.pools)
    prediction: dict[str, Any] | None = None
    found: list[SnapshotView] = []
    why_none = "no PodSnapshotPolicy of the namespace selects this pod"
    if facts.policies:
        result = predict(facts, live.index, live.pools, rootfs_only=rootfs_only)
        prediction = {
            "outcome": result.outcome,
            "snapshot": result.snapshot,
            "reason": result.reason,
            "fields": list(result.fields),
            "candidates": result.candidates,
        }
        found, why_none = candidates(facts, live.index)
    return {
        "version": FORMAT_VERSION,
        "pod": {
            "namespace": facts.namespace,
            "name": metadata.get("name"),
            "phase": (pod.get("status") or {}).get("phase"),
            "node": spec.get("nodeName"),
            "created": metadata.get("creationTimestamp"),
        },
        "policies": [{"name": p.name, "scope": p.scope} for p in facts.policies],
        "fingerprint": {"value": facts.spec_hash, "source": hash_source},
        "recorded": recorded if recorded["restore-prediction"] else None,
        "prediction": prediction,
        "landingPools": [_pool(p) for p in landing],
        "candidates": [_candidate(facts, v, landing, rootfs_only, spec) for v in found],
        "noCandidates": None if found else why_none,
        "outcome": _outcome(pod, prefix),
        "notes": list(live.notes),
    }


def _pool(facts: NodePoolFacts) -> dict[str, Any]:
    return {"name": facts.name, "versions": sorted(facts.versions), "nodes": facts.node_count}


def _candidate(
    facts: PodFacts,
    view: SnapshotView,
    landing: list[NodePoolFacts],
    rootfs_only: bool,
    spec: dict[str, Any],
) -> dict[str, Any]:

    entry: dict[str, Any] = {
        "snapshot": view.name,
        "policy": view.policy,
        "created": view.created or None,
        "originPod": view.origin_pod,
        "originNode": dict(view.origin.node) if view.origin is not None else None,
    }
    if view.origin is None or not view.origin.spec_hash:  # unknown origin: nothing to compare
        return {**entry, "matches": None, "differences": []}
    found = explain_differences(facts, view.origin, landing, rootfs_only=rootfs_only, spec=spec)
    return {**entry, "matches": not found, "differences": found}


def _outcome(pod: RawObject, prefix: str) -> dict[str, Any] | None:
    """Outcome and start-up once the pod is Ready; None before."""
    record = pod_record(pod, prefix)
    outcome = outcome_of(record) if record is not None else None
    if record is None or outcome is None:
        return None
    return {
        "outcome": outcome,
        "readyAt": record.ready_at,
        "startupSeconds": startup_seconds(record),
        "restored": record.restored,
        "restoredMessage": record.restored_message or None,
    }
