"""The ordered tables of readiness rules and the functions that run them over one pod view.

Each rule family lives in its own module. ``RULES`` (the validating webhook's, and ``check``'s)
fixes their order (cheapest first), and the output of ``evaluate`` is sorted stably so denials
read the same on every run. ``PREDICTION_RULES`` judge the restore prediction the mutating
webhook has just written on a pod (cluster mode; ``prediction_findings``), in table order; their
texts (``WORDINGS``) predate them as findings and are kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from webhook.base.text import natural_key
from webhook.base.types import Finding, Wording
from webhook.pod.context import PodContext
from webhook.pod.restore import PREDICTION_KEY, Prediction
from webhook.rules import cross_workload, restore_miss, stale_config
from webhook.rules.checkpoint import CheckpointWindow
from webhook.rules.cross_workload import CrossWorkload
from webhook.rules.drift import HashDrift
from webhook.rules.gpu import GpuRules
from webhook.rules.images import ImageDigest
from webhook.rules.machine import MachineRules
from webhook.rules.restore_from_policy import RestoreFromPolicy
from webhook.rules.restore_miss import RestoreMiss
from webhook.rules.sandbox import GvisorRuntime, InitEmptyDir, SandboxCompat
from webhook.rules.stale_config import StaleConfig
from webhook.rules.storage import GcsFuse, StaleState


class Rule(Protocol):
    """A validation rule: a pure function from a pod view to findings (no I/O, no clock).

    Mutators have their own shape (``webhook.mutation.Step``: they edit a recording draft).
    """

    rule_ids: tuple[str, ...]

    def __call__(self, pod: PodContext, /) -> Iterable[Finding]: ...


RULES: tuple[Rule, ...] = (
    GvisorRuntime(),
    GcsFuse(),
    SandboxCompat(),
    InitEmptyDir(),
    ImageDigest(),
    StaleState(),
    RestoreFromPolicy(),
    CheckpointWindow(),
    MachineRules(),
    GpuRules(),
    HashDrift(),
)
"""Rule families in evaluation order (cheapest first); docs/rules/ has a page per rule id."""

PREDICTION_RULES: tuple[Rule, ...] = (RestoreMiss(), CrossWorkload(), StaleConfig())
"""Rules over the mutating webhook's restore prediction (``PodContext.memo``), in the order
their findings are decided and warned (``admission.decision.decide_mutation``: the first denial
wins). Each judges a ``hit`` or a ``miss``: a ``none`` prediction (nothing to restore from yet) has
nothing for them, and ``prediction_findings`` skips them."""

WORDINGS: Mapping[str, Wording] = {
    restore_miss.RULE: restore_miss.WORDING,
    cross_workload.RULE: cross_workload.WORDING,
    stale_config.RULE: stale_config.WORDING,
}
"""How each ``PREDICTION_RULES`` finding reads in a warning and a denial."""


def evaluate(ctx: PodContext, rules: tuple[Rule, ...] = RULES) -> list[Finding]:
    """Run every enabled rule over ``ctx`` and return all findings, in ``finding_order``.

    Rules listed in ``settings.rules.disabled`` are dropped after evaluation.
    """
    disabled = set(ctx.settings.rules.disabled)
    findings = [finding for rule in rules for finding in rule(ctx) if finding.rule not in disabled]
    return sorted(findings, key=finding_order)


def prediction_findings(ctx: PodContext) -> list[Finding]:
    """Run ``PREDICTION_RULES`` over a pod the mutating webhook has just mutated; the findings in
    table order, those of ``settings.rules.disabled`` dropped; none without a prediction (file
    mode, a pod left unmutated)."""
    prediction: Prediction | None = ctx.memo.get(PREDICTION_KEY)
    if prediction is None or prediction.outcome == "none":
        return []  # the fast path: each rule judges a hit or a miss
    disabled = ctx.settings.rules.disabled
    return [
        finding
        for rule in PREDICTION_RULES
        for finding in rule(ctx)
        if finding.rule not in disabled
    ]


def finding_order(finding: Finding) -> tuple[tuple[str | int, ...], str, str, str]:
    """Findings by field path in natural order (``[2]`` before ``[10]``), then rule, message."""
    return (natural_key(finding.path), finding.rule, finding.message, finding.severity)
