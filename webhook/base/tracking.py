"""Settings of the controllers that watch what GKE did: restore outcomes and checkpoints.

Nested in ``webhook.base.config.Settings`` as ``outcomes`` and ``checkpoint``. Every default is
set from the timelines a real GKE cluster shows (domain.md section 9) and says why.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class OutcomeSettings(BaseModel):
    """How the leader decides restore outcomes (README "Snapshots", evidence table)."""

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
        "Events and annotations, checkpoints, stale snapshots, the readiness gate); empty: "
        "every namespace. For an installation that shares its cluster with another snapready "
        "owning other namespaces (the tests run many on one API server); admission is not "
        "affected.",
    )


class CheckpointSettings(BaseModel):
    """Checkpoint lifecycle Events from the PodSnapshot conditions (README "Snapshots")."""

    stall_seconds: float = Field(
        1800.0,
        gt=0,
        description="A PodSnapshot AwaitingCheckpoint longer than this gets the Warning "
        "SnapshotCheckpointStalled. Uploads of ~70 GiB take ~13 min on GKE (domain.md section "
        "9); 30 min is twice that, and some large-VRAM checkpoints never finish.",
    )


class OwnershipSettings(BaseModel):
    """Who may change snapready's metadata on a running pod (``admission.guard``)."""

    service_account: str = Field(
        "",
        description="Username of snapready's own service account "
        "(system:serviceaccount:<namespace>:<name>; the chart sets it): only it may change a "
        "snapready.io/ annotation or the snapready.io/selected label in a pod UPDATE, any other "
        "such update is denied. Empty: not checked (file mode, a webhook configuration "
        "without the ownership webhook).",
    )


class OriginSettings(BaseModel):
    """How origin records are signed (``kube.signing``; README "Security")."""

    keys_dir: str = Field(
        "",
        description="Directory of the HMAC keys that sign and verify origin records: one file "
        "per key, the file name is the key id (a Secret mounted as a volume; the chart creates "
        "it). Empty: records are neither signed nor checked, so anyone who may edit "
        "PodSnapshots can forge one (file mode, development).",
    )
    active_key: str = Field(
        "",
        description="The key id new signatures use; the other keys only verify, so a rotation "
        "adds a key, makes it active (the leader re-signs the records of older keys), then "
        "removes the old one. Empty with one key: that key.",
    )
    key_secret: str = Field(
        "",
        description="namespace/name of that Secret: `snapready status` and `explain` read it, "
        "when the user may, to check the records they show (otherwise they say the records "
        "are unverified).",
    )
