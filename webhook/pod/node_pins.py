"""What a pod states about its machine, read from its spec alone (pure: no cluster facts, no I/O).

Used by the readiness rules (``webhook/rules``):

- ``node_selection`` / ``node_pins``: the node labels a pod selects through ``spec.nodeSelector``
  and *required* node affinity (``requiredDuringSchedulingIgnoredDuringExecution``). Kubernetes
  semantics (k8s.io/component-helpers/scheduling/corev1/nodeaffinity): nodeSelector AND affinity;
  the affinity's ``nodeSelectorTerms`` are ORed, the expressions inside one term ANDed. Only
  ``In`` (and a nodeSelector pair) restricts values; ``Exists`` requires the label; ``NotIn``,
  ``DoesNotExist``, ``Gt``, ``Lt`` never pin a pod to anything, but they do rule nodes out: they
  are kept per term as ``Exclusion`` entries (k8s.io/apimachinery labels ``Requirement.Matches``:
  ``NotIn`` admits a node without the label, ``Gt``/``Lt`` need the label and compare int64s; a
  term with a malformed requirement matches no node, component-helpers ``nodeSelectorTerm``
  ``parseErrs``). The legacy label
  ``beta.kubernetes.io/instance-type`` reads as ``node.kubernetes.io/instance-type``: nodes carry
  both with one value (k8s.io/cloud-provider controllers/node ``labelReconcileInfo``), so a pod
  naming both needs both values at once. ``matchFields`` ``metadata.name In`` (how the DaemonSet
  controller binds a pod to its node: pkg/controller/daemon/util
  ``ReplaceDaemonSetPodNodeNameNodeAffinity``) is kept under the pseudo key ``NODE_NAME``.
Resource counts (GPUs, TPUs) live in ``webhook.pod.resources``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Final, Literal, NamedTuple, get_args

import orjson

from webhook.base.lru import Lru
from webhook.base.types import RawObject
from webhook.kube.canonical import orjson_is_jcs
from webhook.kube.gke import (
    LABEL_ALIASES,
    NODE_NAME,
)
from webhook.pod.context import indexed_dicts, join_path, list_of_dicts

ExclusionOperator = Literal["NotIn", "Gt", "Lt", "DoesNotExist"]
_EXCLUDING: frozenset[str] = frozenset(get_args(ExclusionOperator))
_INTEGER = re.compile(r"([+-]?)0*([0-9]+)")
_INT64_DIGITS = 19  # len(str(2**63 - 1))


def _int64(text: str) -> int | None:
    """``text`` as Go's ``strconv.ParseInt(text, 10, 64)`` reads it; None when that fails."""
    match = _INTEGER.fullmatch(text)
    if match is None or len(match.group(2)) > _INT64_DIGITS:
        return None  # checked before int(): Python refuses to parse 4300+ digits
    value = int(match.group(2)) * (-1 if match.group(1) == "-" else 1)
    return value if -(2**63) <= value < 2**63 else None


@dataclass(frozen=True)
class Exclusion:
    """A ``NotIn``, ``Gt``, ``Lt`` or ``DoesNotExist`` expression of one affinity term.

    Attributes:
        operator: the expression's operator.
        values: its string values as written (``Gt``/``Lt`` take exactly one integer).
    """

    operator: ExclusionOperator
    values: tuple[str, ...]

    def admits(self, value: str | None) -> bool:
        """Whether a node whose label has ``value`` (None: no such label) passes.

        Kubernetes semantics (k8s.io/apimachinery/pkg/labels ``Requirement.Matches`` and
        ``NewRequirement``): ``NotIn`` passes nodes without the label; ``DoesNotExist`` only
        those; ``Gt``/``Lt`` need the label and compare it as an int64 with the single value.
        A requirement ``NewRequirement`` refuses (``NotIn`` without values, ``Gt`` with two,
        a non-integer bound, ``DoesNotExist`` with values) matches no node: the scheduler
        drops the whole term (component-helpers ``nodeSelectorTerm.parseErrs``).
        """
        if self.operator == "DoesNotExist":
            return value is None and not self.values
        if self.operator == "NotIn":
            return bool(self.values) and (value is None or value not in self.values)
        bound = _int64(self.values[0]) if len(self.values) == 1 else None
        number = None if value is None else _int64(value)
        if bound is None or number is None:
            return False
        return number > bound if self.operator == "Gt" else number < bound


