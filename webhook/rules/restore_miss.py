"""``restore-miss`` (cluster mode, mutating): a selected pod predicted to miss every Ready snapshot
of its policy and group, i.e. to cold-start silently, or to match one gVisor cannot restore it
from (``pod.emptydirs``: it would crash-loop, with no cold-start fallback). Pure module.

Source: ``pod.restore.predict`` (snapready's model of GKE's matching: docs/gke-facts.md#section-3
and #section-9; the prediction is our model, not GKE's promise, hence a warning by default).
Severity ``restore.on_miss`` (``warn``; ``deny`` for teams that want no silent cold start; ``off``
says nothing), whatever the pod's enforcement mode; ``rules.modes`` overrides it. Fix: match the
snapshot (``snapready explain`` names the differing fields) or take a new one.
"""

from __future__ import annotations

from collections.abc import Iterable

from webhook.base.config import Settings
from webhook.base.keys import RESTORE_PREDICTION
from webhook.base.text import clip
from webhook.base.types import Finding, Wording
from webhook.pod.context import PodContext
from webhook.pod.emptydirs import ORIGIN
from webhook.pod.restore import PREDICTION_KEY, Prediction

RULE = "restore-miss"
FAILS = "will fail to restore"
"""How a match gVisor cannot restore the pod from begins (``Prediction.refusal``)."""
FAILS_ORIGIN = "will fail to restore from a snapshot no pod can restore"
"""How a match taken from a pod gVisor cannot restore begins (``Refusal.by`` ``origin``)."""
WORDING = Wording(
    warning="snapready: {message}",
    denial=(
        "snapready: {message}. Set restore.on_miss=warn to admit pods predicted to miss, or match "
        "the snapshot (`snapready explain`)."
    ),
    denial_by_prefix=(
        (
            FAILS_ORIGIN,
            "snapready: {message}. Set restore.on_miss=warn to admit pods predicted to miss, or "
            "have that PodSnapshot deleted (docs/rules/init-emptydir.md).",
        ),
        (
            FAILS,
            "snapready: {message}. Set restore.on_miss=warn to admit pods predicted to miss, or "
            "mount that emptyDir first in a native sidecar that keeps running "
            "(docs/rules/init-emptydir.md).",
        ),
    ),
)
"""The texts users saw before this was a finding (kept byte for byte)."""


class RestoreMiss:
    """``restore-miss``: reads the prediction the mutating webhook just made (``PodContext.memo``
    under ``pod.restore.PREDICTION_KEY``); nothing without one (file mode, validating webhook)."""

    rule_ids: tuple[str, ...] = (RULE,)

    def __call__(self, pod: PodContext) -> Iterable[Finding]:
        """One finding at ``<prefix>restore-prediction`` for a ``miss``, else none."""
        setting = pod.settings.restore.on_miss
        result: Prediction | None = pod.memo.get(PREDICTION_KEY)
        if setting == "off" or result is None or result.outcome != "miss":
            return ()
        message = f"will cold-start ({result.snapshot}): {result.reason}"
        refusal = result.refusal
        if refusal is not None:  # it crash-loops, with no cold-start fallback
            shown = clip(result.snapshot, 63)
            fails = FAILS_ORIGIN if refusal.by == ORIGIN else FAILS
            message = f"{fails} ({shown}): {refusal.detail()}"
        path = pod.metadata_field("annotations", pod.settings.annotation(RESTORE_PREDICTION))
        return (Finding(path, RULE, message, "deny" if setting == "deny" else "warn"),)


def miss_denies(settings: Settings) -> bool:
    """Whether admission denies a pod predicted to miss: ``restore.on_miss: deny``, the rule not
    in ``rules.disabled`` and its ``rules.modes`` entry, if any, ``enforce`` (the audit's
    ``restore-prediction`` result fails exactly then)."""
    rules = settings.rules
    return (
        settings.restore.on_miss == "deny"
        and RULE not in rules.disabled
        and rules.modes.get(RULE, "enforce") == "enforce"
    )
