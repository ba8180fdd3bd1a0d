"""snapready's own pod metadata is snapready's: a pod UPDATE that changes it is denied. Pure.

What snapready writes on a pod (every ``<prefix>`` annotation: ``policy``, ``spec-hash``,
``restore-prediction``, ``restore-snapshot``, ``restore-outcome``, ...; and the label
``<prefix>selected``) drives outcomes, Events and metrics. docs/security.md: a namespace user with
the built-in ``edit`` role PATCHed them on running pods and the outcome followed the forgery. On
CREATE the mutating webhook already replaces user-supplied values. On UPDATE, a change to any of
them (added, changed or removed) by anyone but snapready's own service account
(``ownership.service_account``, e.g. ``system:serviceaccount:snapready:snapready``) is denied
(rule ``owned-metadata``, decided by ``admission.pods`` like every finding).

The chart sends pod UPDATEs to this check only through a ``matchCondition`` that compares these
keys of ``object`` and ``oldObject`` and skips snapready's service account
(``ownership_condition``), so ordinary updates (status, other labels, finalizers) never call the
webhook: an outage cannot block them. An empty ``ownership.service_account`` turns the check off.
"""

from __future__ import annotations

from typing import Any

from webhook.base.keys import INJECT, SELECTED, SNAPSHOT_SOURCE, USER_ANNOTATIONS, USER_LABELS
from webhook.base.types import Finding, RawObject, Wording
from webhook.kube.review import AdmissionRequest

MAX_NAMED = 5
"""Changed keys named in a denial (the rest counted)."""
RULE = "owned-metadata"
WORDING = Wording("snapready: {message}", "snapready: {message}")
"""The text users saw before this was a finding (kept byte for byte)."""


def _metadata(obj: Any, part: str) -> dict[str, Any]:
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    value = metadata.get(part) if isinstance(metadata, dict) else None
    return value if isinstance(value, dict) else {}


def owned_changes(old: Any, new: Any, prefix: str) -> list[str]:
    """The ``<prefix>`` annotations and the ``<prefix>selected`` label that differ, sorted."""
    before, after = _metadata(old, "annotations"), _metadata(new, "annotations")
    keys = {k for k in (*before, *after) if isinstance(k, str) and k.startswith(prefix)}
    changed = sorted(f"annotation {k}" for k in keys if before.get(k) != after.get(k))
    label = prefix + SELECTED
    if _metadata(old, "labels").get(label) != _metadata(new, "labels").get(label):
        changed.append(f"label {label}")
    return changed


def _owned_finding(
    request: AdmissionRequest, owner: str, keys: list[str], where: str, why: str
) -> Finding | None:
    """The ``owned-metadata`` finding for snapready's ``keys`` a request writes (named, the
    first ``MAX_NAMED``), or None: no keys, the check off (``owner`` empty), or ``owner``
    (snapready's service account) sent it."""
    user: RawObject = request.user_info if isinstance(request.user_info, dict) else {}
    if not owner or not keys or user.get("username") == owner:
        return None
    named = ", ".join(keys[:MAX_NAMED])
    more = f" and {len(keys) - MAX_NAMED} more" if len(keys) > MAX_NAMED else ""
    return Finding(where, RULE, f"{named}{more} {why}", "deny")


def guard_update(request: AdmissionRequest, prefix: str, owner: str) -> Finding | None:
    """``owned-metadata``: a pod UPDATE that changes snapready's metadata, unless ``owner`` sent
    it (or ``owner`` is empty: the check is off); None when there is nothing to say.

    The finding (severity ``deny``, at ``metadata``) is judged as ``enforce`` whatever the
    namespace's mode (``WORDING``): a forged key misleads every reader of the pod; ``rules.modes``
    and ``rules.disabled`` still govern it.
    """
    changed = owned_changes(request.old_object, request.object, prefix) if owner else []
    why = (
        f"may be changed only by snapready ({owner}): they record what snapready decided at "
        "admission; recreate the pod to have it judged again"
    )
    return _owned_finding(request, owner, changed, "metadata", why)


def guard_binding(request: AdmissionRequest, prefix: str, owner: str) -> Finding | None:
    """``owned-metadata`` for a Binding CREATE (``pods/binding`` or ``bindings``): the API server
    copies a Binding's labels and annotations onto the pod it binds (``setPodNodeAndMetadata``,
    pkg/registry/core/pod/storage in kubernetes/kubernetes; a real-API trial moved the
    ``selected`` label so on v1.36), a way to write snapready's keys that no pod UPDATE shows;
    any ``prefix`` key but the user's (``keys.USER_LABELS``, ``keys.USER_ANNOTATIONS``) is denied
    unless ``owner`` sent it (``owner`` empty: off). None when there is nothing to say."""
    keys = [
        f"{what} {k}"
        for what, part, users in (
            ("label", "labels", USER_LABELS),
            ("annotation", "annotations", USER_ANNOTATIONS),
        )
        for k in sorted(_metadata(request.object, part))
        if isinstance(k, str) and k.startswith(prefix) and k[len(prefix) :] not in users
    ]
    why = (
        f"on a Binding may be set only by snapready ({owner}): the API server copies a "
        "Binding's labels and annotations onto the pod, and they record what snapready decided "
        "at admission"
    )
    return _owned_finding(request, owner, keys, "metadata", why)


def binding_condition(prefix: str, owner: str) -> str:
    """The CEL ``matchCondition`` the chart renders for Bindings (tests use it too): true only
    for a Binding that carries a ``prefix`` label or annotation but the user's, not sent by
    ``owner``."""

    def owned(part: str, user: str) -> str:
        return (
            f"object.metadata.?{part}.orValue({{}}).exists(k, k.startsWith('{prefix}') && "
            f"k != '{prefix}{user}')"
        )

    return (
        f"request.userInfo.username != '{owner}' && "
        f"({owned('labels', SNAPSHOT_SOURCE)} || {owned('annotations', INJECT)})"
    )


def ownership_condition(prefix: str, owner: str) -> str:
    """The CEL ``matchCondition`` expression the chart renders (tests use it too): true only for
    an UPDATE that changes a ``prefix`` annotation or the selected label, not sent by ``owner``."""

    def annotations(side: str) -> str:
        return f"{side}.metadata.?annotations.orValue({{}})"

    def changed(a: str, b: str) -> str:
        return (
            f"{annotations(a)}.exists(k, k.startsWith('{prefix}') && "
            f"{annotations(b)}[?k] != optional.of({annotations(a)}[k]))"
        )

    label = f"metadata.?labels.orValue({{}})[?'{prefix}selected']"
    return (
        f"request.userInfo.username != '{owner}' && ("
        f"{changed('object', 'oldObject')} || {changed('oldObject', 'object')} || "
        f"object.{label} != oldObject.{label})"
    )