@dataclass(frozen=True)
class LabelPin:
    """What a pod's node selection says about one node label.

    Attributes:
        key: the node label, e.g. ``cloud.google.com/machine-family`` (GA key for aliases;
            ``NODE_NAME`` for ``matchFields`` node names).
        values: every value some scheduling path allows (nodeSelector value, ``In`` values).
        exhaustive: every path restricts the label to ``values``: the pod is pinned by it.
        required: every path needs the label to exist (``In`` or ``Exists``).
        path: field path of the first place that states it (nodeSelector first, GA key before
            its legacy alias).
        value_paths: ``(value, path)`` for values first allowed by a later affinity term than
            ``path`` (terms are ORed: a finding about such a value points at the term that
            allows it); empty when ``path`` states every value.
    """

    key: str
    values: frozenset[str]
    exhaustive: bool
    required: bool
    path: str
    value_paths: tuple[tuple[str, str], ...] = ()

    def path_of(self, value: str) -> str:
        """Field path of the first statement that allows ``value`` (``path`` by default)."""
        return next((where for v, where in self.value_paths if v == value), self.path)

    @property
    def mentioned(self) -> bool:
        """True when the pod asks for the label at all (a value, or ``Exists`` everywhere)."""
        return bool(self.values) or self.required


@dataclass(frozen=True)
class NodeSelection:
    """A pod's node selection, aggregated and per affinity term.

    Attributes:
        pins: ``{label key: LabelPin}`` over nodeSelector AND the ORed affinity terms.
        terms: per required-affinity term, the ``In`` values it allows by key (aliases folded,
            ``NODE_NAME`` included); empty when the pod has no required node affinity.
        terms_path: field path of ``nodeSelectorTerms`` (empty when there are none).
        exclusions: per term (same order as ``terms``), its ``Exclusion`` expressions by label
            key (aliases folded).
        selector: the nodeSelector's ``(key, value)`` pairs (aliases folded).
        requirements: per term, every requirement as written (``Requirement``; aliases folded,
            ``matchFields`` names under ``NODE_NAME``); an empty term matches no node
            (k8s.io/component-helpers nodeaffinity ``nodeSelectorTerm``).
    """

    pins: dict[str, LabelPin]
    terms: tuple[dict[str, frozenset[str]], ...] = ()
    terms_path: str = ""
    exclusions: tuple[dict[str, tuple[Exclusion, ...]], ...] = ()
    selector: tuple[tuple[str, str], ...] = ()
    requirements: tuple[tuple[Requirement, ...], ...] = ()


class Requirement(NamedTuple):
    """One node selector requirement of an affinity term: label ``key`` (GA key for an alias),
    ``operator`` and its string ``values`` (a set: membership is what Kubernetes asks)."""

    key: str
    operator: str
    values: frozenset[str]

    def valid(self) -> bool:
        """Whether Kubernetes can parse it (k8s.io/apimachinery labels ``NewRequirement``):
        ``In``/``NotIn`` need values, ``Exists``/``DoesNotExist`` none, ``Gt``/``Lt`` one
        integer; a term with an invalid one matches no node."""
        if self.operator in ("In", "NotIn"):
            return bool(self.values)
        if self.operator in ("Exists", "DoesNotExist"):
            return not self.values
        if self.operator in ("Gt", "Lt"):
            return len(self.values) == 1 and _int64(next(iter(self.values))) is not None
        return False

    def matches(self, value: str | None) -> bool:
        """Whether a node whose label is ``value`` (None: no such label) meets it
        (``Requirement.Matches`` in k8s.io/apimachinery labels)."""
        operator = self.operator
        if operator == "In":
            return value is not None and value in self.values
        if operator == "NotIn":
            return value is None or value not in self.values
        if operator == "Exists":
            return value is not None
        if operator == "DoesNotExist":
            return value is None
        if operator in ("Gt", "Lt") and len(self.values) == 1 and value is not None:
            bound, number = _int64(next(iter(self.values))), _int64(value)
            if bound is None or number is None:
                return False
            return number > bound if operator == "Gt" else number < bound
        return False


def _requirements(term: RawObject) -> tuple[Requirement, ...]:
    """One term's requirements (``NodeSelection.requirements``)."""
    out = []
    for expression in list_of_dicts(term.get("matchExpressions")):
        key, operator, raw = (expression.get(k) for k in ("key", "operator", "values"))
        values = frozenset(v for v in (raw if isinstance(raw, list) else ()) if isinstance(v, str))
        if isinstance(key, str) and isinstance(operator, str):
            out.append(Requirement(LABEL_ALIASES.get(key, key), operator, values))
    for expression in list_of_dicts(term.get("matchFields")):
        raw = expression.get("values")
        values = frozenset(v for v in (raw if isinstance(raw, list) else ()) if isinstance(v, str))
        if expression.get("key") == "metadata.name":
            out.append(Requirement(NODE_NAME, str(expression.get("operator")), values))
    return tuple(out)


