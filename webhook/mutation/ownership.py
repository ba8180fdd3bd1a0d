"""Only snapready speaks for snapready on a new pod: foreign ``<prefix>`` keys are removed.

snapready reads its own annotations and labels back from pods (the ``<prefix>selected`` label
routes a pod into the caches; ``restore-prediction``, ``restore-snapshot`` and ``restore-reason``
feed ``snapready status`` and the restore outcomes; ``restore-outcome`` is the leader's
verdict). A namespace user who creates a pod may write any of them, so on CREATE of a selected
pod every ``<prefix>`` annotation and label that this admission did not itself set is removed,
except the two a user is meant to set (``USER_ANNOTATIONS``, ``USER_LABELS``). Run last, after
every stamping mutator (``Draft.written`` says what they set). Pod UPDATEs are guarded by the
ownership webhook instead (``ownership.service_account``: only snapready's ServiceAccount may
change a ``<prefix>`` key).
"""

from __future__ import annotations

from webhook.base.keys import INJECT, SNAPSHOT_SOURCE
from webhook.base.types import mapping
from webhook.mutation.patch import Draft
from webhook.pod.context import PodContext

ANNOTATIONS = ("metadata", "annotations")
LABELS = ("metadata", "labels")
USER_ANNOTATIONS = (INJECT,)
"""``<prefix>inject: "false"``: the user opts a pod out of helper injection (design.md)."""
USER_LABELS = (SNAPSHOT_SOURCE,)
"""``<prefix>snapshot-source: "true"``: the user marks a manual-trigger target (design.md)."""


def drop_foreign_keys(draft: Draft, ctx: PodContext) -> bool:
    """Remove every ``<prefix>`` annotation and label of the pod that no earlier mutator set
    (``draft.written``) and that is not a user input; True when one was removed."""
    prefix = ctx.settings.prefix
    changed = False
    for path, allowed in ((ANNOTATIONS, USER_ANNOTATIONS), (LABELS, USER_LABELS)):
        keep = {prefix + name for name in allowed}
        present = mapping(draft.get(*path))
        for key in sorted(present):
            if key.startswith(prefix) and key not in keep and (path, key) not in draft.written:
                changed = draft.drop(path, key) or changed
    return changed
