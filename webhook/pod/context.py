"""``PodContext``: the read-only view of one pod (or pod template) that rules and mutators get.

The same view serves a Pod (``spec_path="spec"``), a Deployment's template
(``spec_path="spec.template.spec"``) or a CronJob's (``spec.jobTemplate.spec.template.spec``), so
every rule reports field paths that point into the object the user actually submitted.
Pure module.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.base.config import Settings
from webhook.base.types import Mode, RawObject
from webhook.kube.matching import Policy
from webhook.snapshots.state import ClusterState


@dataclass(frozen=True)
class PodContext:
    """Everything a rule may look at, for one pod or pod template.

    Attributes:
        spec: the PodSpec dict (``pod["spec"]`` or ``template["spec"]``), never None.
        metadata: the pod's or template's metadata dict, never None.
        spec_path: dotted path of ``spec`` in the submitted object (``spec.template.spec``...).
        metadata_path: dotted path of ``metadata`` (``metadata``, ``spec.template.metadata``).
        namespace: the request namespace (pods often carry none in the object).
        kind: the submitted object's kind (``Pod``, ``Deployment``...).
        policies: every PodSnapshotPolicy selecting the pod, sorted by name (non-empty for rules).
        settings: the validated settings (rules read ``settings.rules``).
        cluster: the cluster state snapshot the decision is made against.
        mode: the effective enforcement mode for this pod (policy > namespace > global).
    """

    spec: RawObject
    metadata: RawObject
    spec_path: str
    metadata_path: str
    namespace: str
    kind: str
    policies: tuple[Policy, ...]
    settings: Settings
    cluster: ClusterState
    mode: Mode
    memo: dict[str, Any] = field(default_factory=dict, init=False, compare=False, repr=False)
    """Facts derived once per pod view and shared by several rules (e.g. the placement)."""
    _items: dict[str, list[RawObject]] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )
    _indexed: dict[str, list[tuple[int, RawObject]]] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    def indexed(self, key: str) -> list[tuple[int, RawObject]]:
        """``indexed_dicts(spec[key])``: the items of ``items(key)`` with their positions in
        the list as written (for paths), computed once per view."""
        found = self._indexed.get(key)
        if found is None:
            found = self._indexed[key] = indexed_dicts(self.spec.get(key))
        return found

    def items(self, key: str) -> list[RawObject]:
        """``list_of_dicts(spec[key])`` (``containers``, ``initContainers``, ``volumes``...),
        computed once per view: most rules walk the same lists."""
        found = self._items.get(key)
        if found is None:
            found = self._items[key] = list_of_dicts(self.spec.get(key))
        return found

    @property
    def labels(self) -> Mapping[str, str]:
        """The pod's labels (``{}`` when absent or null)."""
        labels = self.metadata.get("labels")
        return labels if isinstance(labels, dict) else {}

    @property
    def annotations(self) -> Mapping[str, str]:
        """The pod's annotations (``{}`` when absent or null)."""
        annotations = self.metadata.get("annotations")
        return annotations if isinstance(annotations, dict) else {}

    @functools.cached_property
    def rootfs_only(self) -> bool:
        """True when every selecting policy has ``snapshotScope: rootfs-only``.

        GKE skips the distilled-spec hash and memory restore for such snapshots and accepts other
        machine families, E2 included (docs/gke-facts.md#section-3), so machine and hash rules
        relax. Computed once per view.
        """
        return bool(self.policies) and all(p.scope == "rootfs-only" for p in self.policies)

    @property
    def policy_ids(self) -> str:
        """The selecting policies as ``namespace/name``, comma-separated (logs and audit)."""
        return ",".join(f"{p.namespace}/{p.name}" for p in self.policies)

    def spec_field(self, *parts: str | int) -> str:
        """Dotted field path under the spec, e.g. ``spec_field("containers", 1, "image")``."""
        return join_path(self.spec_path, *parts)

    def metadata_field(self, *parts: str | int) -> str:
        """Dotted field path under the metadata, e.g. ``metadata.annotations["a/b"]``."""
        return join_path(self.metadata_path, *parts)


CACHED_PATH_CHARS = 256
"""Longest key or base a cached ``join_path`` call may hold: real paths are well under it, and
a tenant's key can be megabytes (admission sees a pod before the API server validates it), so
4,096 cached paths must never hold 4,096 of those."""


def join_path(base: str, *parts: str | int) -> str:
    """Build a Kubernetes-style field path: ints as ``[i]``, keys with dots or slashes quoted.

    Cached: the rules build the same few dozen paths for every pod (bounded LRU, so user-supplied
    keys cannot grow it).

    >>> join_path("spec", "containers", 1, "resources", "limits", "nvidia.com/gpu")
    'spec.containers[1].resources.limits["nvidia.com/gpu"]'
    """
    if len(base) > CACHED_PATH_CHARS:
        return _join_path(base, *parts)
    for part in parts:  # a loop, not any(): this runs dozens of times per review
        if part.__class__ is str and len(part) > CACHED_PATH_CHARS:
            return _join_path(base, *parts)
    return _cached_join_path(base, *parts)


def _join_path(base: str, *parts: str | int) -> str:
    out = base
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif any(ch in part for ch in "./") or not part:
            out += f'["{part}"]'
        else:
            out += f".{part}" if out else part
    return out


_cached_join_path = functools.lru_cache(maxsize=4096)(_join_path)


def list_of_dicts(value: Any) -> list[RawObject]:
    """``value`` if it is a list, keeping only its dict items; ``[]`` for null/absent/odd."""
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, dict)]


def indexed_dicts(value: Any) -> list[tuple[int, RawObject]]:
    """``(index, item)`` for each dict item of ``value`` (a list; ``[]`` for null/absent/odd),
    ``index`` its position in the list as written: a path built from it names that item even
    when a non-dict item comes before it (``snapready check`` reads manifests the API server
    never validated)."""
    if not isinstance(value, list):
        return []
    return [(index, item) for index, item in enumerate(value) if isinstance(item, dict)]
