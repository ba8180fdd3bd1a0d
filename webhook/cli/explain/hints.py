"""What differs between a pod and one snapshot, as entries with a fix hint (``snapready explain``).

The differences come from ``pod.restore.differences`` (the admission-time prediction's own
function): differing field paths named from the per-field digests of the origin record, and
one reason per node fact (machine family, arch, GKE node version, GPU driver label). Each becomes
``{"kind", "path", "detail", "hint"}``: ``kind`` is ``field``, ``fingerprint`` (the record has no
digests), ``family``, ``arch``, ``version`` or ``driver``; ``path`` only for ``field``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from webhook.base.keys import HELPERS_NAME
from webhook.pod.pools import MachineFit
from webhook.pod.restore import PodFacts, differences
from webhook.snapshots.state import NodePoolFacts
from webhook.snapshots.views import OriginRecord

NEW_CHECKPOINT = "trigger a new checkpoint"
_ITEM = re.compile(r"^spec\.(containers|initContainers|volumes)\[(\d+)\](?:\.(\w+))?")
_NODE_HINTS = {
    "family": "pin the machine family the snapshot was taken on, or " + NEW_CHECKPOINT,
    "arch": "pin the architecture the snapshot was taken on, or " + NEW_CHECKPOINT,
    "version": NEW_CHECKPOINT + " on the upgraded pool",
    "driver": "pin a node pool with the snapshot's GPU driver label, or " + NEW_CHECKPOINT,
}


def explain_differences(
    pod: PodFacts,
    origin: OriginRecord,
    landing: list[NodePoolFacts],
    *,
    rootfs_only: bool,
    spec: Mapping[str, Any],
    fit: MachineFit | None = None,
) -> list[dict[str, Any]]:
    """Every difference between ``pod`` and ``origin`` with its hint; ``[]`` when it matches.

    ``spec`` (the live pod's) only names containers in hints; ``fit``: where the pod can land
    (``pools.machine_fit`` with the cluster's ComputeClasses), as the prediction judged it.
    """
    fields, reasons = differences(pod, origin, landing, rootfs_only, fit=fit)
    spec_differs = not rootfs_only and origin.spec_hash != pod.spec_hash
    out: list[dict[str, Any]] = []
    for position, reason in enumerate(reasons):
        if spec_differs and position == 0:  # ``differences`` puts the spec reason first
            out += [field_entry(path, pod.field_digests(), origin.fields, spec) for path in fields]
            if not fields:
                out.append(_entry("fingerprint", reason, "compare the pods with `snapready diff`"))
            continue
        kind = node_kind(reason)
        out.append(_entry(kind, reason, _NODE_HINTS[kind]))
    return out


def node_kind(reason: str) -> str:
    """The node fact a ``differences`` reason is about (its wording, ``pod.restore``)."""
    if reason.startswith(("pinned to arch ", "lands on arch ", "node selection rules out arch ")):
        return "arch"
    if reason.startswith(
        (
            "pinned to ",
            "ComputeClass ",
            "lands on machine family ",
            "node selection rules out machine family ",
            "asks for GPUs",
        )
    ):
        return "family"
    if reason.startswith("GPU driver "):
        return "driver"
    return "version"


def _entry(kind: str, detail: str, hint: str, path: str | None = None) -> dict[str, Any]:
    return {"kind": kind, "path": path, "detail": detail, "hint": hint}


def field_entry(
    path: str, ours: Mapping[str, str], theirs: Mapping[str, str], spec: Mapping[str, Any]
) -> dict[str, Any]:
    """One differing field path with a hint (``image differs: roll back ...``)."""
    if path not in theirs:
        return _entry("field", f"{path} is new", f"remove it, or {NEW_CHECKPOINT}", path)
    if path not in ours:
        detail = f"{path} is gone (the snapshot's pod had it)"
        return _entry("field", detail, f"add it back, or {NEW_CHECKPOINT}", path)
    return _entry("field", f"{path} differs", _field_hint(path, spec), path)


def _field_hint(path: str, spec: Mapping[str, Any]) -> str:
    match = _ITEM.match(path)
    if match is None:
        if path.startswith("metadata.labels"):
            return "each completion index restores only from its own snapshots"
        return f"set it back to the snapshot's value, or {NEW_CHECKPOINT}"
    section, index, key = match.group(1), int(match.group(2)), match.group(3)
    name = _item_name(spec.get(section), index)
    if section == "initContainers" and name == HELPERS_NAME and key == "image":
        return (
            "snapready's helpers image differs: admit with the injection.helpers_image the "
            f"snapshot was taken with, or {NEW_CHECKPOINT}"
        )
    if key == "image":
        return f"roll back to the snapshot's image, or {NEW_CHECKPOINT}"
    what = "volume" if section == "volumes" else "container"
    return (
        f"set {key or 'it'} of {what} {name or index} back to the snapshot's, or {NEW_CHECKPOINT}"
    )


def _item_name(items: Any, index: int) -> str | None:
    if isinstance(items, Sequence) and 0 <= index < len(items) and isinstance(items[index], dict):
        name = items[index].get("name")
        return name if isinstance(name, str) else None
    return None
