"""The ``workloads`` settings section: custom resources whose objects embed pod templates.

A pydantic model nested in ``webhook.base.config.Settings`` (``workloads``); the built-in pod
controllers are ``kube.workloads``, and ``kube.custom_workloads`` reads objects by these paths.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from webhook.base.section import Section

TEMPLATE_PATH_PATTERN = r"^[A-Za-z0-9_-]+(\[\*\])?(\.[A-Za-z0-9_-]+(\[\*\])?)*$"
"""A template path: dot-separated keys, each optionally followed by ``[*]`` (every list item)."""


class ExtraWorkload(Section):
    """One more custom resource whose objects embed pod templates (``workloads.extra``)."""

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


class WorkloadSettings(Section):
    """Custom resources judged like pod controllers (design.md, dispatch)."""

    extra: list[ExtraWorkload] = Field(
        default_factory=list,
        description="Custom resources beyond the built-in table (agent-sandbox, LeaderWorkerSet, "
        "Ray, KServe, JobSet, Argo Rollouts); an entry for a built-in group and kind replaces it. "
        "The chart's values.extraWorkloads fills this and adds the webhook rules.",
    )
