"""Label selectors with exact Kubernetes semantics, and the per-namespace policy index.

Semantics follow k8s.io/apimachinery/pkg/labels and metav1.LabelSelectorAsSelector:
- ``matchLabels`` and every ``matchExpressions`` term must all hold (AND);
- ``In``: the label exists and its value is in ``values``; ``NotIn``: the label is absent OR its
  value is not in ``values``; ``Exists`` / ``DoesNotExist``: presence only (no ``values``);
- an empty selector (``{}``) selects everything; a null selector selects nothing.
Pure module: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from webhook.base.errors import ConfigError

SelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
_OPERATORS: frozenset[str] = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


@dataclass(frozen=True)
class Requirement:
    """One ``matchExpressions`` term (or a ``matchLabels`` pair as ``In [value]``)."""

    key: str
    operator: SelectorOperator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement (Kubernetes semantics)."""
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        if self.operator == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if self.operator == "Exists":
            return self.key in labels
        return self.key not in labels


@dataclass(frozen=True)
class LabelSelector:
    """A compiled ``metav1.LabelSelector``; ``requirements`` empty means "select everything"."""

    requirements: tuple[Requirement, ...] = ()

    @property
    def is_empty(self) -> bool:
        """True for ``{}``: every object of the namespace is selected."""
        return not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether every requirement holds for ``labels``."""
        return all(requirement.matches(labels) for requirement in self.requirements)

    def required_keys(self) -> frozenset[str]:
        """Label keys every selected object must carry (``In``/``Exists`` terms, matchLabels)."""
        return frozenset(r.key for r in self.requirements if r.operator in ("In", "Exists"))


def compile_selector(selector: Any, *, where: str = "selector") -> LabelSelector:
    """Compile a ``LabelSelector`` dict.

    Args:
        selector: ``{"matchLabels": {...}, "matchExpressions": [...]}``; ``{}`` selects all.
        where: field path used in error messages.

    Raises:
        ConfigError: wrong types, unknown operator, ``values`` missing for In/NotIn or present
            for Exists/DoesNotExist (the API server rejects those too).
    """
    if not isinstance(selector, dict):
        raise ConfigError(f"{where}: must be a LabelSelector object, got {type(selector).__name__}")
    requirements: list[Requirement] = []
    match_labels = selector.get("matchLabels") or {}
    if not isinstance(match_labels, dict):
        raise ConfigError(f"{where}.matchLabels: must be a map of string to string")
    for key, value in match_labels.items():
        if not isinstance(value, str):
            raise ConfigError(f"{where}.matchLabels[{key!r}]: value must be a string")
        requirements.append(Requirement(str(key), "In", frozenset({value})))
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise ConfigError(f"{where}.matchExpressions: must be a list")
    for index, term in enumerate(expressions):
        requirements.append(_compile_expression(term, f"{where}.matchExpressions[{index}]"))
    return LabelSelector(tuple(requirements))


def _compile_expression(term: Any, where: str) -> Requirement:
    if not isinstance(term, dict) or not isinstance(term.get("key"), str):
        raise ConfigError(f"{where}: needs a string 'key'")
    operator = term.get("operator")
    if operator not in _OPERATORS:
        raise ConfigError(
            f"{where}.operator: {operator!r} is not In, NotIn, Exists or DoesNotExist"
        )
    values = term.get("values") or []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ConfigError(f"{where}.values: must be a list of strings")
    if operator in ("In", "NotIn") and not values:
        raise ConfigError(f"{where}.values: must be non-empty for {operator}")
    if operator in ("Exists", "DoesNotExist") and values:
        raise ConfigError(f"{where}.values: must be empty for {operator}")
    return Requirement(term["key"], operator, frozenset(values))


@dataclass(frozen=True)
class Policy:
    """The parts of a PodSnapshotPolicy the webhook uses (not the whole object).

    Attributes:
        name, namespace: object identity.
        selector: compiled ``spec.selector``.
        storage_config_name: ``spec.storageConfigName``.
        scope: ``spec.snapshotScope`` (``whole-pod`` default, or ``rootfs-only``).
        trigger_type: ``spec.triggerConfig.type`` (``workload``/``manual``/...), None if unset.
        enforcement: value of the policy's ``<prefix>enforcement`` annotation, if any.
        grouping_labels: ``spec.snapshotGroupingRules.groupByLabelValue.labels``.
        has_retention: whether ``spec.retentionConfig`` is set.
        post_checkpoint: ``spec.triggerConfig.postCheckpoint`` (``resume``, the CRD's default,
            or ``stop``).
        created: ``metadata.creationTimestamp`` (RFC 3339; "" from files): the audit tells
            templates changed before the policy existed (``snapshots.audit``). Not compared.
    """

    name: str
    namespace: str
    selector: LabelSelector
    storage_config_name: str
    scope: str = "whole-pod"
    trigger_type: str | None = None
    enforcement: str | None = None
    grouping_labels: tuple[str, ...] = ()
    has_retention: bool = False
    post_checkpoint: str = "resume"
    created: str = field(default="", compare=False)


@dataclass
class PolicyIndex:
    """Policies by namespace; ``select`` is the hot-path lookup (no I/O).

    An unselected pod in a namespace without policies costs one dict lookup.
    """

    by_namespace: dict[str, tuple[Policy, ...]] = field(default_factory=dict)

    @classmethod
    def build(cls, policies: Iterable[Policy]) -> PolicyIndex:
        """Index ``policies``; within a namespace they are sorted by name (stable output)."""
        grouped: dict[str, list[Policy]] = {}
        for policy in policies:
            grouped.setdefault(policy.namespace, []).append(policy)
        return cls({ns: tuple(sorted(ps, key=lambda p: p.name)) for ns, ps in grouped.items()})

    def select(self, namespace: str, labels: Mapping[str, str]) -> tuple[Policy, ...]:
        """Every policy of ``namespace`` whose selector matches ``labels`` (sorted by name)."""
        candidates = self.by_namespace.get(namespace)
        if not candidates:
            return ()
        return tuple(p for p in candidates if p.selector.matches(labels))

    def all(self) -> tuple[Policy, ...]:
        """Every indexed policy, by namespace then name."""
        return tuple(p for ns in sorted(self.by_namespace) for p in self.by_namespace[ns])

    def __len__(self) -> int:
        return sum(len(ps) for ps in self.by_namespace.values())
