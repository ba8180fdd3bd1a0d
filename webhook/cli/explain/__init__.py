"""``snapready explain POD [-n NS]``: why a pod will (or did not) restore from a snapshot.

GETs the pod and reads its namespace's PodSnapshotPolicies and PodSnapshots and the cluster's
Nodes (``cluster.api.snapshot_reader``), then answers with the admission-time functions: the
selecting policies (``PolicyIndex.select``), the prediction recorded at admission (the
``<prefix>restore-*`` annotations), a fresh ``pod.restore.predict`` from the live objects
(fingerprint: the pod's ``<prefix>spec-hash``, else ``pod.distill.fingerprint`` of the live
object; fields: ``pod.fields.field_digests``; pins: ``pod.node_pins.node_selection``), every
candidate snapshot (``pod.restore.candidates``) with what differs and how to fix it
(``explain.hints``).

Then what happened, on GKE's clock: the pod's timeline (created, ``PodScheduled``, ``Ready``,
``PodRestored``, and GKE's ``GKEPodSnapshotting`` Events about it with their messages, listed
with the field selector ``reason=GKEPodSnapshotting,involvedObject.name=<pod>``; a refused list
is a note), a restore crash in its container statuses, and the outcome (``common.entries.judge``:
the one the leader recorded, else ``snapshots.outcomes.decide`` now; ``pending`` with what it waits
for; null for a pod snapready did not stamp at admission, label ``<prefix>selected``), with the
seconds from ``PodScheduled`` to ``PodRestored`` and to ``Ready``. When the pod
is the origin of PodSnapshots, their checkpoints: awaiting (stalled past
``checkpoint.stall_seconds``), succeeded, or failed with GKE's message and the likely cause
(``snapshots.checkpoints.failure_hint``).

Exit codes: 0 explained, 2 bad input, pod not found, or API server unreachable/refusing.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from webhook.base.keys import (
    POLICY,
    RESTORE_PREDICTION,
    RESTORE_REASON,
    RESTORE_SNAPSHOT,
    SELECTED,
    SPEC_HASH,
)
from webhook.base.rule_ids import INIT_EMPTYDIR
from webhook.base.types import RawObject
from webhook.cli.common.cluster_command import FORMAT_VERSION, add_cluster_arguments, run_reader
from webhook.cli.common.entries import awaiting_entry, failed_entry, judge
from webhook.cli.explain.hints import explain_differences
from webhook.cli.explain.text import render_text
from webhook.cluster.api.snapshot_reader import Live, read_gke_events, read_live, read_pod
from webhook.cluster.api.stamped_pods import pod_record
from webhook.kube.matching import PolicyIndex
from webhook.pod.distill import fingerprint
from webhook.pod.emptydirs import restore_blocker
from webhook.pod.fields import field_digests
from webhook.pod.node_pins import node_selection
from webhook.pod.pools import MachineFit, machine_fit
from webhook.pod.resources import requests_gpus
from webhook.pod.restore import PodFacts, candidates, predict
from webhook.pod.tolerations import tolerations_of
from webhook.snapshots.checkpoints import checkpoint_seconds
from webhook.snapshots.config_refs import config_changes
from webhook.snapshots.evidence import GkeEvent, events_of
from webhook.snapshots.outcomes import (
    RESTORED_OUTCOMES,
    Verdict,
    decide,
    ready_seconds,
    restore_seconds,
    snapshot_state,
    startup_seconds,
)
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.state import NodePoolFacts
from webhook.snapshots.views import SnapshotView, parse_time

if TYPE_CHECKING:
    from webhook.base.config import Settings
    from webhook.cluster.api.client import Connection

RECORDED = (
    RESTORE_PREDICTION,
    RESTORE_SNAPSHOT,
    RESTORE_REASON,
    SPEC_HASH,
    POLICY,
)


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
        live = read_live(connection.transport, namespace, settings, pods=False, classes=True)
        page = settings.source.list_page_size
        live.events = read_gke_events(
            connection.transport, namespace, page, live.notes, pod=args.pod
        )
        return explain(pod, live, settings, now=datetime.now(UTC)), live.notes

    return run_reader(args, read, render_text)


def _strings(value: Any) -> dict[str, str]:
    return {k: v for k, v in value.items() if isinstance(v, str)} if isinstance(value, dict) else {}


def pod_facts(pod: RawObject, live: Live, prefix: str) -> tuple[PodFacts, str]:
    """The live pod as the prediction reads it, and where its fingerprint came from
    (``annotation`` or ``computed``)."""
    metadata = pod.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "")
    labels, annotations = _strings(metadata.get("labels")), _strings(metadata.get("annotations"))
    stamped = annotations.get(prefix + SPEC_HASH)
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
        blocker=lambda: restore_blocker(spec, annotations),
        gpus=requests_gpus(spec),
        tolerations=tolerations_of(spec),
    )
    return facts, "annotation" if stamped else "computed"


def explain(pod: RawObject, live: Live, settings: Settings, *, now: datetime) -> dict[str, Any]:
    """The JSON document (docs/concepts/snapshots.md); ``now`` decides pending outcomes and ages."""
    prefix = settings.prefix
    facts, hash_source = pod_facts(pod, live, prefix)
    metadata, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    annotations = facts.annotations
    rootfs_only = bool(facts.policies) and all(p.scope == "rootfs-only" for p in facts.policies)
    recorded = {key: annotations.get(prefix + key) for key in RECORDED}
    landing = facts.landing(live.pools)
    fit = machine_fit(
        facts.node_selection(), landing, live.compute_classes, live.pools, gpu=facts.uses_gpus()
    )
    prediction: dict[str, Any] | None = None
    found: list[SnapshotView] = []
    why_none = "no PodSnapshotPolicy of the namespace selects this pod"
    if facts.policies:
        blockers = INIT_EMPTYDIR not in settings.rules.disabled
        result = predict(
            facts,
            live.index,
            live.pools,
            rootfs_only=rootfs_only,
            blockers=blockers,
            compute_classes=live.compute_classes,
        )
        hit = live.index.named(facts.namespace, result.snapshot) if result.snapshot else None
        prediction = {
            "outcome": result.outcome,
            "snapshot": result.snapshot,
            "reason": result.reason,
            "fields": list(result.fields),
            "candidates": result.candidates,
            "restoreFails": result.refusal.blocker if result.refusal is not None else None,
            "restoreFailsFrom": result.refusal.by if result.refusal is not None else None,
            # A hit restores the configuration its origin pod read (rule ``stale-config``).
            "staleConfig": [c.text() for c in config_changes(hit, live.configs)]
            if hit is not None and result.outcome == "hit"
            else [],
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
        "candidates": [_candidate(facts, v, landing, rootfs_only, spec, fit=fit) for v in found],
        "noCandidates": None if found else why_none,
        **_history(pod, live, settings, now),
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
    *,
    fit: MachineFit,
) -> dict[str, Any]:

    entry: dict[str, Any] = {
        "snapshot": view.name,
        "policy": view.policy,
        "created": view.created or None,
        "originPod": view.origin_pod,
        "originNode": dict(view.origin.node) if view.origin is not None else None,
        "originNodeName": view.origin_node,
        # gVisor cannot restore any pod from it (its record): "matches" stays the comparison's.
        "restoreBlocker": view.origin.blocker if view.origin is not None else None,
    }
    if view.origin is None or not view.origin.spec_hash:  # unknown origin: nothing to compare
        return {**entry, "matches": None, "differences": []}
    found = explain_differences(
        facts, view.origin, landing, rootfs_only=rootfs_only, spec=spec, fit=fit
    )
    return {**entry, "matches": not found, "differences": found}


def _history(pod: RawObject, live: Live, settings: Settings, now: datetime) -> dict[str, Any]:
    """``timeline``, ``outcome`` and ``checkpoints`` (the pod's own snapshots)."""
    record = pod_record(pod, settings.prefix)
    name = (pod.get("metadata") or {}).get("name")
    taken = [v for v in live.snapshots if v.origin_pod is not None and v.origin_pod == name]
    stall = settings.checkpoint.stall_seconds
    checkpoints = [_checkpoint(v, live, now, stall) for v in taken]
    if record is None:
        return {"timeline": [], "outcome": None, "checkpoints": checkpoints}
    events = events_of(live.events or {}, record.namespace, record.name, record.uid)
    if record.labels.get(settings.prefix + SELECTED) != "true":  # not stamped at admission:
        return {"timeline": timeline(record, events), "outcome": None, "checkpoints": checkpoints}
    settle = settings.outcomes.settle_seconds  # the leader decides no outcome for it either
    verdict, recorded = judge(record, events, now=now, settle_seconds=settle)
    return {
        "timeline": timeline(record, events),
        "outcome": _outcome(record, events, verdict, recorded, now=now, settle_seconds=settle),
        "checkpoints": checkpoints,
    }


def timeline(record: PodRecord, events: tuple[GkeEvent, ...]) -> list[dict[str, Any]]:
    """What happened to the pod, oldest first (unknown times last): created, scheduled, Ready,
    PodRestored and GKE's events with their messages."""
    entries: list[dict[str, Any]] = [
        {"time": record.created or None, "what": "created", "type": None, "message": None},
        {"time": record.scheduled_at, "what": "PodScheduled", "type": None, "message": None},
        {"time": record.ready_at, "what": "Ready", "type": None, "message": None},
        {
            "time": record.restored_at,
            "what": "PodRestored",
            "type": None,
            "message": record.restored_message or None,
        },
    ]
    entries = [e for e in entries if e["time"] is not None]
    for event in events:
        entries.append(
            {
                "time": event.time or None,
                "what": f"GKE event ({event.kind})",
                "type": event.type,
                "message": event.message,
            }
        )
    order = {"created": 0, "PodScheduled": 1, "Ready": 2, "PodRestored": 3}
    return sorted(
        entries, key=lambda e: (e["time"] is None, e["time"] or "", order.get(e["what"], 4))
    )


def _outcome(
    record: PodRecord,
    events: tuple[GkeEvent, ...],
    verdict: Verdict | None,
    recorded: bool,
    *,
    now: datetime,
    settle_seconds: float,
) -> dict[str, Any]:
    """The outcome (``pending`` with what it waits for) and the pod's times from PodScheduled."""
    at = verdict.at if verdict is not None else None
    # restore time runs to PodRestored (or GKE's restore Event), never to a fallback Event
    restored = verdict is not None and verdict.outcome in RESTORED_OUTCOMES
    return {
        "outcome": verdict.outcome if verdict is not None else "pending",
        "recorded": recorded,
        "evidence": verdict.evidence if verdict is not None else None,
        "decidedAt": at.strftime("%Y-%m-%dT%H:%M:%SZ") if at is not None else None,
        "gkeReason": verdict.gke_reason if verdict is not None else None,
        "snapshot": verdict.snapshot if verdict is not None else None,
        "restoreFailure": record.restore_failure,
        "waitingFor": (
            None if verdict is not None else waiting_for(record, events, now, settle_seconds)
        ),
        "scheduledAt": record.scheduled_at,
        "readyAt": record.ready_at,
        "restoredAt": record.restored_at,
        "startupSeconds": startup_seconds(record, verdict) if verdict is not None else None,
        "restoreSeconds": restore_seconds(record, verdict if restored else None),
        "readySeconds": ready_seconds(record),
        "restored": record.restored,
        "restoredMessage": record.restored_message or None,
    }


def waiting_for(
    record: PodRecord, events: tuple[GkeEvent, ...], now: datetime, settle_seconds: float
) -> str:
    """What a pending pod waits for, and what it will count as if nothing comes."""
    ready = parse_time(record.ready_at)
    if ready is None:
        return "Ready, PodRestored, GKE's restore event or a restore crash"
    due = ready + timedelta(seconds=settle_seconds)
    then = decide(record, events, now=due, settle_seconds=settle_seconds)
    left = max(0.0, (due - now).total_seconds())
    would = then.outcome if then is not None else "undecided"
    if any(e.kind == "restored" for e in events):
        return (
            f"PodRestored (GKE's event says it restored; counted {would} in {left:.0f} s, "
            f"outcomes.settle_seconds {settle_seconds:g} s after Ready, without it)"
        )
    return (
        f"PodRestored or GKE's event: without either, counted {would} (started cold) in "
        f"{left:.0f} s (outcomes.settle_seconds {settle_seconds:g} s after Ready)"
    )


def _checkpoint(
    view: SnapshotView, live: Live, now: datetime, stall_seconds: float
) -> dict[str, Any]:
    """A snapshot taken from this pod: its checkpoint's state, GKE's message, the likely cause."""
    entry: dict[str, Any] = {
        "snapshot": view.name,
        "policy": view.policy,
        "state": snapshot_state(view, live.pools, live.configs),
        "checkpoint": view.checkpoint or None,
        "message": view.checkpoint_message or None,
        "checkpointSeconds": checkpoint_seconds(view),
        "awaitingSeconds": None,
        "stalled": False,
        "hint": None,
    }
    if view.checkpoint == "awaiting":
        awaiting = awaiting_entry(view, now, stall_seconds)
        entry.update(awaitingSeconds=awaiting["awaitingSeconds"], stalled=awaiting["stalled"])
    elif view.checkpoint == "failed":
        entry["hint"] = failed_entry(view)["hint"]
    return entry