@dataclass
class _TermPin:
    values: frozenset[str] | None = None  # None: only Exists seen in this term
    path: str = ""
    legacy: bool = False  # path points at a legacy alias (a GA expression replaces it)


def _affinity_terms(spec: RawObject) -> list[tuple[int, RawObject]]:
    affinity = spec.get("affinity")
    node = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required = (
        node.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(node, dict)
        else None
    )
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    return indexed_dicts(terms)


def _restrict(pin: _TermPin, expression: RawObject, path: str, legacy: bool) -> None:
    """Intersect ``pin`` with one ``In`` expression (expressions of a term are ANDed)."""
    raw = expression.get("values")
    values = frozenset(v for v in (raw if isinstance(raw, list) else ()) if isinstance(v, str))
    if pin.values is None or (pin.legacy and not legacy):
        pin.path, pin.legacy = path, legacy  # where the pod states the pin: first In, GA first
    pin.values = values if pin.values is None else pin.values & values


def _exclusions(term: RawObject) -> dict[str, tuple[Exclusion, ...]]:
    """One term's ``NotIn``/``Gt``/``Lt``/``DoesNotExist`` expressions by label key (GA keys
    for aliases: a node carries both with one value)."""
    out: dict[str, tuple[Exclusion, ...]] = {}
    for expression in list_of_dicts(term.get("matchExpressions")):
        key, operator = expression.get("key"), expression.get("operator")
        if not isinstance(key, str) or not isinstance(operator, str):
            continue  # a JSON object as the operator (before the API server checks it)
        if operator not in _EXCLUDING:
            continue
        raw = expression.get("values")
        values = tuple(v for v in (raw if isinstance(raw, list) else ()) if isinstance(v, str))
        canonical = LABEL_ALIASES.get(key, key)
        out[canonical] = (*out.get(canonical, ()), Exclusion(operator, values))  # type: ignore[arg-type]
    return out


def _term_pins(term: RawObject, term_path: str) -> dict[str, _TermPin]:
    """Keys one term restricts: ``In`` values intersected, ``Exists`` noted, others ignored
    (``_exclusions`` reads them); ``matchFields`` ``metadata.name In`` (the only field nodes
    can be selected by) as ``NODE_NAME``."""
    pins: dict[str, _TermPin] = {}
    for index, expression in indexed_dicts(term.get("matchExpressions")):
        key, operator = expression.get("key"), expression.get("operator")
        if not isinstance(key, str) or operator not in ("In", "Exists"):
            continue
        path = join_path(term_path, "matchExpressions", index)
        canonical = LABEL_ALIASES.get(key, key)
        pin = pins.setdefault(canonical, _TermPin(path=path, legacy=canonical != key))
        if operator == "In":
            _restrict(pin, expression, path, canonical != key)
    for index, expression in indexed_dicts(term.get("matchFields")):
        if expression.get("key") == "metadata.name" and expression.get("operator") == "In":
            pin = pins.setdefault(NODE_NAME, _TermPin())
            _restrict(pin, expression, join_path(term_path, "matchFields", index), False)
    return pins


def _aggregate(terms: list[dict[str, _TermPin]]) -> dict[str, LabelPin]:
    """Union of the terms (they are ORed): exhaustive only when every term has ``In``."""
    pins: dict[str, LabelPin] = {}
    for key in sorted({key for term in terms for key in term}):
        stated = [term.get(key) for term in terms]
        present = [pin for pin in stated if pin is not None]
        values = frozenset().union(*(p.values for p in present if p.values is not None))
        first = present[0]
        # Terms are ORed: a value the first term does not allow is allowed (and must be fixed)
        # in the first later term that names it.
        later = {
            value: next(p.path for p in present if p.values is not None and value in p.values)
            for value in values - (first.values or frozenset())
        }
        pins[key] = LabelPin(
            key=key,
            values=values,
            exhaustive=all(p is not None and p.values is not None for p in stated),
            required=all(p is not None for p in stated),
            path=first.path,
            value_paths=tuple(sorted(later.items())),
        )
    return pins


SELECTION_MEMO_SIZE: Final = 256
"""Node selections remembered by content (a few hundred bytes each)."""
SELECTION_MAX_KEY_BYTES: Final = 4096
"""Largest nodeSelector + affinity (orjson bytes) remembered: real ones are ~100 bytes, and a
tenant's megabyte selectors (admission runs before the API server validates the pod) must not
stay in memory."""
_selections: Lru[bytes, NodeSelection] = Lru(SELECTION_MEMO_SIZE)


