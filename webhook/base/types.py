"""Shared type aliases and protocols (base layer: imports nothing from the package).

The Kubernetes objects stay plain JSON dicts (``RawObject``) from the request body to the patch;
typed views exist only at the HTTP edge (``review``) and for settings (``config``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

RawObject = dict[str, Any]
"""A Kubernetes object exactly as decoded from JSON (``{"apiVersion": ..., "metadata": ...}``)."""

Labels = Mapping[str, str]


def mapping(value: Any) -> RawObject:
    """``value`` if it is a JSON object, else ``{}`` (absent, null or a wrong type in hostile or
    partial input: readers of raw objects never crash on shape)."""
    return value if isinstance(value, dict) else {}


Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
Endpoint = Literal["mutate", "validate"]
Mode = Literal["enforce", "warn", "audit"]
"""Enforcement mode: ``enforce`` denies, ``warn`` allows with warnings, ``audit`` only logs."""
Severity = Literal["deny", "warn"]
"""A finding's own weight: ``deny`` findings follow the mode; ``warn`` findings are advisory."""
FailurePolicy = Literal["Fail", "Ignore"]
SnapshotScope = Literal["whole-pod", "rootfs-only"]
JsonPatchOp = dict[str, Any]
"""One RFC 6902 operation: ``{"op": "add", "path": "/metadata/annotations", "value": {...}}``."""


@dataclass(frozen=True, order=True)
class Finding:
    """One problem found by a rule.

    Attributes:
        path: field path in the submitted object, e.g. ``spec.containers[1].resources.limits``.
        rule: stable rule id from the design table, e.g. ``gpu-multi-l4``.
        message: what is wrong and what would be accepted (<= ~120 chars preferred).
        severity: ``deny`` (follows the enforcement mode) or ``warn`` (always only a warning).
    """

    path: str
    rule: str
    message: str = field(compare=True)
    severity: Severity = "deny"
