"""Only snapready speaks for snapready on a new pod: foreign ``<prefix>`` keys are removed.

snapready reads its own annotations and labels back from pods (the ``<prefix>selected`` label
routes a pod into the caches; ``restore-prediction``, ``restore-snapshot`` and ``restore-reason``
feed ``snapready status`` and the restore outcomes; ``restore-outcome`` is the leader's
verdict). A namespace user who creates a pod may write any of them, so on CREATE of a selected
pod every ``<prefix>`` annotation and label that this admission did not itself set is removed,
except the two a user is meant to set (``USER_ANNOTATIONS``, ``USER_LABELS``). Run last, after
every stamping mutator (``Draft.written`` says what they set). Pod UPDATEs are guarded by the
ownership webhook instead (``ownership.service_account``: only snapready's ServiceAccount may
change a ``<prefix>`` key). A pod no policy selects gets none of snapready's keys: the webhook
scope sends one that carries some to ``/mutate``, which removes them (``strip_unselected``).
"""

from __future__ import annotations

from webhook.base.keys import USER_ANNOTATIONS, USER_LABELS
from webhook.base.types import RawObject, mapping
from webhook.kube.responses import Decision, allowed, bounded_warnings, patched
from webhook.mutation.patch import Draft, unescape
from webhook.pod.context import PodContext

ANNOTATIONS = ("metadata", "annotations")
LABELS = ("metadata", "labels")


def drop_foreign_keys(draft: Draft, ctx: PodContext) -> bool:
    """Remove every ``<prefix>`` annotation and label of the pod that no earlier mutator set
    (``draft.written``) and that is not a user input; True when one was removed."""
    return _drop_owned(draft, ctx.settings.prefix)


MAX_NAMED = 5
"""Keys named in ``strip_unselected``'s warning (the rest counted)."""


def strip_unselected(pod: RawObject, prefix: str) -> Decision:
    """``/mutate`` for a pod no PodSnapshotPolicy selects: a patch removing every ``<prefix>``
    key snapready owns (all but ``USER_ANNOTATIONS`` and ``USER_LABELS``) with a warning naming
    them, or ``allowed()`` when there are none. snapready wrote none of them (it stamps only
    selected pods), and a tenant's forged ``selected`` label, ``spec-hash`` or
    ``restore-outcome`` kept on an unselected pod would become a "restored" pod in ``snapready
    status`` once relabelled into a selector (a real-API trial did it as the ``edit`` role: the
    relabel changes no snapready key, so the ownership webhook had nothing to refuse). The
    webhook scope sends such pods here (``kube.scope.owned_keys_cel``)."""
    draft = Draft(pod)
    if not _drop_owned(draft, prefix):
        return allowed()
    removed = [unescape(op["path"].rsplit("/", 1)[1]) for op in draft.ops]
    named = ", ".join(removed[:MAX_NAMED])
    more = f" and {len(removed) - MAX_NAMED} more" if len(removed) > MAX_NAMED else ""
    warning = (
        f"snapready: removed {named}{more}: only snapready sets them, and it judges only pods a "
        "PodSnapshotPolicy selects"
    )
    return patched(draft.ops, warnings=bounded_warnings([warning]))


def _drop_owned(draft: Draft, prefix: str) -> bool:
    """Drop the ``prefix`` keys of ``draft`` not written by it and not a user's; True if any."""
    changed = False
    for path, users in ((ANNOTATIONS, USER_ANNOTATIONS), (LABELS, USER_LABELS)):
        keep = {prefix + name for name in users}
        present = mapping(draft.get(*path))
        for key in sorted(present):
            if key.startswith(prefix) and key not in keep and (path, key) not in draft.written:
                changed = draft.drop(path, key) or changed
    return changed
