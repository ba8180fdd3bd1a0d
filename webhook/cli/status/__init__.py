"""``snapready status [-n NS | -A]``: snapshots, checkpoints, predictions and outcomes per policy.

Read straight from the API server (``cluster.api.snapshot_reader``), computed with the functions the
webhook and the leader use (``snapshots.outcomes``: ``snapshot_state``, ``stale_groups``,
``decide``, ``startup_seconds``; ``snapshots.checkpoints``;
``cluster.api.stamped_pods.pod_record``), so it agrees with the annotations written at admission and
with the leader's Events and metrics. Per policy: snapshot counts by state (``ready``,
``not_ready``, ``stale``: Ready but its origin pool now runs another node version or GPU driver,
``awaiting``: the checkpoint is uploading, ``failed``: GKE reported the checkpoint failed), the
newest snapshot (age, origin node version, last access), the awaiting checkpoints (how long, stalled
past ``checkpoint.stall_seconds``) and the failed ones (GKE's message and the likely cause,
``snapshots.checkpoints.failure_hint``); the stamped pods (label ``<prefix>selected``, annotation
``<prefix>policy``) by ``<prefix>restore-prediction`` with the miss reasons; over the last 24 h,
outcomes, the hit rate (``HIT_RATE``) and p50 times.

Outcomes come from GKE's evidence, never from the Ready transition (docs/gke-facts.md#section-9: a
restored pod is Ready seconds before ``PodRestored``): the outcome the leader recorded on the
pod (``<prefix>restore-outcome``), else ``decide`` on the pod's conditions, its container
statuses and GKE's ``GKEPodSnapshotting`` Events (one list with that field selector; when it is
refused a note says outcomes are decided without them) after ``outcomes.settle_seconds``. A pod
counts in the window by the time of its deciding evidence (else its Ready transition); pods not
decided yet count as ``pending`` (by their Ready transition, else their creation). Times run on
GKE's clock, from ``PodScheduled``: start-up of restored pods to ``PodRestored``, of cold pods
to ``Ready``; restored pods also show their time to Ready (the health check answered; not yet
able to serve). Then the stale groups with their note, the prunable snapshots with their
reason and what a refresh after an upgrade would do per group (``status.prune_refresh``).

Exit codes: 0 printed, 2 bad settings/kubeconfig or API server unreachable/refusing.
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from webhook.base.keys import RESTORE_REASON
from webhook.cli.common.cluster_command import FORMAT_VERSION, add_cluster_arguments, run_reader
from webhook.cli.common.entries import awaiting_entry, failed_entry, judge
from webhook.cli.common.output import age_text
from webhook.cli.status.audit import never_judged
from webhook.cli.status.prune_refresh import lifecycle_report
from webhook.cli.status.sizes import SizeReading, read_sizes, size_block
from webhook.cli.status.text import render_text
from webhook.cluster.api.snapshot_reader import (
    Live,
    read_gke_events,
    read_live,
    read_storage_configs,
)
from webhook.cluster.api.stamped_pods import pod_record
from webhook.snapshots.config_refs import config_changes
from webhook.snapshots.evidence import events_of
from webhook.snapshots.outcomes import (
    OUTCOMES,
    RESTORED_OUTCOMES,
    ready_seconds,
    restore_seconds,
    snapshot_state,
    stale_groups,
    startup_seconds,
)
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.views import SnapshotView, parse_time

if TYPE_CHECKING:
    from webhook.base.config import Settings
    from webhook.cluster.api.client import Connection
    from webhook.snapshots.outcomes import Verdict

WINDOW = timedelta(hours=24)
HIT_RATE = (
    "(restored + restored_unexpected) / (restored + restored_unexpected + missed + "
    "restore_failed + cold_expected)"
)
"""Pods restored, among the pods that started while a Ready snapshot existed or was predicted;
``restore_failed`` (a restore was attempted and crashed: the pod never served) counts against
it; ``cold_first`` (no snapshot yet) and pending pods are left out."""
DENOMINATOR = ("restored", "restored_unexpected", "missed", "restore_failed", "cold_expected")
COLD = ("missed", "cold_expected", "cold_first")
"""Outcomes of pods that started cold (their start-up runs to Ready); ``restore_failed`` pods
never served and have no start-up time."""


def register(subparsers: Any) -> None:
    """Add the ``status`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "status", help="snapshots, restore predictions and outcomes per PodSnapshotPolicy"
    )
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace", help="namespace (default: the kubeconfig's)")
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    parser.add_argument(
        "--sizes",
        action="store_true",
        help="each snapshot's bytes in its bucket and totals per policy (lists GCS objects)",
    )
    add_cluster_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Read the cluster and print the report; 0, or 2 with one ``snapready: ...`` line."""

    def read(connection: Connection, settings: Settings) -> tuple[dict[str, Any], list[str]]:
        namespace = None if args.all_namespaces else (args.namespace or connection.namespace)
        live = read_live(connection.transport, namespace, settings)
        page = settings.source.list_page_size
        live.events = read_gke_events(connection.transport, namespace, page, live.notes)
        sizes = None
        if args.sizes:  # no storage configs read, no GCS call without it
            from webhook.cluster.gcs_usage import UsageReader  # noqa: PLC0415

            configs = read_storage_configs(connection.transport, page, live.notes)
            sizes = read_sizes(
                live,
                configs,
                UsageReader(settings.storage),
                settings,
                lambda view: snapshot_state(view, live.pools, live.configs),
            )
            live.notes.extend(sizes.notes)
        audit = never_judged(connection.transport, live, settings)
        report = build_report(live, settings, now=datetime.now(UTC), sizes=sizes, audit=audit)
        return report, live.notes

    return run_reader(args, read, render_text)


def build_report(
    live: Live,
    settings: Settings,
    *,
    now: datetime,
    sizes: SizeReading | None = None,
    audit: dict[tuple[str, str], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The JSON document (docs/concepts/snapshots.md); ``now`` anchors ages and the 24 h window;
    with ``sizes`` (``--sizes``) a ``sizes`` block per policy and in total (``status.sizes``);
    with ``audit`` (``status.audit.never_judged``) each live policy's ``audit`` block."""
    prefix = settings.prefix
    pods = [
        (record, _reason(obj, prefix)) for obj in live.pods if (record := pod_record(obj, prefix))
    ]
    judged = [(record, _judged(record, live, now, settings)) for record, _ in pods]
    keys = {(p.namespace, p.name) for p in live.policies}
    for record, _ in pods:
        keys |= {(record.namespace, name) for name in _policy_names(record)}
    scopes = {(p.namespace, p.name): p.scope for p in live.policies}
    stall = settings.checkpoint.stall_seconds
    ungrouped = {(p.namespace, p.name) for p in live.policies if not p.grouping_labels}
    entries = []
    for namespace, name in sorted(keys):
        mine = [
            (r, why) for r, why in pods if r.namespace == namespace and name in _policy_names(r)
        ]
        decided = [
            (r, v) for r, v in judged if r.namespace == namespace and name in _policy_names(r)
        ]
        views = live.index.of_policy(namespace, name)
        entries.append(
            {
                "namespace": namespace,
                "name": name,
                "exists": (namespace, name) in scopes,
                "scope": scopes.get((namespace, name)),
                "snapshots": snapshot_summary(views, live, now, stall_seconds=stall),
                "pods": prediction_summary(mine),
                "last24h": recent_summary(decided, now),
                "sharedWorkloads": shared_workloads([r for r, _ in mine])
                if (namespace, name) in ungrouped
                else [],
                "audit": (audit or {}).get((namespace, name)),
            }
        )
        if sizes is not None:
            entries[-1]["sizes"] = size_block(
                [sizes.entries[namespace, v.name] for v in live.index.of_policy(namespace, name)]
            )
    extra: dict[str, Any] = {}
    if sizes is not None:
        every = size_block(list(sizes.entries.values()))
        del every["snapshots"]  # listed per policy
        extra["sizes"] = {"prefixTemplate": sizes.template, **every}
    return {
        **extra,
        "version": FORMAT_VERSION,
        "namespace": live.namespace,
        "generatedAt": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "windowHours": int(WINDOW.total_seconds() // 3600),
        "hitRateDefinition": HIT_RATE,
        "settleSeconds": settings.outcomes.settle_seconds,
        "stallSeconds": stall,
        "gkeEventsRead": live.events is not None,
        "policies": entries,
        "last24h": recent_summary(judged, now),
        "stale": [
            {**_stale_key(group), "snapshots": list(group.snapshots), "note": group.note()}
            for group in stale_groups(live.snapshots, live.pools)
        ],
        "lifecycle": lifecycle_report(live, settings, now),
        "notes": list(live.notes),
    }


def _judged(record: PodRecord, live: Live, now: datetime, settings: Settings) -> Verdict | None:
    events = events_of(live.events or {}, record.namespace, record.name, record.uid)
    verdict, _ = judge(record, events, now=now, settle_seconds=settings.outcomes.settle_seconds)
    return verdict


def shared_workloads(records: list[PodRecord]) -> list[str]:
    """``cross-workload`` in ``status``: the workloads (``Kind name``, sorted) of an ungrouped
    policy's stamped pods when there are two or more (they restore each other's snapshots:
    docs/gke-facts.md#section-9); empty otherwise."""
    found = sorted({r.owner.text() if r.owner is not None else f"Pod {r.name}" for r in records})
    return found if len(found) > 1 else []


def _stale_key(group: Any) -> dict[str, Any]:
    names = ("namespace", "policy", "pool", "what", "old", "new")
    return dict(zip(names, group.key, strict=True))


def _reason(obj: dict[str, Any], prefix: str) -> str | None:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(prefix + RESTORE_REASON)
    return value if isinstance(value, str) else None


def _policy_names(record: PodRecord) -> list[str]:
    return [name for name in (record.policy or "").split(",") if name]


def snapshot_summary(
    views: Iterable[SnapshotView], live: Live, now: datetime, *, stall_seconds: float
) -> dict[str, Any]:
    """Counts by ``snapshot_state``, the newest snapshot (``views`` newest first), and the
    awaiting (with ``stalled`` past ``stall_seconds``) and failed checkpoints, newest first."""
    views = list(views)
    states = Counter(snapshot_state(view, live.pools, live.configs) for view in views)
    newest: dict[str, Any] | None = None
    if views:
        view = views[0]
        created = parse_time(view.created)
        age = (now - created).total_seconds() if created is not None else None
        node = view.origin.node if view.origin is not None else {}
        newest = {
            "name": view.name,
            "state": snapshot_state(view, live.pools, live.configs),
            "created": view.created or None,
            "ageSeconds": round(age) if age is not None else None,
            "age": age_text(age),
            "originVersion": node.get("version"),
            "originPool": node.get("pool"),
            "lastAccess": view.last_access,
        }
    return {
        "total": len(views),
        "ready": states["ready"],
        "notReady": states["not_ready"],
        "stale": states["stale"],
        "staleConfig": states["stale-config"],
        "awaiting": states["awaiting"],
        "failed": states["failed"],
        "newest": newest,
        "awaitingCheckpoints": [
            awaiting_entry(v, now, stall_seconds) for v in views if v.checkpoint == "awaiting"
        ],
        "failedCheckpoints": [failed_entry(v) for v in views if v.checkpoint == "failed"],
        "staleConfigSnapshots": [
            {"name": v.name, "changes": [c.text() for c in changes]}
            for v in views
            if (changes := config_changes(v, live.configs))
        ],
    }


def prediction_summary(pods: list[tuple[PodRecord, str | None]]) -> dict[str, Any]:
    """Stamped pods by ``<prefix>restore-prediction`` (``unrecorded``: none written, e.g. file
    mode) and the miss reasons with counts, most frequent first."""
    counts = {"hit": 0, "miss": 0, "none": 0, "unrecorded": 0}
    reasons: Counter[str] = Counter()
    for record, reason in pods:
        key = record.prediction if record.prediction in counts else "unrecorded"
        counts[key] += 1
        if key == "miss":
            reasons[reason or "(no reason recorded)"] += 1
    ordered = sorted(reasons.items(), key=lambda item: (-item[1], item[0]))
    return {
        "stamped": len(pods),
        "predictions": counts,
        "missReasons": [{"reason": text, "count": count} for text, count in ordered],
    }


def _p50(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def recent_summary(
    judged: Iterable[tuple[PodRecord, Verdict | None]], now: datetime
) -> dict[str, Any]:
    """Outcomes of the pods decided within ``WINDOW`` of ``now`` (by ``Verdict.at``, else the
    Ready transition), the pods still pending (by Ready, else creation), the hit rate
    (``HIT_RATE``, None without a denominator) and p50 seconds from ``PodScheduled``: start-up
    restored (to ``PodRestored``) vs cold (to ``Ready``), restored pods to ``PodRestored`` and
    to ``Ready``."""
    since = now - WINDOW
    outcomes: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
    pending = 0
    times: dict[str, list[float]] = {"restored": [], "cold": [], "restore": [], "ready": []}
    for record, verdict in judged:
        if verdict is None:
            started = parse_time(record.ready_at) or parse_time(record.created)
            pending += int(started is not None and started >= since)
            continue
        at = verdict.at or parse_time(record.ready_at)
        if at is None or at < since:
            continue
        outcomes[verdict.outcome] += 1
        seconds = startup_seconds(record, verdict)
        if verdict.outcome in RESTORED_OUTCOMES:
            _add(times["restored"], seconds)
            _add(times["restore"], restore_seconds(record, verdict))
            _add(times["ready"], ready_seconds(record))
        elif verdict.outcome in COLD:
            _add(times["cold"], seconds)
    denominator = sum(outcomes[k] for k in DENOMINATOR)
    p50 = {k: _p50(times[k]) for k in ("restored", "cold")}
    saving = (
        round(p50["cold"] - p50["restored"], 1)
        if p50["cold"] is not None and p50["restored"] is not None
        else None
    )
    restored = sum(outcomes[k] for k in RESTORED_OUTCOMES)
    return {
        "pods": sum(outcomes.values()),
        "outcomes": outcomes,
        "pending": pending,
        "hitRate": round(restored / denominator, 4) if denominator else None,
        "hitRateOf": denominator,
        "p50StartupSeconds": p50,
        "p50RestoreSeconds": _p50(times["restore"]),
        "p50RestoredReadySeconds": _p50(times["ready"]),
        "savingSeconds": saving,
    }


def _add(values: list[float], seconds: float | None) -> None:
    if seconds is not None:
        values.append(seconds)
