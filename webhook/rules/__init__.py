"""The ordered table of readiness rules and ``evaluate``, which runs them over one pod view.

Each rule family lives in its own module; ``RULES`` fixes their order (cheapest first), and the
output of ``evaluate`` is sorted stably so denials read the same on every run.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from webhook.base.text import natural_key
from webhook.base.types import Finding
from webhook.pod.context import PodContext
from webhook.rules.checkpoint import CheckpointWindow
from webhook.rules.drift import HashDrift
from webhook.rules.gpu import GpuRules
from webhook.rules.images import ImageDigest
from webhook.rules.machine import MachineRules
from webhook.rules.restore_from_policy import RestoreFromPolicy
from webhook.rules.sandbox import GvisorRuntime, SandboxCompat
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
    ImageDigest(),
    StaleState(),
    RestoreFromPolicy(),
    CheckpointWindow(),
    MachineRules(),
    GpuRules(),
    HashDrift(),
)
"""Rule families in evaluation order (cheapest first); the README lists every rule id."""


def evaluate(ctx: PodContext, rules: tuple[Rule, ...] = RULES) -> list[Finding]:
    """Run every enabled rule over ``ctx`` and return all findings, in ``finding_order``.

    Rules listed in ``settings.rules.disabled`` are dropped after evaluation.
    """
    disabled = set(ctx.settings.rules.disabled)
    findings = [finding for rule in rules for finding in rule(ctx) if finding.rule not in disabled]
    return sorted(findings, key=finding_order)


def finding_order(finding: Finding) -> tuple[tuple[str | int, ...], str, str, str]:
    """Findings by field path in natural order (``[2]`` before ``[10]``), then rule, message."""
    return (natural_key(finding.path), finding.rule, finding.message, finding.severity)