def node_selection(spec: RawObject, spec_path: str) -> NodeSelection:
    """``selection_of(spec, spec_path)``, remembered by content: the mutating call (prediction,
    driver pin) and the validating call (placement rules) of a pod, and the replicas of its
    template, read the same nodeSelector and affinity (~7 us each for review 03's pod, ~2 us
    looked up). The result is shared: treat it as read-only.

    The key is the SHA-256 of orjson's bytes of ``spec_path``, ``nodeSelector`` and
    ``affinity`` (an absent or empty one as ``{}``). Only plain JSON is remembered
    (``kube.canonical.orjson_is_jcs``: exact JSON types, no float, ASCII keys),
    so no two values orjson writes alike share a key (a YAML date and the same date quoted, an
    enum and its value, NaN and null); nor is a key over ``SELECTION_MAX_KEY_BYTES``.
    """
    selector, affinity = spec.get("nodeSelector") or {}, spec.get("affinity") or {}
    if not (orjson_is_jcs(selector) and orjson_is_jcs(affinity)):
        return selection_of(spec, spec_path)
    try:
        raw = orjson.dumps((spec_path, selector, affinity))
    except orjson.JSONEncodeError:  # deeper than 255 levels, an int beyond 64 bits
        return selection_of(spec, spec_path)
    if len(raw) > SELECTION_MAX_KEY_BYTES:
        return selection_of(spec, spec_path)
    key = hashlib.sha256(raw).digest()
    known = _selections.get(key)
    if known is None:
        known = selection_of(spec, spec_path)
        _selections.put(key, known)
    return known


def selection_of(spec: RawObject, spec_path: str) -> NodeSelection:
    """Every node label the pod's nodeSelector or required node affinity mentions.

    Args:
        spec: the PodSpec dict.
        spec_path: its field path in the submitted object (``spec``, ``spec.template.spec``).

    Returns:
        A ``NodeSelection``; labels the pod never mentions are absent from ``pins``. A
        nodeSelector pair intersected with an exhaustive affinity that excludes it (or a GA
        instance type contradicting its legacy alias) yields empty ``values``: the pod can never
        schedule. Malformed parts are ignored, never raised on.
    """
    raw_terms = _affinity_terms(spec)
    base = ""
    terms: list[dict[str, _TermPin]] = []
    exclusions = tuple(_exclusions(term) for _, term in raw_terms)
    if raw_terms:
        base = join_path(
            spec_path,
            "affinity",
            "nodeAffinity",
            "requiredDuringSchedulingIgnoredDuringExecution",
            "nodeSelectorTerms",
        )
        terms = [_term_pins(term, join_path(base, i)) for i, term in raw_terms]
    pins = _aggregate(terms)
    selector = spec.get("nodeSelector")
    selected: set[str] = set()
    pairs = list(selector.items()) if isinstance(selector, dict) else []
    if any(key in LABEL_ALIASES for key, _ in pairs):
        # GA keys first: a legacy alias is intersected into the GA pin, whose path is kept.
        pairs.sort(key=_legacy_last)
    for key, value in pairs:
        if not isinstance(key, str) or not isinstance(value, str):
            continue
        canonical = LABEL_ALIASES.get(key, key)
        previous = pins.get(canonical)
        values = frozenset({value})
        if previous is not None and previous.exhaustive:
            values &= previous.values
        path = join_path(spec_path, "nodeSelector", key)
        if previous is not None and canonical in selected:
            path = previous.path
        pins[canonical] = LabelPin(canonical, values, exhaustive=True, required=True, path=path)
        selected.add(canonical)
    per_term = tuple(
        {key: pin.values for key, pin in term.items() if pin.values is not None} for term in terms
    )
    folded = tuple(
        (LABEL_ALIASES.get(key, key), value)
        for key, value in pairs
        if isinstance(key, str) and isinstance(value, str)
    )
    requirements = tuple(_requirements(term) for _, term in raw_terms)
    return NodeSelection(pins, per_term, base, exclusions, folded, requirements)


def _legacy_last(pair: tuple[Any, Any]) -> bool:
    return pair[0] in LABEL_ALIASES


def node_pins(spec: RawObject, spec_path: str) -> dict[str, LabelPin]:
    """``node_selection(spec, spec_path).pins``: the aggregated pins by label key."""
    return node_selection(spec, spec_path).pins
