"""Settings of the controllers that watch what GKE did: restore outcomes and checkpoints.

Nested in ``webhook.base.config.Settings`` as ``outcomes`` and ``checkpoint``. Every default is
set from the timelines a real GKE cluster shows (docs/gke-facts.md#section-9) and says why.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from webhook.base.section import Section


class OutcomeSettings(Section):
    """How the leader decides restore outcomes (docs/concepts/snapshots.md, evidence table)."""

    settle_seconds: float = Field(
        300.0,
        gt=0,
        description="Seconds a Ready pod may wait for restore evidence (PodRestored, GKE's "
        "GKEPodSnapshotting Event) before it counts as started cold. GKE marks a restored pod "
        "Ready 3-20 s after scheduling and sets PodRestored when its memory has streamed in "
        "(28 s later in Google's measured run, first answers 26-52 s after scheduling); 300 s "
        "leaves room for 70 GiB images streamed on demand. GKE's fallback Warning decides at "
        "once, so this delays only the pods GKE said nothing about.",
    )
    catch_up_seconds: float = Field(
        900.0,
        ge=0,
        description="A new leader decides the pods whose evidence appeared up to this long "
        "before it took over and that no earlier leader recorded (the restore-outcome "
        "annotation); older ones are left alone, so an upgrade from a version that recorded "
        "nothing does not flood the cluster with old Events.",
    )

    namespaces: list[str] = Field(
        default_factory=list,
        description="Namespaces whose pods and snapshots the leader tracks (outcomes, their "
        "Events and annotations, checkpoints, stale snapshots, the readiness gate, origin "
        "records, the Secret/ConfigMap watch, lifecycle, the audit and its policy reports); "
        "empty: "
        "every namespace. For an installation that shares its cluster with another snapready "
        "owning other namespaces (the tests run many on one API server); admission is not "
        "affected.",
    )

    def tracks(self, namespace: str) -> bool:
        """Whether the leader tracks ``namespace`` (in ``namespaces``, or that list is empty):
        the one test every leader-side worker and ``snapready status`` apply."""
        return not self.namespaces or namespace in self.namespaces


class CheckpointSettings(Section):
    """Checkpoint lifecycle Events from the PodSnapshot conditions (docs/concepts/snapshots.md)."""

    stall_seconds: float = Field(
        1800.0,
        gt=0,
        description="A PodSnapshot AwaitingCheckpoint longer than this gets the Warning "
        "SnapshotCheckpointStalled. Uploads of ~70 GiB take ~13 min on GKE "
        "(docs/gke-facts.md#section-9); 30 min is twice that, and some large-VRAM checkpoints "
        "never finish.",
    )


class OwnershipSettings(Section):
    """Who may change snapready's metadata on a running pod (``admission.guard``)."""

    service_account: str = Field(
        "",
        description="Username of snapready's own service account "
        "(system:serviceaccount:<namespace>:<name>; the chart sets it): only it may change a "
        "snapready.io/ annotation or the snapready.io/selected label in a pod UPDATE, any other "
        "such update is denied. Empty: not checked (file mode, a webhook configuration "
        "without the ownership webhook).",
    )


class OriginSettings(Section):
    """What origin records hold (``cluster.controllers.origins``; docs/concepts/snapshots.md)."""

    record_config: bool = Field(
        True,
        description="Name in each origin record the Secrets and ConfigMaps the origin pod read "
        "and watch their metadata in namespaces with such snapshots (stale-config). Needs "
        "get/list/watch on secrets and configmaps cluster-wide: RBAC cannot limit a grant to "
        "metadata, so whoever takes over snapready's service account can read every Secret. "
        "false: no such reads, no stale-config (chart value staleConfig).",
    )


class LifecycleSettings(Section):
    """Snapshot lifecycle: refresh after a node-pool upgrade and pruning
    (docs/concepts/lifecycle.md).

    Every write this section enables is the leader's, lease-fenced, idempotent across restarts
    and hand-overs, and comes with an Event (``cluster.controllers.snapshot_lifecycle``).
    """

    refresh: Literal["off", "on"] = Field(
        "off",
        description="`on`: when the Ready snapshots of a manual-trigger policy's group are stale "
        "(their origin pool now runs another GKE version or GPU driver, "
        "docs/gke-facts.md#section-3), the leader creates one PodSnapshotManualTrigger on a "
        "Ready, cold-started pod of that group on the upgraded pool. Default off: a trigger "
        "decides whose memory every later replica restores (docs/gke-facts.md#section-9), so "
        "writing one is an admin's opt-in.",
    )
    prune: Literal["off", "dry-run", "on"] = Field(
        "dry-run",
        description="`dry-run` (default): prunable snapshots are listed by `status`, counted "
        'as snapready_snapshots{state="prunable"} and announced by one Normal Event '
        "SnapshotsPrunable per set, nothing is deleted: a snapshot is a 20-70 GiB memory "
        "image billed until deleted, but deleting is irreversible, so the default only "
        "shows what would go. `on`: the leader deletes them (rate-limited). `off`: not judged.",
    )
    unused_days: float = Field(
        7.0,
        gt=0,
        description="Days a snapshot may go without use (no live pod or workload template of "
        "its policy with its fingerprint, and no restore: status.lastAccessTime, else its "
        "creation) before it is prunable. 7 days outlasts a weekly deploy cycle and a "
        "rollback to last week's template; the clock is GKE's, so it survives restarts.",
    )
    prune_grace_seconds: float = Field(
        3600.0,
        ge=0,
        description="Seconds no node pool may have run a stale snapshot's origin version and "
        "driver (as this leader saw it) before the snapshot is prunable; a failed checkpoint "
        "is prunable this long after GKE reported the failure. One hour covers a surge "
        "upgrade's node churn (nodes re-registering, the cache catching up) and a quick "
        "rollback; the unrunnable clock is this leader's, so a restart or hand-over starts it "
        "again (it can only delay a prune).",
    )
    prune_per_minute: float = Field(
        10.0,
        gt=0,
        description="Deletions per minute at most (token bucket, burst prune_burst). Each "
        "deletion makes GKE remove tens of GiB from the bucket; a slow, steady rate keeps a "
        "mistaken setting from emptying a bucket before an admin can react.",
    )
    prune_burst: int = Field(5, ge=1, description="Deletions allowed at once (token bucket).")
    recheck_seconds: float = Field(
        30.0,
        gt=0,
        description="Seconds between lifecycle passes without a cache change (the pass also "
        "runs when snapshots, nodes or stamped pods change, at most once every 5 seconds).",
    )
    template_recheck_seconds: float = Field(
        600.0,
        gt=0,
        description="Seconds a namespace's listed workload templates are reused before they "
        "are listed again (only namespaces with an unused-snapshot candidate are listed).",
    )
