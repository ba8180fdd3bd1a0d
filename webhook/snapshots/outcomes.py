"""Restore outcomes of stamped pods, decided from GKE's evidence; stale snapshots. Pure module.

A real GKE cluster marks a restored pod ``Ready`` 3-20 s after scheduling and sets ``PodRestored``
only when its memory has streamed in, tens of seconds later (docs/gke-facts.md#section-9: Ready 5.0
s, PodRestored 33.0 s after ``PodScheduled`` in Google's measured run). So nothing is decided at the
Ready transition; ``decide`` weighs the evidence (``snapshots.evidence``), first match wins:

1. A restore crash in a container (``evidence.RESTORE_FAILURE_MARKERS``) and no ``PodRestored``:
   ``restore_failed``, at once.
2. ``PodRestored`` True: ``restored`` if predicted ``hit``, else ``restored_unexpected``; at once.
3. GKE's Warning "... falling back to a cold start ...": ``missed`` (GKE's reason quoted) if
   predicted ``hit``, ``cold_expected`` if ``miss``, else ``cold_first``; at once.
4. Ready and no ``PodRestored`` for ``settle`` seconds: ``missed``/``cold_expected``/
   ``cold_first`` by the prediction, as in 3. GKE's Normal "Successfully restored ... PodSnapshot
   <ns>/<name>" only names the snapshot: an Event can be written by anyone allowed to create
   Events in the namespace, ``PodRestored`` only through ``pods/status``, so a restore is never
   counted on an Event alone (a fresh-user test forged one).

A pod that is neither Ready nor carries evidence is not decided (a pod deleted before any
evidence has no outcome). Start-up time runs on GKE's clock, from ``PodScheduled`` (node
provisioning and scheduling delays are not start-up): restored pods to ``PodRestored`` (to GKE's
restore Event when only that is known), cold pods to ``Ready``.
A Ready snapshot is stale when the node pool it was taken on now runs only other GKE node
versions (or GPU driver labels) than its origin record says: GKE will not restore it there
(docs/gke-facts.md#section-3).
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from webhook.snapshots.config_refs import ConfigIndex, config_changes
from webhook.snapshots.evidence import GkeEvent
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.state import NodePoolFacts
from webhook.snapshots.views import SnapshotView, parse_time

Outcome = Literal[
    "restored", "restored_unexpected", "missed", "restore_failed", "cold_expected", "cold_first"
]
OUTCOMES: tuple[Outcome, ...] = (
    "restored",
    "restored_unexpected",
    "missed",
    "restore_failed",
    "cold_expected",
    "cold_first",
)
RESTORED_OUTCOMES: tuple[Outcome, ...] = ("restored", "restored_unexpected")


@dataclass(frozen=True)
class Verdict:
    """A decided outcome and the evidence behind it.

    Attributes:
        outcome: one of ``OUTCOMES``.
        evidence: what decided it (``PodRestored``, ``GKE event``, ``restore crash``,
            ``no restore evidence``), for logs, Events and ``explain``.
        at: when the deciding evidence appeared (None: unknown); a new leader skips verdicts
            older than its catch-up window.
        gke_reason: GKE's own message when an Event decided it.
        snapshot: the PodSnapshot GKE says it restored from (may differ from the predicted one).
        failure: the container's restore error (``restore_failed``).
    """

    outcome: Outcome
    evidence: str
    at: datetime | None = None
    gke_reason: str | None = None
    snapshot: str | None = None
    failure: str | None = None


def _by_prediction(prediction: str | None) -> Outcome:
    if prediction == "hit":
        return "missed"
    return "cold_expected" if prediction == "miss" else "cold_first"


def decide(
    record: PodRecord,
    events: Sequence[GkeEvent],
    *,
    now: datetime,
    settle_seconds: float,
) -> Verdict | None:
    """The outcome of ``record`` from its evidence (module table), or None (not decided yet).

    Args:
        record: the stamped pod; ``events``: GKE's events about it (``evidence.events_of``).
        now: the current time (aware); ``settle_seconds``: how long a Ready pod may wait for
            restore evidence before it counts as started cold (``outcomes.settle_seconds``).
    """
    hit = record.prediction == "hit"
    if record.restore_failure is not None and not record.restored:
        return Verdict("restore_failed", "restore crash", now, failure=record.restore_failure)
    restored_event = next((e for e in reversed(events) if e.kind == "restored"), None)
    snapshot = restored_event.snapshot if restored_event is not None else None
    if record.restored:
        outcome: Outcome = "restored" if hit else "restored_unexpected"
        return Verdict(outcome, "PodRestored", parse_time(record.restored_at), snapshot=snapshot)
    fallback = next(
        (e for e in reversed(events) if e.kind == "fallback" and e.type == "Warning"), None
    )
    if fallback is not None:
        at = parse_time(fallback.time) or now
        return Verdict(
            _by_prediction(record.prediction), "GKE event", at, gke_reason=fallback.message
        )
    ready = parse_time(record.ready_at)
    if ready is None or (now - ready).total_seconds() < settle_seconds:
        return None
    settled = ready + timedelta(seconds=settle_seconds)
    # A Normal "restored" Event alone never makes a restore: Events are written by anyone who
    # may create Events in the namespace, PodRestored only through pods/status (GKE).
    evidence = "no restore evidence" if restored_event is None else "restore Event, no PodRestored"
    return Verdict(_by_prediction(record.prediction), evidence, settled, snapshot=snapshot)


def _since_scheduled(record: PodRecord, until: str | datetime | None) -> float | None:
    start = parse_time(record.scheduled_at)
    end = until if isinstance(until, datetime) else parse_time(until)
    if start is None or end is None:
        return None
    seconds = (end - start).total_seconds()
    return seconds if seconds >= 0 else None


def ready_seconds(record: PodRecord) -> float | None:
    """``PodScheduled`` -> ``Ready``, seconds (for a restored pod: when its health check answered,
    not when it can serve); None when either is unknown or negative."""
    return _since_scheduled(record, record.ready_at)


def restore_seconds(record: PodRecord, verdict: Verdict | None = None) -> float | None:
    """``PodScheduled`` -> ``PodRestored`` (else -> GKE's restore Event), seconds; None when
    unknown."""
    if record.restored_at is not None:
        return _since_scheduled(record, record.restored_at)
    if (
        verdict is not None
        and verdict.outcome in RESTORED_OUTCOMES
        and verdict.evidence == "GKE event"
        and verdict.at is not None
    ):
        return _since_scheduled(record, verdict.at)
    return None


def startup_seconds(record: PodRecord, verdict: Verdict) -> float | None:
    """Start-up on GKE's clock: restored pods to ``PodRestored``, the others to ``Ready``."""
    if verdict.outcome in RESTORED_OUTCOMES:
        return restore_seconds(record, verdict)
    return ready_seconds(record)


@dataclass(frozen=True)
class Staleness:
    """Ready snapshots of one policy that the upgraded node pool will not restore.

    Attributes:
        namespace, policy: the PodSnapshotPolicy; ``pool``: the origin node pool.
        what: ``version`` or ``GPU driver``; ``old``: the origin value; ``new``: what the pool
            runs now (``/``-joined when several).
        snapshots: the stale snapshot names, newest first.
    """

    namespace: str
    policy: str
    pool: str
    what: str
    old: str
    new: str
    snapshots: tuple[str, ...]

    @property
    def key(self) -> tuple[str, str, str, str, str, str]:
        """Identity of one upgrade for one policy (events are sent once per key)."""
        return (self.namespace, self.policy, self.pool, self.what, self.old, self.new)

    def note(self) -> str:
        """The Event note: what changed, how many snapshots, what to do."""
        count = len(self.snapshots)
        label = "" if self.what == "version" else "GPU driver "
        return (
            f"node pool {self.pool} upgraded {label}{self.old} -> {self.new}: {count} ready "
            f"snapshot(s) of {self.policy} were taken on the old {self.what}; trigger a new "
            "checkpoint"
        )


def stale_reason(
    view: SnapshotView, pools: Mapping[str, NodePoolFacts]
) -> tuple[str, str, str] | None:
    """``(what, old, new)`` when ``view``'s origin pool no longer runs its version or driver.

    Remembered on the view for this ``pools`` object (views and the pools mapping are
    replaced, never edited, on a change): the leader's lifecycle pass asks four times per
    snapshot (prunes, unrunnable clock, refreshes, rotated config), 20,000 times per pass at
    5,000 PodSnapshots (``make bench-scale``; docs/performance.md)."""
    memo: tuple[object, tuple[str, str, str] | None] | None = view.__dict__.get(_STALE_MEMO)
    if memo is not None and memo[0] is pools:
        return memo[1]
    reason = _stale_reason(view, pools)
    view.__dict__[_STALE_MEMO] = (pools, reason)  # as ``functools.cached_property`` stores
    return reason


_STALE_MEMO = "_stale_reason"


def _stale_reason(
    view: SnapshotView, pools: Mapping[str, NodePoolFacts]
) -> tuple[str, str, str] | None:
    origin = view.origin
    if not view.ready or origin is None:
        return None
    pool = pools.get(origin.node.get("pool") or "")
    if pool is None or pool.node_count == 0:
        return None  # pool gone or empty: unknown, not stale
    version, driver = origin.node.get("version"), origin.node.get("gpuDriver")
    if version and pool.versions and version not in pool.versions:
        return "version", version, "/".join(sorted(pool.versions))
    if driver and pool.gpu_drivers and driver not in pool.gpu_drivers:
        return "GPU driver", driver, "/".join(sorted(pool.gpu_drivers))
    return None


def stale_groups(
    views: Iterable[SnapshotView], pools: Mapping[str, NodePoolFacts]
) -> list[Staleness]:
    """Stale Ready snapshots grouped by policy, pool and change (stable order)."""
    grouped: dict[tuple[str, str, str, str, str, str], list[SnapshotView]] = {}
    for view in views:
        reason = stale_reason(view, pools)
        if reason is None or view.origin is None:
            continue
        pool = view.origin.node.get("pool") or ""
        grouped.setdefault((view.namespace, view.policy, pool, *reason), []).append(view)
    out = []
    for key in sorted(grouped):
        items = sorted(grouped[key], key=lambda v: (v.created, v.name), reverse=True)
        out.append(Staleness(*key, snapshots=tuple(v.name for v in items)))
    return out


SNAPSHOT_STATES = ("ready", "stale", "stale-config", "awaiting", "failed", "not_ready", "prunable")
"""States of ``snapshot_state`` (the ``snapready_snapshots`` gauge's ``state`` label)."""


def snapshot_state(
    view: SnapshotView,
    pools: Mapping[str, NodePoolFacts],
    configs: ConfigIndex | None = None,
    prunable: Container[tuple[str, str]] = (),
) -> str:
    """``prunable`` (``(namespace, name)`` in ``prunable``: ``snapshots.prune.prune_plan`` says
    no pod can restore from it; first, so a snapshot counts in one state only and the actionable
    state shows), else ``ready``, ``stale`` (its pool runs another GKE version or driver),
    ``stale-config`` (a Secret or ConfigMap its origin pod read changed since:
    ``snapshots.config_refs``; judged only with ``configs``), ``awaiting`` (checkpoint uploading),
    ``failed`` (checkpoint failed) or ``not_ready`` (the ``snapready_snapshots`` gauge's
    ``state``). A snapshot GKE will not restore (``stale``) is that before it is
    ``stale-config``."""
    if (view.namespace, view.name) in prunable:
        return "prunable"
    if not view.ready:
        if view.checkpoint in ("awaiting", "failed"):
            return view.checkpoint
        return "not_ready"
    if stale_reason(view, pools) is not None:
        return "stale"
    if configs and config_changes(view, configs):
        return "stale-config"
    return "ready"
