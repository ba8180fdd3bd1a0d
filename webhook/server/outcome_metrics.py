"""Prometheus series of what GKE did: restore outcomes, start-up on GKE's clock, checkpoints.

Counted by the leader only (``cluster.controllers.restores`` decides,
``cluster.controllers.checkpoints`` reports), once per pod or snapshot. Times run from
``PodScheduled`` (docs/gke-facts.md#section-9: node provisioning and image pulls are not restore
time): ``snapready_restore_seconds`` to ``PodRestored`` (when a restored pod's memory has streamed
in), ``snapready_pod_ready_seconds`` to ``Ready`` (when its health check answered),
``snapready_pod_startup_seconds`` to ``PodRestored`` for restored pods and to ``Ready`` for cold
ones (the start-up a user waits for). Label values are bounded by what an admin created, never by
what users write into pods or PodSnapshots (docs/reference/metrics.md, series bound): ``outcome``
from ``snapshots.outcomes.OUTCOMES``; ``policy`` the live PodSnapshotPolicies that select the pod by
its labels (``snapshots.selection.believed``: a pod no live policy selects is never counted); for
checkpoints ``namespace``/``policy`` of a live policy, else ``snapshots.selection.OTHER`` for both.
Series: at most P x 6 restore outcomes and P x 2 checkpoint outcomes (+1 ``OTHER`` pair), P the
policies (or ``,``-joined sets of policies selecting one pod) seen while the process ran; histograms
times their buckets."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from webhook.snapshots.outcomes import Verdict, ready_seconds, restore_seconds, startup_seconds
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.views import SnapshotView

STARTUP_BUCKETS = (1, 2, 5, 10, 15, 30, 45, 60, 90, 120, 180, 300, 600, 900, 1200, 1800)
"""Seconds: a restore takes seconds (26-52 s to the first answer on GKE), a cold AI-inference
start minutes (168-433 s in Google's runs; <= 30 min)."""
CHECKPOINT_BUCKETS = (30, 60, 120, 240, 300, 480, 600, 900, 1200, 1800, 3600)
"""Seconds from a PodSnapshot's creation to ``Checkpoint`` Succeeded: ~20 GiB in 4-5 min, ~68 GiB
in ~13 min (docs/gke-facts.md#section-9)."""


class OutcomeMetrics:
    """Restore and checkpoint series in ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        reg = registry
        self.restores = Counter(
            "snapready_restores",
            "Stamped pods by restore outcome, decided from GKE's evidence (PodRestored, "
            "GKEPodSnapshotting events, restore crashes; docs/concepts/snapshots.md): restored, "
            "restored_unexpected, missed (predicted a restore, started cold), restore_failed "
            "(the restore crashed), cold_expected, cold_first.",
            ["namespace", "policy", "outcome"],
            registry=reg,
        )
        self.pod_startup = Histogram(
            "snapready_pod_startup_seconds",
            "Seconds from a stamped pod's PodScheduled to PodRestored (restored pods) or Ready "
            "(cold pods), by outcome.",
            ["policy", "outcome"],
            buckets=STARTUP_BUCKETS,
            registry=reg,
        )
        self.restore_seconds = Histogram(
            "snapready_restore_seconds",
            "Seconds from a restored pod's PodScheduled to PodRestored (its memory streamed in).",
            ["policy"],
            buckets=STARTUP_BUCKETS,
            registry=reg,
        )
        self.ready_seconds = Histogram(
            "snapready_pod_ready_seconds",
            "Seconds from a stamped pod's PodScheduled to Ready, by outcome (a restored pod is "
            "Ready long before it has restored).",
            ["policy", "outcome"],
            buckets=STARTUP_BUCKETS,
            registry=reg,
        )
        self.checkpoints = Counter(
            "snapready_checkpoints",
            "Finished checkpoints by outcome (succeeded, failed), from the PodSnapshot's "
            "Checkpoint condition.",
            ["namespace", "policy", "outcome"],
            registry=reg,
        )
        self.checkpoint_seconds = Histogram(
            "snapready_checkpoint_seconds",
            "Seconds from a PodSnapshot's creation to Checkpoint Succeeded.",
            ["policy"],
            buckets=CHECKPOINT_BUCKETS,
            registry=reg,
        )
        self.refreshes = Counter(
            "snapready_snapshot_refreshes",
            "PodSnapshotManualTriggers the leader created to refresh a group's snapshots after "
            "a node-pool upgrade (lifecycle.refresh, docs/concepts/lifecycle.md).",
            ["namespace", "policy"],
            registry=reg,
        )
        self.pruned = Counter(
            "snapready_snapshots_pruned",
            "PodSnapshots the leader deleted (lifecycle.prune on), by reason "
            "(checkpoint-failed, unrunnable, unused).",
            ["namespace", "policy", "reason"],
            registry=reg,
        )

    def observe_refresh(self, namespace: str, policy: str, trigger: str) -> None:
        """Count one trigger created; ``policy`` is a live policy of the cache (the lifecycle
        worker only refreshes those), ``trigger`` is not a label (one series per policy)."""
        self.refreshes.labels(namespace, policy).inc()

    def observe_prune(self, namespace: str, policy: str, reason: str) -> None:
        """Count one prune; the lifecycle worker passes ``namespace``/``policy`` through
        ``snapshots.selection.bounded_labels`` (``spec.policyName`` is the PodSnapshot's own word),
        ``reason`` is one of ``snapshots.prune.PRUNE_REASONS``."""
        self.pruned.labels(namespace, policy, reason).inc()

    def observe_restore(self, record: PodRecord, verdict: Verdict) -> None:
        """Count one decided outcome and its times (those that are known)."""
        policy, outcome = record.policy or "", verdict.outcome
        self.restores.labels(record.namespace, policy, outcome).inc()
        startup = startup_seconds(record, verdict)
        if startup is not None:
            self.pod_startup.labels(policy, outcome).observe(startup)
        ready = ready_seconds(record)
        if ready is not None:
            self.ready_seconds.labels(policy, outcome).observe(ready)
        restored = restore_seconds(record, verdict)
        if restored is not None and outcome in ("restored", "restored_unexpected"):
            self.restore_seconds.labels(policy).observe(restored)

    def observe_checkpoint(self, view: SnapshotView, outcome: str, seconds: float | None) -> None:
        """Count one finished checkpoint (and its duration when it succeeded)."""
        self.checkpoints.labels(view.namespace, view.policy, outcome).inc()
        if seconds is not None:
            self.checkpoint_seconds.labels(view.policy).observe(seconds)
