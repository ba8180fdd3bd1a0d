"""What one audit pass found, and the small pure pieces of the audit controller (``worker``).

``Found``: the reports a namespace pass stands behind, the never-judged objects, and whether
every list completed (only then are other reports deleted). ``judge_quietly``: admission's
``judge`` for one listed object, an object that cannot be judged logged and skipped.
``never_judged`` and ``summary``: what the gauges and ``/readyz`` show.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime

from webhook.admission.audit import Judgement, judge
from webhook.admission.engine import Engine
from webhook.base.types import RawObject, mapping
from webhook.cluster.api.syncing import describe
from webhook.snapshots.audit import NeverJudged, owned_by_controller, running

log = logging.getLogger("snapready.audit")


class Found:
    """What one pass over one namespace found: the reports it stands behind (``keep``, object
    uids), the never-judged objects by uid, whether every list completed, the uids judged."""

    def __init__(self) -> None:
        self.keep: set[str] = set()
        self.never: dict[str, NeverJudged] = {}
        self.complete = True
        self.judged: set[str] = set()

    def take(self, obj: RawObject, kind: str) -> str | None:
        """The uid of a listed object this pass should judge, noted as judged; None for one
        without a uid, judged already (a relist after 410), a pod that is not running, or a
        Job a CronJob owns (its CronJob's template is judged)."""
        metadata = mapping(obj.get("metadata"))
        uid = str(metadata.get("uid") or "")
        if not uid or uid in self.judged:
            return None
        self.judged.add(uid)
        if kind == "Pod" and not running(obj):
            return None
        if kind == "Job" and owned_by_controller(metadata, ("CronJob",)):
            return None
        return uid


def judge_quietly(obj: RawObject, api_version: str, kind: str, engine: Engine) -> Judgement | None:
    """``admission.audit.judge``; an object that cannot be judged is logged and skipped (None)."""
    try:
        return judge(obj, api_version, kind, engine)
    except Exception as exc:  # one odd object never stops the audit
        metadata = mapping(obj.get("metadata"))
        log.warning(
            "audit: %s %s/%s not judged: %s",
            kind,
            metadata.get("namespace"),
            metadata.get("name"),
            describe(exc),
        )
        return None


def never_judged(judgement: Judgement) -> NeverJudged:
    """The never-judged entry of an object admission did not admit as it is now."""
    return NeverJudged(
        judgement.scope.namespace, judgement.policy, judgement.scope.kind, judgement.denied
    )


def summary(
    note: str, reports: int, never: Mapping[str, NeverJudged], last_pass: float | None
) -> str:
    """The ``/readyz`` status: the report API's note, the report count, the never-judged and
    would-be-denied counts, and when the last full pass ended (unix seconds; None: running)."""
    denied = sum(1 for item in never.values() if item.denied)
    last = (
        datetime.fromtimestamp(last_pass, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if last_pass is not None
        else "running"
    )
    return (
        f"{note}: {reports} report{'' if reports == 1 else 's'}; audit: "
        f"{len(never)} never judged ({denied} would be denied), last full pass {last}"
    )
