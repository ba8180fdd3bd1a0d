"""The settings sections the pure core reads: readiness rules, helper injection, bucket governance.

Each is a pydantic model nested in ``webhook.base.config.Settings`` (``rules``, ``injection``,
``storage``); every field documents its unit and the reason for its default (domain.md sections
4-8 for the GKE facts). Kept apart from the process settings (server, source) so that rules and
mutators depend only on what they read.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

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


class RuleSettings(BaseModel):
    """Facts and switches of the readiness rules (defaults from domain.md sections 4-6).

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
        [
            "n1",
            "n2",
            "n2d",
            "n4",
            "c2",
            "c2d",
            "c3",
            "c3d",
            "c4",
            "c4a",
            "c4d",
            "t2a",
            "t2d",
            "m1",
            "m2",
            "m3",
            "g2",
            "a2",
            "a3",
            "a4",
            "h3",
            "e2",
        ],
        description="Families the rules recognise; an unknown pinned family is reported.",
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
        description="Supported GPU machine types and their GPU count (GKE Pod snapshot docs).",
    )
    gpu_accelerators: dict[str, list[str]] = Field(
        {
            "nvidia-l4": ["g2"],
            "nvidia-tesla-a100": ["a2"],
            "nvidia-a100-80gb": ["a2"],
            "nvidia-h100-80gb": ["a3"],
        },
        description="Supported accelerator label values and the machine families carrying them.",
    )
    multi_gpu_accelerators: list[str] = Field(
        ["nvidia-l4"], description="Accelerators on which a pod may use more than one GPU (L4)."
    )
    gke_version: str | None = Field(
        None,
        description="Cluster version (e.g. 1.35.0-gke.1738000) for version-gated rules; in kube "
        "mode read from /version. Unknown means the strictest (oldest) behaviour.",
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
    disabled: list[str] = Field([], description="Rule ids to skip entirely.")
    modes: dict[str, Mode] = Field(
        {}, description="Per-rule enforcement mode overriding the global/policy/namespace mode."
    )

    @field_validator("sandbox_compat")
    @classmethod
    def _sandbox_defaults(
        cls, value: dict[SandboxFeature, Literal["deny", "warn", "off"]]
    ) -> dict[SandboxFeature, Literal["deny", "warn", "off"]]:
        return {**SANDBOX_COMPAT_DEFAULTS, **value}

    @field_validator("gke_version", "gpu_subset_min_version")
    @classmethod
    def _gke_version_format(cls, value: str | None) -> str | None:
        if value is not None and not re.match(GKE_VERSION_PATTERN, value):
            raise ValueError(f"{value!r} is not a GKE version like 1.35.0-gke.1738000")
        return value


DIGEST_PINNED = re.compile(r"@sha256:[0-9a-f]{64}$")
"""An image reference pinned by digest (the tag, if any, is then only informative)."""


class InjectionSettings(BaseModel):
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


class StorageSettings(BaseModel):
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


class RestoreSettings(BaseModel):
    """Restore prediction at admission (cluster mode; README "Snapshots")."""

    on_miss: Literal["warn", "deny", "off"] = Field(
        "warn",
        description="A selected pod predicted to miss every Ready snapshot (it would cold-start "
        "silently): `warn` admits it with a warning, `deny` refuses it (for teams that want no "
        "silent cold start), `off` only writes the annotations. Default warn: the prediction "
        "is our model, not GKE's promise.",
    )
    rollout_warnings: bool = Field(
        True,
        description="Warn when a Deployment/StatefulSet/Job/CronJob template no longer matches "
        "any Ready snapshot of its policy (the rollout will cold-start).",
    )
    readiness_gate: bool = Field(
        False,
        description="Add the readiness gate snapready.io/restore-settled to selected pods; the "
        "leader keeps it False while the pod's own checkpoint uploads and while a pod predicted "
        "to restore waits for PodRestored (or GKE's fallback), else True. Off by default: only "
        "snapready sets that condition, so with it on and every replica down, new selected "
        'pods stay unready until a replica is back (README "Readiness gate").',
    )
    readiness_gate_timeout_seconds: float = Field(
        600.0,
        gt=0,
        description="After this many seconds since PodScheduled the gate turns True (reason "
        "Timeout) whatever the evidence, so no pod stays out of its Service forever; above "
        "the 30 s GKE's restores take and below a typical progressDeadlineSeconds (600 s).",
    )


TEMPLATE_PATH_PATTERN = r"^[A-Za-z0-9_-]+(\[\*\])?(\.[A-Za-z0-9_-]+(\[\*\])?)*$"
"""A template path: dot-separated keys, each optionally followed by ``[*]`` (every list item)."""


class ExtraWorkload(BaseModel):
    """One more custom resource whose objects embed pod templates (``workloads.extra``)."""

    model_config = ConfigDict(extra="forbid")

    group: str = Field(..., min_length=1, description="API group, e.g. `example.com`.")
    kind: str = Field(..., min_length=1, description="Kind, e.g. `InferencePool`.")
    resource: str = Field(
        ...,
        min_length=1,
        description="Plural resource name, as the webhook rules and the scope condition name it.",
    )
    templates: list[str] = Field(
        ...,
        min_length=1,
        description="Paths of the PodTemplateSpecs (`metadata` + `spec`) in the object, e.g. "
        "`spec.template` or `spec.groups[*].template`.",
    )

    @field_validator("templates")
    @classmethod
    def _paths(cls, value: list[str]) -> list[str]:
        for path in value:
            if not re.match(TEMPLATE_PATH_PATTERN, path):
                raise ValueError(f"{path!r}: use dot-separated keys, [*] for every list item")
        return value


class WorkloadSettings(BaseModel):
    """Custom resources judged like pod controllers (design.md, dispatch)."""

    extra: list[ExtraWorkload] = Field(
        default_factory=list,
        description="Custom resources beyond the built-in table (agent-sandbox, LeaderWorkerSet, "
        "Ray, KServe, JobSet, Argo Rollouts); an entry for a built-in group and kind replaces it. "
        "The chart's values.extraWorkloads fills this and adds the webhook rules.",
    )
