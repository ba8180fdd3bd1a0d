"""Machine rules: ``machine-family``, ``machine-unpinned`` and ``tpu``.

GKE restores a whole-pod snapshot only on the same machine series and CPU architecture, does not
support E2 machines or TPUs (docs/gke-facts.md#section-3 and #section-4), and a pod that does not
pin its series may land elsewhere and silently cold-start. ``rootfs-only`` policies skip memory
restore and accept other families, E2 included, so all three rules are relaxed for them (section 3;
section 4 is "whole-pod scope").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from webhook.base.sections import RuleSettings
from webhook.base.text import clip, clip_all
from webhook.base.types import Finding
from webhook.kube.gke import (
    INSTANCE_TYPE,
    MACHINE_FAMILY,
    TPU_ACCELERATOR,
    TPU_RESOURCE,
    TPU_TOPOLOGY,
    instance_family,
)
from webhook.pod.context import PodContext
from webhook.rules.constraints import Unknown, fit, possible
from webhook.rules.placement import Placement, describe, family_constraints


def _family_problem(family: str, rules: RuleSettings) -> tuple[str, str] | None:
    """``(problem, fix)`` for a family the pod may land on; None when it is fine."""
    if family in rules.unsupported_machine_families:
        banned = ", ".join(rules.unsupported_machine_families).upper()
        return "not supported by Pod snapshots", f"use any other series (not {banned})"
    if family not in rules.known_machine_families:
        return "not a known machine family", "fix it or add it to rules.known_machine_families"
    return None


def _family_finding(path: str, subject: str, where: str, found: tuple[str, str]) -> Finding:
    """``machine-family`` for ``subject`` (``family e2``), cut to fit a warning line."""
    problem, fix = found
    text = fit(
        "machine-family",
        path,
        f"{subject}{where} is {problem}; {fix}",
        f"{subject} is {problem}; {fix}",
        f"{problem}; {fix}",
    )
    return Finding(path, "machine-family", text)


def family_findings(ctx: PodContext, place: Placement) -> Iterator[Finding]:
    """``machine-family`` (deny): every family or instance type the pod may land on must be a
    known, supported family (GKE: E2 is not supported for Pod snapshots)."""
    rules = ctx.settings.rules
    flagged: set[tuple[str, str]] = set()  # (path, family): a pool's type repeats its family
    for c in place.families:
        for family in sorted(c.values):
            problem = _family_problem(family, rules)
            if problem:
                flagged.add((c.path, family))
                yield _family_finding(c.path, f"family {clip(family)}", c.where, problem)
    for c in place.instance_types:
        for instance_type in sorted(c.values):
            family = instance_family(instance_type)
            problem = _family_problem(family, rules)
            if problem and (c.path, family) not in flagged:
                subject = f"instance type {clip(instance_type)}"
                yield _family_finding(c.path, subject, c.where, problem)


def _unknown_text(unknown: Unknown) -> str:
    """Why an unresolvable pin leaves the family unknown, and what to do about it."""
    if unknown.kind == "node":
        # The DaemonSet controller replaces the template's required affinity with the node's name
        # (ReplaceDaemonSetPodNodeNameNodeAffinity): the hardware pins were judged on the template.
        return f"{unknown.reason}, so its hardware was not checked (its DaemonSet template was)"
    return fit(
        "machine-unpinned",
        unknown.path,
        f"{unknown.reason}, so its machine family is unknown; also pin {MACHINE_FAMILY}",
        f"machine family unknown; also pin {MACHINE_FAMILY}",
    )


def _not_pinned(ctx: PodContext, place: Placement) -> Finding:
    """The generic "not pinned" warning, at the field the pod pins through (the affinity terms,
    else its nodeSelector) or at the spec, where a nodeSelector would go."""
    # A GPU pod's instance type pins its family and its GPU machine (an accelerator alone may
    # still land on an unsupported shape: gpu-machine warns about that).
    what = INSTANCE_TYPE if place.gpus.total else MACHINE_FAMILY
    risk = "so restores may cold-start elsewhere"
    # Short: warnings are cut at 256 chars with the path, and affinity paths are long.
    fix = f"pin {what} in nodeSelector"
    if place.selection.terms:
        path = place.selection.terms_path
        text = fit(
            "machine-unpinned",
            path,
            f"a required affinity term pins no machine series, {risk}; {fix}",
            f"an affinity term pins no machine series; {fix}",
        )
        return Finding(path, "machine-unpinned", text, "warn")
    text = f"not pinned to one machine series, {risk}; {fix}"
    selector = ctx.spec_field("nodeSelector")
    path = selector if isinstance(ctx.spec.get("nodeSelector"), dict) else ctx.spec_path
    return Finding(path, "machine-unpinned", text, "warn")


def unpinned_findings(ctx: PodContext, place: Placement) -> Iterator[Finding]:
    """``machine-unpinned`` (warn): the pod must be pinned to exactly one machine family, or a
    restore may be tried on another series and silently cold-start (docs/gke-facts.md#section-3)."""
    constraints = family_constraints(place, ctx.settings.rules)
    families = possible(constraints)
    if families is None and place.unknown:
        for unknown in place.unknown:
            yield Finding(unknown.path, "machine-unpinned", _unknown_text(unknown), "warn")
    elif families is None:
        yield _not_pinned(ctx, place)
    elif len(families) > 1:
        path = next(c.path for c in constraints if c.exhaustive)
        names = clip_all(sorted(families))
        text = fit(
            "machine-unpinned",
            path,
            f"may run on families {names}; snapshots restore only on the same series: pin one",
            f"may run on families {names}: pin one",
            "may run on several families: pin one",
        )
        yield Finding(path, "machine-unpinned", text, "warn")


def tpu_findings(ctx: PodContext, place: Placement) -> Iterator[Finding]:
    """``tpu`` (deny): TPU resources or TPU node selectors (GKE: TPUs are not supported)."""
    for use in place.tpus.containers:
        text = (
            f"TPUs are not supported by Pod snapshots; remove {TPU_RESOURCE} or use a GPU/CPU pod"
        )
        yield Finding(use.path, "tpu", text)
    for key in (TPU_ACCELERATOR, TPU_TOPOLOGY):
        pin = place.pins.get(key)
        if pin is not None and pin.mentioned:
            text = f"TPU nodes are not supported by Pod snapshots; remove the {key} selector"
            yield Finding(pin.path, "tpu", text)


class MachineRules:
    """The machine family rules over one shared ``Placement`` (computed once per pod)."""

    rule_ids: tuple[str, ...] = ("machine-family", "machine-unpinned", "tpu")

    def __call__(self, pod: PodContext) -> Iterable[Finding]:
        """All machine findings; none for ``rootfs-only`` pods (GKE accepts any family there)."""
        if pod.rootfs_only:
            return []
        place = describe(pod)
        return [
            *family_findings(pod, place),
            *unpinned_findings(pod, place),
            *tpu_findings(pod, place),
        ]
