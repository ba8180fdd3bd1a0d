"""Settings: one pydantic-settings model, validated once at start-up.

Precedence (lowest first): field defaults < YAML settings file (``--config`` or
``SNAPREADY_CONFIG_FILE``) < environment (``SNAPREADY_*``, nested with ``__``, e.g.
``SNAPREADY_SERVER__PORT=9443``) < command-line flags (passed as init arguments).
Every field documents its unit and why its default was chosen; the Helm chart's values mirror them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from webhook.base.types import FailurePolicy, Mode, Severity

MiB = 1024 * 1024
PACKAGE_DIR = Path(__file__).resolve().parent.parent
DEFAULT_POLICY_DIR = PACKAGE_DIR / "assets" / "examples"
"""Embedded default policy directory (a copy of ``manifests/examples`` policies), for local runs."""


class ServerSettings(BaseModel):
    """HTTPS listener and request limits."""

    host: str = Field("127.0.0.1", description="Listen address; the chart sets 0.0.0.0.")
    port: int = Field(
        8443, ge=1, le=65535, description="HTTPS port. The chart uses 10250 (GKE private clusters)."
    )
    cert_file: Path = Field(Path("certs/tls.crt"), description="PEM serving certificate (chain).")
    key_file: Path = Field(Path("certs/tls.key"), description="PEM private key, mode 0600.")
    generate_certs: bool = Field(
        True,
        description="Create a local CA and serving cert when the files are missing (local only;"
        " the chart turns it off).",
    )
    cert_reload_seconds: float = Field(
        10.0, gt=0, description="Seconds between digest polls of cert/key for hot reload."
    )
    metrics_port: int = Field(
        8080, ge=0, le=65535, description="Plain-HTTP port for /metrics; 0 disables it."
    )
    max_body_bytes: int = Field(
        7 * MiB,
        ge=1024,
        description="Body cap in bytes. API objects are at most ~3 MiB (etcd limit 1.5 MiB, "
        "plus encoding) and a review carries object and oldObject, hence 7 MiB.",
    )
    max_concurrency: int = Field(
        1024,
        ge=1,
        description="Open connections (idle keep-alive ones included, as uvicorn counts them) "
        "or running requests per worker before new requests get 503. Each API server replica "
        "keeps a pool of keep-alive connections to the webhook (client-go transport) and opens "
        "more under bursts; 1024 stays clear of that, while memory stays bounded by "
        "max_inflight_body_bytes and max_header_bytes, and connections that send nothing are "
        "closed after request_timeout_seconds.",
    )
    max_header_bytes: int = Field(
        64 * 1024,
        ge=1024,
        description="Max bytes of a request line plus headers before 431 and a close. The API "
        "server's webhook requests carry a few small headers (under 1 KiB); 64 KiB is far above "
        "that and bounds what a client can make a connection buffer (httptools has no limit).",
    )
    max_inflight_body_bytes: int = Field(
        64 * MiB,
        ge=1024,
        description="Bytes of request bodies one worker buffers at once before answering 503: "
        "bounds memory under many large bodies (a typical pod review is 5-20 KiB).",
    )
    keepalive_seconds: int = Field(
        65, ge=1, description="Idle keep-alive; above the API server's 60 s idle pool timeout."
    )
    request_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description="Max seconds for a TLS handshake, to receive a request's headers, and again "
        "its body, before the connection is closed (408 for the body); the API server's webhook "
        "timeout is <= 30 s. Also closes connections that never send a request.",
    )
    drain_seconds: float = Field(
        5.0,
        ge=0,
        description="After SIGTERM, serve this long with /readyz false so endpoints drop us.",
    )
    graceful_timeout_seconds: float = Field(
        20.0, ge=0, description="Max seconds to finish in-flight requests after the drain."
    )
    log_level: Literal["debug", "info", "warning", "error"] = "info"


class SourceSettings(BaseModel):
    """Where policies (and cluster facts) come from."""

    kind: Literal["files", "kube"] = Field(
        "files", description="`files`: a directory of YAML; `kube`: list+watch the API server."
    )
    policy_dir: Path = Field(
        DEFAULT_POLICY_DIR, description="Directory of PodSnapshotPolicy/StorageConfig YAML files."
    )
    kubeconfig: Path | None = Field(None, description="Kubeconfig; default: in-cluster config.")
    resync_seconds: float = Field(
        300.0,
        gt=0,
        description="Server-side watch timeout (each watch lasts 1-2x this, like client-go's "
        "5 min reflector), and how often /version and not-served APIs are re-checked.",
    )
    request_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description="Connect/read timeout of list and /version calls; also added to a watch's "
        "timeoutSeconds as its read timeout, so a silent broken connection is noticed.",
    )
    backoff_initial_seconds: float = Field(
        0.5, gt=0, description="First retry delay after an API error (jittered, doubles)."
    )
    backoff_max_seconds: float = Field(
        30.0, gt=0, description="Retry delay cap; keeps a down API server from being hammered."
    )
    list_page_size: int = Field(
        500, ge=1, description="Items per list page (client-go's default chunk size)."
    )


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
    """Facts and switches of the readiness rules (defaults from domain.md sections 4-6)."""

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


class Settings(BaseSettings):
    """All snapready settings. Raises ``pydantic.ValidationError`` on invalid values."""

    model_config = SettingsConfigDict(
        env_prefix="SNAPREADY_", env_nested_delimiter="__", extra="forbid"
    )

    prefix: str = Field(
        "snapready.io/", description="Annotation/label prefix for everything snapready writes."
    )
    enforcement: Mode = Field("enforce", description="Global mode when no override applies.")
    failure_policy: FailurePolicy = Field(
        "Fail",
        description="Shared by the chart's webhook failurePolicy and the answer to internal errors "
        "(Fail: deny with an error id; Ignore: allow with a warning).",
    )
    server: ServerSettings = ServerSettings()
    source: SourceSettings = SourceSettings()
    rules: RuleSettings = RuleSettings()
    injection: InjectionSettings = InjectionSettings()
    storage: StorageSettings = StorageSettings()

    @field_validator("prefix")
    @classmethod
    def _prefix_ends_with_slash(cls, value: str) -> str:
        if not value.endswith("/"):
            raise ValueError("prefix must end with '/', e.g. 'snapready.io/'")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Flags (init) > env > YAML file > defaults.

        The YAML file is ``model_config["yaml_file"]`` (set by ``load_settings``) or, when that is
        unset, ``SNAPREADY_CONFIG_FILE`` (how the chart points the server at its ConfigMap).
        """
        config_file = settings_cls.model_config.get("yaml_file") or os.environ.get(
            "SNAPREADY_CONFIG_FILE"
        )
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if config_file:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=config_file))
        return tuple(sources)

    def annotation(self, name: str) -> str:
        """Full annotation key for ``name``, e.g. ``annotation("spec-hash")``."""
        return self.prefix + name


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build settings from defaults, an optional YAML file, env and flag overrides.

    Args:
        config_file: YAML file with the same nested keys as ``Settings`` (optional).
        overrides: flag values; nested groups as dicts, ``None`` values are ignored.

    Raises:
        pydantic.ValidationError: any value is invalid (names the field).
    """
    clean = {key: value for key, value in overrides.items() if value is not None}
    if config_file is None:
        return Settings(**clean)

    class FileSettings(Settings):
        # A per-call subclass carries the file, so nothing leaks into os.environ.
        model_config = SettingsConfigDict(yaml_file=str(config_file))

    return FileSettings(**clean)
