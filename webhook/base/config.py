"""Settings: one pydantic-settings model, validated once at start-up.

Precedence (lowest first): field defaults < YAML settings file (``--config`` or
``SNAPREADY_CONFIG_FILE``) < environment (``SNAPREADY_*``, nested with ``__``, e.g.
``SNAPREADY_SERVER__PORT=9443``) < command-line flags (passed as init arguments).
Every field documents its unit and why its default was chosen; the Helm chart's values mirror them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from webhook.base.errors import ConfigError
from webhook.base.reporting import ReportSettings
from webhook.base.section import Section
from webhook.base.sections import (
    InjectionSettings,
    RestoreSettings,
    RuleSettings,
    StorageSettings,
)
from webhook.base.tracking import (
    CheckpointSettings,
    LifecycleSettings,
    OriginSettings,
    OutcomeSettings,
    OwnershipSettings,
)
from webhook.base.types import FailurePolicy, Mode
from webhook.base.workload_kinds import WorkloadSettings

MiB = 1024 * 1024
PACKAGE_DIR = Path(__file__).resolve().parent.parent
DEFAULT_POLICY_DIR = PACKAGE_DIR / "assets" / "examples"
"""Embedded default policy directory (a copy of ``manifests/examples`` policies), for local runs."""


class ServerSettings(Section):
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
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info",
        description="Least severe log line written (JSON on stderr). debug adds an `admission "
        "object` line per review with the object redacted (docs: operations/logs.md).",
    )


class SourceSettings(Section):
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


class ScopeSettings(Section):
    """Which requests the API server sends (docs/operations/webhook-scope.md).

    ``dynamic``: in cluster mode the leader writes a CEL ``matchConditions`` entry
    (``snapready-scope``) on every webhook of the two configurations below, so only pods (and pod
    templates) a PodSnapshotPolicy can select, and the snapshot CRDs, reach snapready; everything
    else is admitted by the API server without a call, even when snapready is down.
    ``static``: no condition (every request the configurations' rules match is sent); in cluster
    mode the leader removes a ``snapready-scope`` condition left from an earlier dynamic run.
    File mode is always static (there is no configuration to write).
    """

    mode: Literal["static", "dynamic"] = Field(
        "static",
        description="`dynamic` (the chart's default) or `static`. Default static: a process "
        "started by hand knows no webhook configuration to reconcile.",
    )
    mutating_configuration: str = Field(
        "snapready", description="Name of snapready's MutatingWebhookConfiguration."
    )
    validating_configuration: str = Field(
        "snapready", description="Name of snapready's ValidatingWebhookConfiguration."
    )
    max_expression_chars: int = Field(
        16_384,
        ge=256,
        description="Longest condition written; beyond it the scope falls back to whole "
        "namespaces, then to no condition (never narrower than the policies).",
    )
    recheck_seconds: float = Field(
        30.0,
        gt=0,
        description="How often the live configurations are compared with the policies even "
        "without a policy change (repairs an edit by hand or a `kubectl apply`).",
    )


class LeaderSettings(Section):
    """Leader election on a ``coordination.k8s.io/v1`` Lease: only the leader writes to the cluster
    (webhook scope, origin records, events). Timings are client-go's defaults."""

    enabled: bool = Field(True, description="Elect a leader (cluster mode only).")
    lease_name: str = Field("snapready", description="Name of the Lease.")
    lease_namespace: str = Field(
        "",
        description="Namespace of the Lease; empty: $POD_NAMESPACE, else the service account's "
        "namespace file, else `default`.",
    )
    lease_duration_seconds: int = Field(
        15, ge=2, description="How long a lease holds without renewal (client-go default 15)."
    )
    renew_deadline_seconds: int = Field(
        10, ge=1, description="How long the leader retries renewing before it steps down (10)."
    )
    retry_period_seconds: int = Field(
        2, ge=1, description="Pause between acquire/renew attempts (client-go default 2)."
    )

    @model_validator(mode="after")
    def _ordered(self) -> LeaderSettings:
        # The kubernetes client's election Config exits the process on these; say it clearly.
        if not self.lease_duration_seconds > self.renew_deadline_seconds:
            raise ValueError("lease_duration_seconds must exceed renew_deadline_seconds")
        if not self.renew_deadline_seconds > 1.2 * self.retry_period_seconds:
            raise ValueError("renew_deadline_seconds must exceed 1.2 x retry_period_seconds")
        return self


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
    scope: ScopeSettings = ScopeSettings()
    restore: RestoreSettings = RestoreSettings()
    outcomes: OutcomeSettings = OutcomeSettings()
    checkpoint: CheckpointSettings = CheckpointSettings()
    leader: LeaderSettings = LeaderSettings()
    workloads: WorkloadSettings = WorkloadSettings()
    ownership: OwnershipSettings = OwnershipSettings()
    origin: OriginSettings = OriginSettings()
    lifecycle: LifecycleSettings = LifecycleSettings()
    reports: ReportSettings = ReportSettings()

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
        unknown_env_sections(settings_cls, os.environ)
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if config_file:
            sources.append(SettingsFile(settings_cls, yaml_file=str(config_file)))
        return tuple(sources)

    def annotation(self, name: str) -> str:
        """Full annotation key for ``name``, e.g. ``annotation(SPEC_HASH)`` (``base.keys``)."""
        return self.prefix + name


ENV_PREFIX = "SNAPREADY_"


def unknown_env_sections(settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
    """Refuse ``SNAPREADY_<NAME>__...`` variables whose ``<NAME>`` is no settings field
    (``SNAPREADY_LIFECYCLES__PRUNE``): pydantic-settings reads only the names it knows and
    would drop the rest without a word. Names without ``__`` are not judged: Kubernetes gives
    every container ``SNAPREADY_PORT``, ``SNAPREADY_SERVICE_HOST``... for a Service named
    ``snapready`` (docs: "Discovering services", environment variables), which must be left
    alone.

    Raises:
        ConfigError: naming each unknown variable (its value is never shown).
    """
    fields = set(settings_cls.model_fields)
    unknown = sorted(
        name
        for name in environ
        if name.upper().startswith(ENV_PREFIX)
        and "__" in name
        and name[len(ENV_PREFIX) :].split("__", 1)[0].lower() not in fields
    )
    if unknown:
        raise ConfigError(
            f"unknown settings variable(s) {', '.join(unknown)}: no settings section is named "
            "so (docs/reference/configuration.md)"
        )


class SettingsFile(YamlConfigSettingsSource):
    """The YAML settings file, which must exist and hold a mapping: pydantic-settings skips a
    missing file, so ``--config ci.yml`` for ``ci.yaml`` ran on the defaults without a word.

    Raises:
        ConfigError: the file is missing or unreadable, is not YAML, or is not a mapping.
    """

    def __init__(self, settings_cls: type[BaseSettings], yaml_file: str) -> None:
        path = Path(yaml_file).expanduser()
        if not path.exists():  # /dev/null is there: a file of no settings
            raise ConfigError(f"settings file {yaml_file}: not found")
        if path.is_dir():
            raise ConfigError(f"settings file {yaml_file}: a directory, not a file")
        super().__init__(settings_cls, yaml_file=yaml_file)

    def _read_file(self, file_path: Path | Traversable) -> dict[str, Any]:
        try:
            found = super()._read_file(file_path)
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            message = " ".join(str(exc).split())  # PyYAML's marks span lines
            raise ConfigError(f"settings file {file_path}: {message}") from None
        if not isinstance(found, dict):
            raise ConfigError(
                f"settings file {file_path}: a mapping of settings is expected, "
                f"not a {type(found).__name__}"
            )
        return found


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build settings from defaults, an optional YAML file, env and flag overrides.

    Args:
        config_file: YAML file with the same nested keys as ``Settings`` (optional).
        overrides: flag values; nested groups as dicts, ``None`` values are ignored.

    Raises:
        pydantic.ValidationError: any value is invalid (names the field).
        ConfigError: the file is missing or no YAML mapping, or a ``SNAPREADY_<NAME>__``
            variable names no section (``SettingsFile``, ``unknown_env_sections``).
    """
    clean = {key: value for key, value in overrides.items() if value is not None}
    if config_file is None:
        return Settings(**clean)

    class FileSettings(Settings):
        # A per-call subclass carries the file, so nothing leaks into os.environ.
        model_config = SettingsConfigDict(yaml_file=str(config_file))

    return FileSettings(**clean)
