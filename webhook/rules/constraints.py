"""The vocabulary of placement: one stated restriction (``Constraint``), an unknown pin
(``Unknown``), and message fitting (``fit``) for the machine and GPU rules.

A ``Constraint`` says which values of one node property (machine family, instance type,
accelerator, ...) a pod allows and where that restriction is stated (nodeSelector, an affinity
term, a node pool or ComputeClass pin), so every finding can point at the field to change.
Pure module.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from webhook.kube.responses import MAX_WARNING_CHARS

POD_SOURCES = ("nodeSelector", "node affinity")


def fit(rule: str, path: str, *variants: str) -> str:
    """The first of ``variants`` (most detailed first, each with its fix) whose warning line
    fits, else the last one.

    A finding becomes the line ``[rule] path: message`` (``admission.decision.decide_findings``) and
    the API server cuts each warning at 256 characters (``responses.MAX_WARNING_CHARS``,
    k8s.io/apiserver/pkg/warning): a cut would take the fix, which messages put last. Paths
    under a CronJob's affinity alone take ~145 characters.
    """
    room = MAX_WARNING_CHARS - len(rule) - len(path) - 5  # "[", "] ", ": "
    return next((text for text in variants if len(text) <= room), variants[-1])


@dataclass(frozen=True)
class Constraint:
    """One statement about a node property, from the pod's selectors or from pool/class facts.

    Attributes:
        values: the label values the pod may land on (may be empty for a ComputeClass flag).
        exhaustive: the pod can only land on ``values`` (it is pinned by this statement).
        path: field path of the statement in the submitted object.
        source: short human text naming it (``nodeSelector``, ``node pool "a100-pool"``).
        value_paths: ``(value, path)`` for values a later affinity term allows
            (``LabelPin.value_paths``); empty when ``path`` states every value.
    """

    values: frozenset[str]
    exhaustive: bool
    path: str
    source: str
    value_paths: tuple[tuple[str, str], ...] = ()

    def path_of(self, value: str) -> str:
        """Field path of the statement that allows ``value``: the affinity term naming it when
        the pod's terms differ (terms are ORed, so the fix belongs there), else ``path``."""
        return next((where for v, where in self.value_paths if v == value), self.path)

    @property
    def where(self) -> str:
        """`` in node pool "x"`` for cluster facts; empty for the pod's own selectors (the field
        path already says where those are)."""
        return "" if self.source in POD_SOURCES else f" in {self.source}"


@dataclass(frozen=True)
class Unknown:
    """A pin whose machine we cannot see (no pool facts, ComputeClass not served/not found, a
    named node not in ``ClusterState.nodes``); ``kind`` says which."""

    path: str
    reason: str
    kind: Literal["pool", "class", "node"] = "pool"


def possible(constraints: Iterable[Constraint]) -> frozenset[str] | None:
    """Values allowed by every exhaustive constraint (their intersection); None: not pinned."""
    result: frozenset[str] | None = None
    for constraint in constraints:
        if constraint.exhaustive:
            result = constraint.values if result is None else result & constraint.values
    return result
