"""Warnings for a ``<prefix>enforcement`` label or annotation that is no mode, read by the caches.

Admission ignores such a value (``admission.decision.effective_mode``): a Namespace labelled
``snapready.io/enforcement=audti`` keeps the global mode for its pods, a policy annotated so
follows the namespace label. A policy created or updated with it gets ``policy-enforcement`` at
admission; one created before snapready was installed, and every Namespace (no webhook of
snapready's sees one), are only told of here: one warning per object and value, not per watch
event (a namespace's other labels and annotations change too), again after a restart.
"""

from __future__ import annotations

import logging
from typing import Any

from webhook.base.keys import ENFORCEMENT
from webhook.base.text import clip
from webhook.base.types import MODES, RawObject
from webhook.kube.matching import Policy
from webhook.snapshots.facts import namespace_labels
from webhook.snapshots.state import parse_policy

log = logging.getLogger("snapready.kube")
MAX_REMEMBERED = 10_000
"""Objects whose bad value was said (forgotten all at once beyond it: said again, bounded)."""


def where(obj: RawObject) -> str:
    """``<kind> <namespace>/<name>``, or ``<kind> <name>`` for a cluster-scoped object."""
    metadata = obj.get("metadata")
    meta: dict[str, Any] = metadata if isinstance(metadata, dict) else {}
    namespace = meta.get("namespace")
    return f"{obj.get('kind', 'object')} {f'{namespace}/' if namespace else ''}{meta.get('name')}"


class EnforcementValues:
    """The caches' converters for Namespaces and PodSnapshotPolicies that warn of a
    ``<prefix>enforcement`` value that is no mode (module docstring); any watch thread."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._said: dict[str, object] = {}

    def namespace_labels(self, obj: RawObject) -> dict[str, str] | None:
        """The namespace's own labels (``facts.namespace_labels``; None without any)."""
        labels = namespace_labels(obj, self.prefix)
        instead = "its pods follow their policies' annotations, else the global mode"
        self._check(obj, "label", labels.get(self.prefix + ENFORCEMENT), instead)
        return labels or None

    def policy(self, obj: RawObject) -> Policy:
        """``parse_policy`` (raises ``ConfigError``)."""
        policy = parse_policy(obj, prefix=self.prefix, where=where(obj))
        instead = "its pods follow the namespace label, else the global mode"
        self._check(obj, "annotation", policy.enforcement, instead)
        return policy

    def _check(self, obj: RawObject, what: str, mode: object, instead: str) -> None:
        name = where(obj)
        if mode is None or mode in MODES:
            self._said.pop(name, None)  # fixed: a later typo is said again
            return
        if self._said.get(name) == mode:
            return
        if len(self._said) >= MAX_REMEMBERED:
            self._said.clear()
        self._said[name] = mode
        log.warning(
            "%s: %s %s%s=%s is not enforce, warn or audit: ignored (%s)",
            name, what, self.prefix, ENFORCEMENT, repr(clip(mode)), instead,
        )  # fmt: skip
