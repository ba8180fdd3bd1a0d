"""Restore outcomes of stamped pods, and snapshots made stale by node-pool upgrades. Pure module.

Outcome of a pod, decided when it first turns Ready (condition ``PodRestored`` True means GKE
restored it), combined with what admission predicted (``<prefix>restore-prediction``):

| PodRestored | prediction | outcome |
|---|---|---|
| True | ``hit`` | ``restored`` |
| True | ``miss``/``none``/absent | ``restored_unexpected`` (our model was wrong) |
| False | ``hit`` | ``missed`` (the silent fallback: predicted a restore, started cold) |
| False | ``miss`` | ``cold_expected`` |
| False | ``none``/absent | ``cold_first`` (no snapshot existed yet) |

Start-up time is the Ready transition minus the creation timestamp (seconds).
A Ready snapshot is stale when the node pool it was taken on now runs only other GKE node
versions (or GPU driver labels) than its origin record says: GKE will not restore it there
(domain.md section 3).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from webhook.kube.snapshots import PodRecord, SnapshotView
from webhook.kube.state import NodePoolFacts

Outcome = Literal["restored", "restored_unexpected", "missed", "cold_expected", "cold_first"]
OUTCOMES: tuple[Outcome, ...] = (
    "restored",
    "restored_unexpected",
    "missed",
    "cold_expected",
    "cold_first",
)


def outcome_of(record: PodRecord) -> Outcome | None:
    """The outcome of a pod that is Ready, else None (not decided yet)."""
    if record.ready_at is None:
        return None
    if record.restored:
        return "restored" if record.prediction == "hit" else "restored_unexpected"
    if record.prediction == "hit":
        return "missed"
    if record.prediction == "miss":
        return "cold_expected"
    return "cold_first"


def parse_time(text: str | None) -> datetime | None:
    """An RFC 3339 timestamp as the API server writes it (``2026-12-01T10:00:00Z``), or None."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def startup_seconds(record: PodRecord) -> float | None:
    """Ready transition minus creation, in seconds; None when either is unknown or negative."""
    created, ready = parse_time(record.created), parse_time(record.ready_at)
    if created is None or ready is None:
        return None
    seconds = (ready - created).total_seconds()
    return seconds if seconds >= 0 else None


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
    """``(what, old, new)`` when ``view``'s origin pool no longer runs its version or driver."""
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


def snapshot_state(view: SnapshotView, pools: Mapping[str, NodePoolFacts]) -> str:
    """``ready``, ``stale`` or ``not_ready`` (the ``snapready_snapshots`` gauge's ``state``)."""
    if not view.ready:
        return "not_ready"
    return "stale" if stale_reason(view, pools) is not None else "ready"
