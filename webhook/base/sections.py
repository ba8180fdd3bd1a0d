"""The settings sections the pure core reads: readiness rules, helper injection, bucket governance.

Each is a pydantic model nested in ``webhook.base.config.Settings`` (``rules``, ``injection``,
``storage``); every field documents its unit and the reason for its default (the GKE facts:
docs/gke-facts.md#section-4 to #section-8). Kept apart from the process settings (server, source) so
that rules and mutators depend only on what they read.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from webhook.base.rule_ids import unknown_rule_ids
from webhook.base.section import Section
from webhook.base.types import Mode, Severity

GKE_VERSION_PATTERN = r"^v?(\d+)\.(\d+)\.(\d+)(?:-gke\.(\d+))?"
"""A GKE version (``1.35.0-gke.1738000``, ``v1.35.3-gke.1234000`` from ``/version``)."""


SandboxFeature = Literal["privileged", "hostPath", "hostNetwork", "hostPID", "hostIPC", "hostPort"]


SANDBOX_COMPAT_DEFAULTS: dict[SandboxFeature, Literal["deny", "warn", "off"]] = {
    "privileged": "deny",
    "hostPath": "deny",
    "hostNetwork": "warn",
    "hostPID": "warn",
    "hostIPC": "warn",
    "hostPort": "warn",
}


KNOWN_MACHINE_FAMILIES: tuple[str, ...] = (
    # Compute Engine "Machine families resource and comparison guide" (2026): general-purpose,
    "c4", "c4a", "c4d", "c3", "c3d", "e2", "n4", "n4a", "n4d", "n2", "n2d", "n1", "t2d", "t2a",
    # compute-optimized, memory-optimized, storage-optimized,
    "h4d", "h3", "c2", "c2d", "x4", "m4", "m3", "m2", "m1", "z3",
    # accelerator-optimized (GPUs) and Cloud TPU VM families (denied by `tpu`, but known).
    "a4x", "a4", "a3", "a2", "g4", "g2", "ct4p", "ct5l", "ct5lp", "ct5p", "ct6e", "tpu7x",
)  # fmt: skip
"""Every current Compute Engine machine family, so that a real family is never "unknown"."""

VALIDATED_GPU_MACHINE_TYPES: dict[str, int] = {
    # GoogleCloudPlatform/accelerated-platforms, inference-ref-arch online-inference-gpu
    # vllm-with-podsnapshots.md: Gemma 4 31B on g4-standard-48 (1 x RTX Pro 6000) restored in
    # 35-43 s (docs/gke-facts.md#section-9).
    "g4-standard-48": 1,
}
"""GPU machine types validated in the field (not in the docs' list), with their GPU count."""

VALIDATED_GPU_ACCELERATORS: dict[str, tuple[str, ...]] = {
    # Same source: accelerator nvidia-rtx-pro-6000, machine family g4 (docs/gke-facts.md#section-9).
    "nvidia-rtx-pro-6000": ("g4",),
}
"""Accelerators validated in the field and the machine families carrying them."""


class GpuDriverSettings(Section):
    """``gpu-driver``: GPU checkpointing needs NVIDIA driver 570+ (docs/gke-facts.md#section-9)."""

    model_config = ConfigDict(frozen=True)

    severity: Severity = Field(
        "warn",
        description="Severity when a GPU pod may land on GKE's default driver branch (535 in "
        "2026: its first checkpoint fails with `runsc error: exit status 128`). Warn: the node "
        "pools may all be on latest even where the pod does not say so.",
    )
    pin: bool = Field(
        False,
        description="Mutate selected GPU pods that pin no driver branch: add nodeSelector "
        "`cloud.google.com/gke-gpu-driver-version: latest` (not a fingerprinted field). Off by "
        "default: it narrows where the pod may schedule.",
    )


class ManualTriggerSettings(Section):
    """``manual-trigger``: whose memory a PodSnapshotManualTrigger makes every replica restore."""

    model_config = ConfigDict(frozen=True)

    require_source_label: bool = Field(
        False,
        description="Also require the target pod to carry `snapready.io/snapshot-source: "
        '"true"` (an opt-in marker a platform team sets on pods meant to be snapshot sources).',
    )


class RuleSettings(Section):
    """Facts and switches of the readiness rules (defaults from docs/gke-facts.md#section-4,
    #section-5 and #section-6).

    Frozen: rules derive tables from it once per object (``webhook.rules.tables``); a reload
    builds new settings.
    """

    model_config = ConfigDict(frozen=True)

    runtime_class_names: list[str] = Field(
        ["gvisor"], description="runtimeClassName values that mean GKE Sandbox (gVisor)."
    )
    unsupported_machine_families: list[str] = Field(
        ["e2"], description="Machine families Pod snapshots do not support (GKE docs: E2)."
    )
    known_machine_families: list[str] = Field(
        list(KNOWN_MACHINE_FAMILIES),
        description="Families the rules recognise (Compute Engine's machine families); an unknown "
        "pinned family is reported.",
    )
    gpu_machine_types: dict[str, int] = Field(
        {
            "g2-standard-4": 1,
            "g2-standard-8": 1,
            "g2-standard-12": 1,
            "g2-standard-16": 1,
            "g2-standard-32": 1,
            "g2-standard-48": 4,
            "g2-standard-96": 8,
            "a2-highgpu-1g": 1,
            "a2-ultragpu-1g": 1,
            "a3-highgpu-1g": 1,
        },
        description="Supported GPU machine types and their GPU count: the documented list "
        "(GKE 'About GKE Pod snapshots').",
    )
    validated_gpu_machine_types: dict[str, int] = Field(
        dict(VALIDATED_GPU_MACHINE_TYPES),
        description="GPU machine types validated in the field, beyond the docs' list, and their "
        "GPU count (docs/gke-facts.md#section-9: Google's reference architecture runs "
        "g4-standard-48).",
    )
    gpu_accelerators: dict[str, list[str]] = Field(
        {
            "nvidia-l4": ["g2"],
            "nvidia-tesla-a100": ["a2"],
            "nvidia-a100-80gb": ["a2"],
            "nvidia-h100-80gb": ["a3"],
        },
        description="Supported accelerator label values and the machine families carrying them "
        "(the documented list).",
    )
    validated_gpu_accelerators: dict[str, list[str]] = Field(
        {name: list(families) for name, families in VALIDATED_GPU_ACCELERATORS.items()},
        description="Accelerators validated in the field and their families "
        "(docs/gke-facts.md#section-9: nvidia-rtx-pro-6000 on g4).",
    )
    unlisted_gpu_severity: Severity = Field(
        "warn",
        description="`gpu-machine` severity for a GPU machine type, family or accelerator on "
        "neither list (documented, validated in the field). Warn: the docs' list is not the whole "
        "truth (Google runs G4); deny for teams that accept only what is listed.",
    )
    multi_gpu_accelerators: list[str] = Field(
        ["nvidia-l4"], description="Accelerators on which a pod may use more than one GPU (L4)."
    )
    gke_version: str | None = Field(
        None,
        description="Cluster version (e.g. 1.35.0-gke.1738000) for version-gated rules; in kube "
        "mode read from /version (`snapready check --gke-version`). Unknown means a GA version "
        "of Pod snapshots (1.35.3-gke.1234000 or later), so `gpu-whole-node` does not apply.",
    )
    gpu_subset_min_version: str = Field(
        "1.35.0-gke.1738000",
        description="First GKE version on which a pod may use a subset of a multi-GPU node's GPUs "
        "(GKE Pod snapshot docs); before it `gpu-whole-node` applies.",
    )
    gpu_sharing_severity: Severity = Field(
        "warn",
        description="Severity of `gpu-sharing` (time-sharing, MPS). Warn by default: the GKE docs "
        "do not name them as unsupported (unconfirmed).",
    )
    sandbox_compat: dict[SandboxFeature, Literal["deny", "warn", "off"]] = Field(
        dict(SANDBOX_COMPAT_DEFAULTS),
        description="Per-feature severity of `sandbox-compat` (features left out keep their "
        "default): GKE Sandbox rejects privileged containers and hostPath volumes (deny); host "
        "namespaces and hostPort are limited (warn).",
    )
    gpu_driver: GpuDriverSettings = Field(
        default_factory=GpuDriverSettings,
        description="The `gpu-driver` rule and its optional nodeSelector mutation.",
    )
    restore_from_policy_severity: Severity = Field(
        "warn",
        description="Severity of `restore-from-policy` (the annotation stops a pod's first "
        "checkpoint; docs/gke-facts.md#section-9).",
    )
    manual_trigger: ManualTriggerSettings = Field(
        default_factory=ManualTriggerSettings,
        description="The `manual-trigger` rule for PodSnapshotManualTrigger objects.",
    )
    disabled: list[str] = Field(
        [], description="Rule ids to skip entirely (an id no rule raises is refused)."
    )
    modes: dict[str, Mode] = Field(
        {},
        description="Per-rule enforcement mode overriding the global/policy/namespace mode (an "
        "id no rule raises is refused); a warning is never made a denial: `enforce` leaves a "
        "warn-severity rule a warning.",
    )

    @field_validator("sandbox_compat")
    @classmethod
    def _sandbox_defaults(
        cls, value: dict[SandboxFeature, Literal["deny", "warn", "off"]]
    ) -> dict[SandboxFeature, Literal["deny", "warn", "off"]]:
        return {**SANDBOX_COMPAT_DEFAULTS, **value}

    @field_validator("disabled", "modes")
    @classmethod
    def _known_rule_ids(cls, value: list[str] | dict[str, Mode]) -> list[str] | dict[str, Mode]:
        unknown_rule_ids(value)
        return value

    @field_validator("gke_version", "gpu_subset_min_version")
    @classmethod
    def _gke_version_format(cls, value: str | None) -> str | None:
        if value is not None and not re.match(GKE_VERSION_PATTERN, value):
            raise ValueError(f"{value!r} is not a GKE version like 1.35.0-gke.1738000")
        return value


DIGEST_PINNED = re.compile(r"@sha256:[0-9a-f]{64}$")
"""An image reference pinned by digest (the tag, if any, is then only informative)."""


class InjectionSettings(Section):
    """Rehydration helper injection (design.md, "Rehydration helpers")."""

    enabled: bool = Field(
        True,
        description="Inject the helpers (env, init container, volume, mounts) into selected pods;"
        " off still stamps the policy and spec-hash annotations.",
    )
    helpers_image: str = Field(
        "ghcr.io/snapready/helpers:0.1.0@sha256:"
        "0000000000000000000000000000000000000000000000000000000000000000",
        description="Helper image (Dockerfile target `helpers`); must be digest-pinned "
        "(`...@sha256:<64 hex>`) because it is part of every fingerprint.",
    )
    allow_tag_only_image: bool = Field(
        False, description="Permit a tag-only helper image (changes fingerprints when retagged)."
    )
    max_containers: int = Field(
        500,
        ge=1,
        description="Pods with more containers (app + init) than this are not mutated (a warning "
        "says so; validation still runs). Mutation costs ~50 us per container on the event loop, "
        "so this bounds one request's stall to ~25 ms; real pods have a handful.",
    )

    @model_validator(mode="after")
    def _image_pinned_by_digest(self) -> InjectionSettings:
        # The image is hashed into every fingerprint: a tag that moves to new bits would either
        # silently run other helpers in restored pods or, once re-pinned, orphan every snapshot.
        if not self.allow_tag_only_image and not DIGEST_PINNED.search(self.helpers_image):
            raise ValueError(
                f"injection.helpers_image {self.helpers_image!r} is not pinned by digest: use "
                "IMAGE@sha256:<64 hex> (or set injection.allow_tag_only_image=true)"
            )
        return self


SNAPSHOT_PREFIX_DEFAULT = "{path}/{namespace}/{name}/"
"""Assumed object layout of one PodSnapshot in its bucket (not documented by GKE)."""


class StorageSettings(Section):
    """Bucket governance checks for PodSnapshotStorageConfig (through google-cloud-storage)."""

    enabled: bool = Field(
        True, description="Inspect buckets through GCS; false checks only the bucket name."
    )
    timeout_seconds: float = Field(
        2.0,
        gt=0,
        le=25,
        description="Deadline in seconds for one bucket inspection (metadata + IAM, no retries):"
        " the admission waits at most this long; keep it well under the webhook's timeoutSeconds"
        " (1-30 s).",
    )
    cache_ttl_seconds: float = Field(
        300.0,
        ge=0,
        description="Seconds a bucket's facts are reused (0: no cache); bucket settings rarely"
        " change, and a fix shows up after this delay.",
    )
    failure_cache_ttl_seconds: float = Field(
        10.0,
        ge=0,
        description="Seconds a failed inspection (timeout, network, credentials) is reused, so an"
        " outage costs one timeout per bucket per interval, not one per request.",
    )
    strict: bool = Field(
        False, description="Deny (instead of warn) when a bucket or its IAM cannot be inspected."
    )
    cluster_location: str | None = Field(
        None,
        description="Cluster region or zone (e.g. us-central1); a bucket elsewhere is a warning."
        " Unset: no location check.",
    )
    project: str | None = Field(
        None, description="GCP project for the storage client; default: the ADC project."
    )
    snapshot_prefix: str = Field(
        SNAPSHOT_PREFIX_DEFAULT,
        description="Where one PodSnapshot's objects sit in its storage config's bucket"
        " (`snapready status --sizes`): a template with {path} (the storage config's"
        " gcs.path, may be empty), {namespace}, {name} and {uid} of the PodSnapshot; must name"
        " the snapshot ({name} or {uid}). GKE does not document its object layout"
        " (docs/reference/status-explain.md#what-snapshots-cost-status-sizes): the default"
        " is an assumption; check one snapshot with `gcloud storage ls` and set this to match.",
    )
    sizes_timeout_seconds: float = Field(
        30.0,
        gt=0,
        le=600,
        description="Deadline in seconds for all bucket listings of one `status --sizes` run"
        " (and the cap of one request; no retries): a CLI waits, admission never lists.",
    )

    @field_validator("snapshot_prefix")
    @classmethod
    def _known_placeholders(cls, value: str) -> str:
        names = set(re.findall(r"{([^{}]*)}", value))
        unknown = names - {"path", "namespace", "name", "uid"}
        if unknown:
            raise ValueError(
                f"unknown placeholder(s) {sorted(unknown)}: use {{path}},"
                " {namespace}, {name}, {uid}"
            )
        if not names & {"name", "uid"}:
            raise ValueError("must contain {name} or {uid}: one prefix per snapshot")
        return value


class RestoreSettings(Section):
    """Restore prediction at admission (cluster mode; docs/concepts/snapshots.md)."""

    on_miss: Literal["warn", "deny", "off"] = Field(
        "warn",
        description="A selected pod predicted to miss every Ready snapshot (it would cold-start "
        "silently), or to match one whose restore gVisor refuses (it would crash-loop: rule "
        "init-emptydir, whose model the prediction applies unless that rule is disabled): `warn` "
        "admits it with a warning, `deny` refuses it (for teams that want every selected pod to "
        "restore), `off` only writes the annotations. Default warn: the prediction is our "
        "model, not GKE's promise.",
    )
    cross_workload: Literal["warn", "deny", "allow"] = Field(
        "warn",
        description="A selected pod predicted to `hit` a snapshot taken from another workload "
        "(origin record's owner: a Deployment, StatefulSet, Sandbox...) would restore that "
        "workload's memory (docs/gke-facts.md#section-9, grouping is isolation): `warn` admits "
        "it with a warning, `deny` refuses it, `allow` says nothing. Default warn: sharing can be "
        "intended (one template deployed twice).",
    )
    deletion_stuck_seconds: float = Field(
        600.0,
        gt=0,
        description="Seconds a PodSnapshot may stay Deleting before the leader reports a Warning "
        "Event `SnapshotDeletionStuck` on it (cluster mode). GKE deletes the snapshot's objects "
        "first; without roles/storage.objectUser for its service agent on the bucket it hangs "
        "for weeks (docs/gke-facts.md#section-9). 10 min: a normal delete takes seconds to "
        "minutes.",
    )
    rollout_warnings: bool = Field(
        True,
        description="Warn when a Deployment/StatefulSet/Job/CronJob template no longer matches "
        "any Ready snapshot of its policy (the rollout will cold-start), or matches one gVisor "
        "cannot restore its pods from (rule init-emptydir).",
    )
    readiness_gate: bool = Field(
        False,
        description="Add the readiness gate snapready.io/restore-settled to selected pods; the "
        "leader keeps it False while the pod's own checkpoint uploads and while a pod predicted "
        "to restore waits for PodRestored (or GKE's fallback), else True. Off by default: only "
        "snapready sets that condition, so with it on and every replica down, new selected "
        "pods stay unready until a replica is back "
        "(docs/concepts/checkpoints.md#readiness-gate-opt-in).",
    )
    readiness_gate_timeout_seconds: float = Field(
        600.0,
        gt=0,
        description="After this many seconds since PodScheduled the gate turns True (reason "
        "Timeout) whatever the evidence, so no pod stays out of its Service forever; above "
        "the 30 s GKE's restores take and below a typical progressDeadlineSeconds (600 s).",
    )
