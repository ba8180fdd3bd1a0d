"""The audit of existing objects: which a policy selects, and which admission never judged. Pure.

A pod is *admitted* when snapready's mutating webhook stamped it: the label ``<prefix>selected:
"true"`` and the annotation ``<prefix>spec-hash``. Every other pod a live PodSnapshotPolicy of its
namespace selects was *never judged*: created before snapready was installed, before the policy
that selects it now, while snapready was down under ``failurePolicy: Ignore``, or unselected
and relabelled since. A tenant can forge both keys on a pod created around snapready; that only
moves the pod between the two counts: what its report says (every result) is judged from its
spec and the cluster, never from a ``<prefix>`` key (``admission.audit``).

Templates are never stamped. A workload template counts as never judged when its last change
(the newest ``managedFields`` entry that touches the template, else the object's creation) is
older than every PodSnapshotPolicy that selects it: admission judges a template only when it is
created or changed, so none of its selecting policies existed then (seconds resolution: the same
second counts as judged).

Server-side filtering: ``selector_query`` writes a policy's selector in the label selector
syntax of list calls (``k8s.io/apimachinery/pkg/labels`` ``Parse``), so an audit list returns
only the pods the policy selects; a requirement the syntax cannot carry exactly (an empty value
in a set) is left out, which widens the list, and callers match every item again with
``LabelSelector.matches``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from webhook.base.keys import FINGERPRINT_SHAPE, SELECTED, SPEC_HASH
from webhook.base.types import RawObject, mapping
from webhook.kube.matching import LabelSelector, Policy, Requirement
from webhook.snapshots.views import parse_time

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
"""Pod phases of pods that run no more: not audited, their reports deleted."""


def admitted(metadata: RawObject, prefix: str) -> bool:
    """Whether snapready's mutating webhook stamped the pod (label ``<prefix>selected: "true"``
    and annotation ``<prefix>spec-hash`` shaped like a fingerprint: ``keys.FINGERPRINT_SHAPE``,
    as ``not-stamped`` judges it; a tenant can set both on its pod)."""
    labels, annotations = mapping(metadata.get("labels")), mapping(metadata.get("annotations"))
    stamp = annotations.get(prefix + SPEC_HASH)
    return (
        labels.get(prefix + SELECTED) == "true"
        and isinstance(stamp, str)
        and FINGERPRINT_SHAPE.fullmatch(stamp) is not None
    )


def running(pod: RawObject) -> bool:
    """Whether the pod still runs or will (not ``Succeeded``/``Failed``, not being deleted)."""
    phase = mapping(pod.get("status")).get("phase")
    deleting = mapping(pod.get("metadata")).get("deletionTimestamp")
    return phase not in TERMINAL_PHASES and not deleting


def _term(requirement: Requirement) -> str | None:
    """One requirement in label selector syntax; None when the syntax cannot carry it."""
    key, values = requirement.key, sorted(requirement.values)
    if requirement.operator == "Exists":
        return key
    if requirement.operator == "DoesNotExist":
        return "!" + key
    if "" in values:
        return f"{key}=" if requirement.operator == "In" and values == [""] else None
    joined = ",".join(values)
    return f"{key} in ({joined})" if requirement.operator == "In" else f"{key} notin ({joined})"


def selector_text(selector: LabelSelector, *extra: str) -> str:
    """``selector`` (and ``extra`` terms, e.g. ``snapready.io/selected!=true``) as a label
    selector string; "" selects everything."""
    terms = [t for t in map(_term, selector.requirements) if t is not None]
    return ",".join([*terms, *extra])


def selector_query(selector: LabelSelector, *extra: str) -> str:
    """``labelSelector=...`` for a list path (URL-encoded); "" when it selects everything."""
    text = selector_text(selector, *extra)
    return "labelSelector=" + quote(text, safe="") if text else ""


def with_query(path: str, query: str) -> str:
    """``path`` with ``query`` appended (none when empty)."""
    return f"{path}?{query}" if query else path


def _touches(fields: Any, path: Sequence[str]) -> bool:
    """Whether a ``fieldsV1`` tree owns anything under ``path`` (``f:spec``, ``f:template``)."""
    node = fields
    for key in path:
        node = node.get("f:" + key) if isinstance(node, dict) else None
        if node is None:
            return False
    return True


def template_changed_at(obj: RawObject, path: Sequence[str]) -> datetime | None:
    """When the pod template at ``path`` last changed: the newest ``managedFields`` time of an
    entry that owns a field under it (any manager, main resource only), else the object's
    creation; None when neither is readable."""
    metadata = mapping(obj.get("metadata"))
    newest: datetime | None = None
    for entry in metadata.get("managedFields") or ():
        if not isinstance(entry, dict) or entry.get("subresource"):
            continue
        when = parse_time(entry.get("time")) if isinstance(entry.get("time"), str) else None
        if when is not None and _touches(entry.get("fieldsV1"), path):
            newest = when if newest is None or when > newest else newest
    if newest is not None:
        return newest
    created = metadata.get("creationTimestamp")
    return parse_time(created) if isinstance(created, str) else None


def template_never_judged(changed: datetime | None, policies: Sequence[Policy]) -> bool:
    """Whether every selecting policy was created after the template's last change (unknown
    times: judged, never guessed)."""
    if changed is None or not policies:
        return False
    created = [parse_time(p.created) for p in policies]
    return all(when is not None and when > changed for when in created)


def owned_by_controller(metadata: Mapping[str, Any], kinds: Sequence[str]) -> bool:
    """Whether the object's controller (ownerReference with ``controller: true``) is one of
    ``kinds`` (a Job of a CronJob: the CronJob's template is judged instead)."""
    for owner in metadata.get("ownerReferences") or ():
        if isinstance(owner, dict) and owner.get("controller") and owner.get("kind") in kinds:
            return True
    return False


@dataclass(frozen=True)
class NeverJudged:
    """An object a policy selects that admission never judged (``snapshots.audit``).

    Attributes:
        namespace, policy: where (``policy``: the selecting policies, ``,``-joined).
        kind: ``Pod`` or the workload's kind; ``denied``: admission would deny it now.
    """

    namespace: str
    policy: str
    kind: str
    denied: bool


def counts(never: Mapping[str, NeverJudged]) -> dict[tuple[str, str, str], tuple[int, int]]:
    """``(namespace, policy, kind)`` -> (never judged, of which would be denied)."""
    out: dict[tuple[str, str, str], tuple[int, int]] = {}
    for item in never.values():
        total, denied = out.get((item.namespace, item.policy, item.kind), (0, 0))
        out[(item.namespace, item.policy, item.kind)] = (total + 1, denied + int(item.denied))
    return out
