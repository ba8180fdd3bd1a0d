"""``snapready status [-n NS | -A]``: snapshots, predictions and outcomes per PodSnapshotPolicy.

Read straight from the API server (``snapshots_read``), computed with the functions the webhook
uses (``kube.outcomes``: ``snapshot_state``, ``stale_groups``, ``outcome_of``,
``startup_seconds`` on ``cluster.records.pod_record``), so it agrees with the annotations written
at admission. Per policy: snapshot counts by state (``ready``, ``not_ready``, ``stale``: Ready but
its origin pool now runs another node version or GPU driver), the newest snapshot (age, origin
node version, last access); the stamped pods (label ``<prefix>selected``, annotation
``<prefix>policy``) by ``<prefix>restore-prediction`` with the miss reasons; over the pods that
turned Ready in the last 24 h, outcomes, the hit rate (``HIT_RATE``) and p50 start-up of
restored vs cold pods. Then the stale groups with their note.

Exit codes: 0 printed, 2 bad settings/kubeconfig or API server unreachable/refusing.
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from webhook.cli.snapshots_read import (
    FORMAT_VERSION,
    Live,
    add_cluster_arguments,
    read_live,
    run_reader,
)
from webhook.cli.status_text import age_text, render_text
from webhook.cluster.records import pod_record
from webhook.kube.outcomes import (
    OUTCOMES,
    Outcome,
    outcome_of,
    parse_time,
    snapshot_state,
    stale_groups,
    startup_seconds,
)
from webhook.kube.snapshots import PodRecord, SnapshotView

if TYPE_CHECKING:
    from webhook.base.config import Settings
    from webhook.cluster.client import Connection

WINDOW = timedelta(hours=24)
HIT_RATE = (
    "(restored + restored_unexpected) / (restored + restored_unexpected + missed + cold_expected)"
)
"""Pods restored as predicted, among the pods that started while a Ready snapshot existed or was
predicted; ``cold_first`` (no snapshot yet) is left out."""
RESTORED: tuple[Outcome, ...] = ("restored", "restored_unexpected")
COLD = ("missed", "cold_expected", "cold_first")


def register(subparsers: Any) -> None:
    """Add the ``status`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "status", help="snapshots, restore predictions and outcomes per PodSnapshotPolicy"
    )
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace", help="namespace (default: the kubeconfig's)")
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    add_cluster_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Read the cluster and print the report; 0, or 2 with one ``snapready: ...`` line."""

    def read(connection: Connection, settings: Settings) -> tuple[dict[str, Any], list[str]]:
        namespace = None if args.all_namespaces else (args.namespace or connection.namespace)
        live = read_live(connection.transport, namespace, settings)
        return build_report(live, settings.prefix, now=datetime.now(UTC)), live.notes

    return run_reader(args, read, render_text)


def build_report(live: Live, prefix: str, *, now: datetime) -> dict[str, Any]:
    """The JSON document (README "Snapshots"); ``now`` anchors ages and the 24 h window."""
    pods = [
        (record, _reason(obj, prefix)) for obj in live.pods if (record := pod_record(obj, prefix))
    ]
    keys = {(p.namespace, p.name) for p in live.policies}
    for record, _ in pods:
        keys |= {(record.namespace, name) for name in _policy_names(record)}
    scopes = {(p.namespace, p.name): p.scope for p in live.policies}
    ungrouped = {(p.namespace, p.name) for p in live.policies if not p.grouping_labels}
    entries = []
    for namespace, name in sorted(keys):
        mine = [
            (r, why) for r, why in pods if r.namespace == namespace and name in _policy_names(r)
        ]
        entries.append(
            {
                "namespace": namespace,
                "name": name,
                "exists": (namespace, name) in scopes,
                "scope": scopes.get((namespace, name)),
                "snapshots": snapshot_summary(live.index.of_policy(namespace, name), live, now),
                "pods": prediction_summary(mine),
                "last24h": recent_summary((r for r, _ in mine), now),
                "sharedWorkloads": shared_workloads([r for r, _ in mine])
                if (namespace, name) in ungrouped
                else [],
            }
        )
    return {
        "version": FORMAT_VERSION,
        "namespace": live.namespace,
        "generatedAt": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "windowHours": int(WINDOW.total_seconds() // 3600),
        "hitRateDefinition": HIT_RATE,
        "policies": entries,
        "last24h": recent_summary((r for r, _ in pods), now),
        "stale": [
            {**_stale_key(group), "snapshots": list(group.snapshots), "note": group.note()}
            for group in stale_groups(live.snapshots, live.pools)
        ],
        "notes": list(live.notes),
    }


def shared_workloads(records: list[PodRecord]) -> list[str]:
    """``cross-workload`` in ``status``: the workloads (``Kind name``, sorted) of an ungrouped
    policy's stamped pods when there are two or more (they restore each other's snapshots:
    domain.md section 9); empty otherwise."""
    found = sorted({r.owner.text() if r.owner is not None else f"Pod {r.name}" for r in records})
    return found if len(found) > 1 else []


def _stale_key(group: Any) -> dict[str, Any]:
    names = ("namespace", "policy", "pool", "what", "old", "new")
    return dict(zip(names, group.key, strict=True))


def _reason(obj: dict[str, Any], prefix: str) -> str | None:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(prefix + "restore-reason")
    return value if isinstance(value, str) else None


def _policy_names(record: PodRecord) -> list[str]:
    return [name for name in (record.policy or "").split(",") if name]


def snapshot_summary(views: Iterable[SnapshotView], live: Live, now: datetime) -> dict[str, Any]:
    """Counts by ``snapshot_state`` and the newest snapshot (``views`` newest first)."""
    views = list(views)
    states = Counter(snapshot_state(view, live.pools) for view in views)
    newest: dict[str, Any] | None = None
    if views:
        view = views[0]
        created = parse_time(view.created)
        age = (now - created).total_seconds() if created is not None else None
        node = view.origin.node if view.origin is not None else {}
        newest = {
            "name": view.name,
            "state": snapshot_state(view, live.pools),
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
        "newest": newest,
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


def recent_summary(records: Iterable[PodRecord], now: datetime) -> dict[str, Any]:
    """Outcomes of the pods whose Ready transition is within ``WINDOW`` of ``now``, the hit rate
    (``HIT_RATE``, None without a denominator) and p50 start-up (s) restored vs cold."""
    since = now - WINDOW
    outcomes = dict.fromkeys(OUTCOMES, 0)
    times: dict[str, list[float]] = {"restored": [], "cold": []}
    for record in records:
        ready = parse_time(record.ready_at)
        outcome = outcome_of(record)
        if ready is None or outcome is None or ready < since:
            continue
        outcomes[outcome] += 1
        seconds = startup_seconds(record)
        if seconds is not None:
            times["restored" if outcome in RESTORED else "cold"].append(seconds)
    denominator = sum(outcomes[k] for k in ("restored", "missed", "cold_expected"))
    denominator += outcomes["restored_unexpected"]
    p50 = {k: round(statistics.median(v), 1) if v else None for k, v in times.items()}
    saving = (
        round(p50["cold"] - p50["restored"], 1)
        if p50["cold"] is not None and p50["restored"] is not None
        else None
    )
    return {
        "pods": sum(outcomes.values()),
        "outcomes": outcomes,
        "hitRate": (
            round(sum([outcomes[k] for k in RESTORED]) / denominator, 4) if denominator else None
        ),
        "hitRateOf": denominator,
        "p50StartupSeconds": p50,
        "savingSeconds": saving,
    }
