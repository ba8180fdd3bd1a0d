"""The webhook scope: CEL ``matchConditions`` that send the API server's calls only for objects a
PodSnapshotPolicy can select.

Kubernetes evaluates a webhook's ``matchConditions`` (admissionregistration.k8s.io/v1, GA in
1.30) before calling it; all must be true for the call to be made. snapready writes ONE condition
per webhook, ``snapready-scope``, built from the current policies:

- a pod (also ``pods/ephemeralcontainers``, whose object is the Pod) is sent when a policy of
  ``request.namespace`` selects ``object.metadata.labels``;
- a pod controller when a policy selects its template's labels (``TEMPLATE_PATHS``);
- the snapshot CRDs (group ``podsnapshot.gke.io``) always;
- a custom resource that embeds pod templates (``custom_workloads``: agent-sandbox, Ray, ...)
  when ``request.namespace`` has a policy: its templates sit at kind-specific paths, some in
  lists (Ray worker groups), so the condition is per namespace, never narrower than the policies;
- a pod, or a Binding (``pods/binding``, ``bindings``: the API server copies its labels and
  annotations onto the pod), that carries (or, on UPDATE, carried) a ``<prefix>`` key snapready
  owns (``owned_keys_cel``), whatever its labels: ``/mutate`` removes those a tenant wrote on a
  pod no policy selects, and the ownership webhooks refuse a change to them, so a forged stamp
  cannot wait on an unselected pod for a relabel into a policy's selector.

Each selector is translated with ``k8s.io/apimachinery/pkg/labels`` semantics (matchLabels and
``In``, ``NotIn``, ``Exists``, ``DoesNotExist``; ``NotIn`` also matches an absent label, an empty
selector matches everything). Every access is guarded so the expression never errors (a
``null`` object on DELETE, absent labels, a missing template): with ``failurePolicy: Fail`` an
evaluation error would reject the request. Limits (k8s.io/apiserver admission plugin
``webhook/matchconditions`` and admissionregistration validation): at most 64 conditions per
webhook and a bounded CEL cost; when the policies' expression grows past ``max_chars`` the scope
falls back to the namespaces that have policies, and past that to no condition at all (every
matched request is sent), never to a narrower one. Pure module.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from webhook.base.keys import USER_ANNOTATIONS, USER_LABELS
from webhook.kube.custom_workloads import BUILTIN
from webhook.kube.matching import LabelSelector, Policy, Requirement
from webhook.kube.workloads import TEMPLATE_PATHS

CONDITION_NAME = "snapready-scope"
SNAPSHOT_GROUP = "podsnapshot.gke.io"
MAX_EXPRESSION_CHARS = 16_384
"""Our own bound on one expression; far below what the API server's CEL cost budget allows for
these shapes (``in`` and index on a map are constant cost; ``owned_keys_cel``'s ``exists`` over
the pod's labels and annotations costs their count, which the API server bounds), so a write
never fails on cost."""

CONTROLLER_RESOURCES: Mapping[str, str] = {
    "deployments": "Deployment",
    "statefulsets": "StatefulSet",
    "daemonsets": "DaemonSet",
    "replicasets": "ReplicaSet",
    "jobs": "Job",
    "cronjobs": "CronJob",
}
"""Resource (plural, what ``request.resource.resource`` holds) -> kind, for ``TEMPLATE_PATHS``."""
CONTROLLER_RESOURCES_BY_PATH: Mapping[str, tuple[str, ...]] = {
    resource: TEMPLATE_PATHS[kind] for resource, kind in CONTROLLER_RESOURCES.items()
}

CUSTOM_RESOURCES: tuple[tuple[str, str], ...] = tuple(
    sorted({(w.group, w.resource) for w in BUILTIN.values()})
)
"""(API group, resource) of the built-in custom workloads, for the scope condition."""

Level = Literal["policies", "namespaces", "everything"]


@dataclass(frozen=True)
class Scope:
    """The condition to write and how precise it is.

    Attributes:
        level: ``policies`` (label selectors), ``namespaces`` (fallback: any pod of a namespace
            with a policy) or ``everything`` (no condition: the static scope).
        conditions: the ``matchConditions`` list to write (``[]`` for ``everything``).
    """

    level: Level
    conditions: tuple[dict[str, str], ...]


def cel_string(value: str) -> str:
    """A CEL string literal for ``value`` (JSON escaping is valid CEL string syntax)."""
    return json.dumps(value, ensure_ascii=False)


def requirement_cel(requirement: Requirement, labels: str) -> str:
    """One selector requirement as a CEL boolean over the map expression ``labels``."""
    key = cel_string(requirement.key)
    present = f"{key} in {labels}"
    if requirement.operator == "Exists":
        return present
    if requirement.operator == "DoesNotExist":
        return f"!({present})"
    values = "[" + ", ".join(cel_string(v) for v in sorted(requirement.values)) + "]"
    if len(requirement.values) == 1:
        member = f"{labels}[{key}] == {values[1:-1]}"
    else:
        member = f"{labels}[{key}] in {values}"
    if requirement.operator == "In":
        return f"({present} && {member})"
    return f"(!({present}) || !({member}))"


def selector_cel(selector: LabelSelector, labels: str) -> str:
    """A whole selector (AND of its requirements; ``true`` when empty) over ``labels``."""
    if selector.is_empty:
        return "true"
    return " && ".join(requirement_cel(r, labels) for r in selector.requirements)


def policies_cel(policies: Iterable[Policy], labels: str) -> str:
    """True when some policy of ``request.namespace`` selects ``labels`` (``false`` if none)."""
    by_namespace: dict[str, list[Policy]] = {}
    for policy in policies:
        by_namespace.setdefault(policy.namespace, []).append(policy)
    terms = []
    for namespace in sorted(by_namespace):
        selectors = [selector_cel(p.selector, labels) for p in by_namespace[namespace]]
        any_selected = "true" if "true" in selectors else " || ".join(f"({s})" for s in selectors)
        terms.append(f"(request.namespace == {cel_string(namespace)} && ({any_selected}))")
    return " || ".join(terms) if terms else "false"


def _labels_at(path: tuple[str, ...]) -> str:
    """The labels map under ``object.<path>.metadata`` with every level guarded (``{}``)."""
    parts = ["object", *path, "metadata", "labels"]
    guards = " && ".join(f"has({'.'.join(parts[: i + 1])})" for i in range(1, len(parts)))
    return f"({guards} ? {'.'.join(parts)} : {{}})"


def labels_by_kind() -> str:
    """The labels the policies judge: a pod's own, or its controller template's."""
    cron = CONTROLLER_RESOURCES_BY_PATH["cronjobs"]
    return (
        f"(request.resource.resource == 'pods' ? {_labels_at(())} : "
        f"request.resource.resource == 'cronjobs' ? {_labels_at(cron)} : "
        f"{_labels_at(TEMPLATE_PATHS['Deployment'])})"
    )


DEFAULT_PREFIX = "snapready.io/"
"""``Settings.prefix``'s default."""


def owned_keys_cel(prefix: str = DEFAULT_PREFIX) -> str:
    """True when the pod (``object``, or ``oldObject`` on UPDATE) carries a ``prefix`` label or
    annotation that snapready owns: every one but those a user sets (``keys.USER_LABELS``,
    ``keys.USER_ANNOTATIONS``; ``mutation.ownership``). Written with CEL optionals
    (``.?labels.orValue({})``, as the chart's ownership condition is), each side guarded
    against ``null`` (``oldObject`` on CREATE); an ``exists`` over a map costs its size, which
    the API server's own limits bound (a pod's metadata is at most 256 KiB of annotations)."""
    own = cel_string(prefix)

    def owned(side: str, field: str, users: tuple[str, ...]) -> str:
        kept = "".join(f" && k != {cel_string(prefix + user)}" for user in users)
        return f"{side}.metadata.?{field}.orValue({{}}).exists(k, k.startsWith({own}){kept})"

    sides = [
        f"({side} != null && ({owned(side, 'labels', USER_LABELS)} || "
        f"{owned(side, 'annotations', USER_ANNOTATIONS)}))"
        for side in ("object", "oldObject")
    ]
    return "(" + " || ".join(sides) + ")"


def scope_expression(
    policies: Iterable[Policy],
    *,
    by_namespace_only: bool = False,
    custom: Iterable[tuple[str, str]] = CUSTOM_RESOURCES,
    prefix: str = DEFAULT_PREFIX,
) -> str:
    """The ``snapready-scope`` expression for the current policies.

    The labels map is computed once and bound to ``L`` through a one-element list
    (``[labels].all(L, ...)``, a standard CEL comprehension), so each policy's selector is
    written once whatever the number of kinds. ``by_namespace_only`` drops the label selectors:
    any pod or template of a namespace that has a policy is sent (the fallback when the selectors
    do not fit). ``custom``: (group, resource) of the custom workloads, sent in namespaces that
    have a policy. A pod carrying a key snapready owns is sent whatever the policies
    (``owned_keys_cel`` for ``prefix``).
    """
    policies = tuple(policies)
    kinds = "[" + ", ".join(cel_string(r) for r in ("pods", *CONTROLLER_RESOURCES)) + "]"
    namespaces = sorted({p.namespace for p in policies})
    listed = "[" + ", ".join(cel_string(ns) for ns in namespaces) + "]"
    if by_namespace_only:
        selected = f"request.namespace in {listed}"
    else:
        selected = f"[{labels_by_kind()}].all(L, {policies_cel(policies, 'L')})"
    expression = (
        f"request.resource.group == {cel_string(SNAPSHOT_GROUP)} || "
        f"(request.resource.resource in {kinds} && object != null && {selected}) || "
        f"(request.resource.resource in ['pods', 'bindings'] && {owned_keys_cel(prefix)})"
    )
    pairs = sorted(set(custom))
    if not pairs or not namespaces:
        return expression
    resources = " || ".join(
        f"(request.resource.group == {cel_string(g)} && request.resource.resource == "
        f"{cel_string(r)})"
        for g, r in pairs
    )
    return f"{expression} || (({resources}) && object != null && request.namespace in {listed})"


def build_scope(
    policies: Iterable[Policy],
    *,
    max_chars: int = MAX_EXPRESSION_CHARS,
    custom: Iterable[tuple[str, str]] = CUSTOM_RESOURCES,
    prefix: str = DEFAULT_PREFIX,
) -> Scope:
    """The most precise scope that fits ``max_chars``: selectors, else namespaces, else none.

    Never narrower than the policies: every pod a policy selects satisfies the condition (and
    every pod carrying a key snapready owns under ``prefix``).
    """
    policies = tuple(policies)
    custom = tuple(custom)
    precise = scope_expression(policies, custom=custom, prefix=prefix)
    if len(precise) <= max_chars:
        return Scope("policies", ({"name": CONDITION_NAME, "expression": precise},))
    coarse = scope_expression(policies, by_namespace_only=True, custom=custom, prefix=prefix)
    if len(coarse) <= max_chars:
        return Scope("namespaces", ({"name": CONDITION_NAME, "expression": coarse},))
    return Scope("everything", ())
