"""Per-field digests of the distilled spec: name what differs from a snapshot without its values.

``field_digests(pod)`` flattens ``distill(pod)`` into field paths (``spec.dnsPolicy``,
``spec.containers[0].image``, ``metadata.annotations["dev.gvisor.x"]``) and keeps a short digest
of each value. An origin record (a SnapshotRecord, ``snapshots.records``) stores the digests of
the pod the snapshot was taken from; comparing them with a new pod's names the differing fields
(``differing_fields``) while storing no value (env is not hashed at all, but images, commands and
mounts could still be sensitive). Pure module.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from webhook.base.text import natural_key
from webhook.base.types import RawObject
from webhook.pod.context import join_path
from webhook.pod.distill import Distilled, distilled, jcs_bytes

DIGEST_CHARS = 12
"""Hex characters kept of each SHA-256 (48 bits: collisions between two values of one field are
negligible; a record of a 10-container pod stays around 3 KiB)."""
_ITEM_LISTS = ("volumes", "initContainers", "containers")


def digest(value: Any, plain: bool = False) -> str:
    """Short SHA-256 of ``value``'s canonical JSON (RFC 8785); ``plain``: ``value`` is part of
    a ``Distilled`` whose ``plain`` is true (``distill.jcs_bytes`` then skips the walk)."""
    return hashlib.sha256(jcs_bytes(value, plain)).hexdigest()[:DIGEST_CHARS]


def field_digests(pod: RawObject) -> dict[str, str]:
    """Field path -> short digest for every distilled field of ``pod`` (a Pod or template).

    Granularity: each key of each container, init container and volume (by index), each hashed
    annotation and label, each other pod-level field. Raises like ``distill`` does never;
    ``canonical_json`` raises ``ValueError`` only for values JSON cannot hold (not from an API
    server).
    """
    return digests_of(distilled(pod))


def digests_of(pod: Distilled) -> dict[str, str]:
    """``field_digests`` of an already distilled pod (the one its fingerprint was computed
    from: ``webhook.pod.memo`` distills a new template once for both).

    Raises:
        ValueError: as ``field_digests``.
    """
    plain = pod.plain
    sha256, canonical = hashlib.sha256, jcs_bytes  # ``digest``, inlined: ~30 fields per pod
    out: dict[str, str] = {}
    metadata = pod.value.get("metadata") or {}
    for section in ("annotations", "labels"):
        for key, value in (metadata.get(section) or {}).items():
            out[join_path("metadata", section, key)] = digest(value, plain)
    spec = pod.value.get("spec") or {}
    for key, value in spec.items():
        if key in _ITEM_LISTS and isinstance(value, list):
            for index, item in enumerate(value):
                prefix = f"spec.{key}[{index}]"  # join_path("spec", key, index): key is a name
                if isinstance(item, dict):
                    for sub, sub_value in item.items():
                        if sub.__class__ is str and sub and "." not in sub and "/" not in sub:
                            path = f"{prefix}.{sub}"  # what join_path makes of a plain key
                        else:
                            path = join_path("spec", key, index, sub)
                        out[path] = sha256(canonical(sub_value, plain)).hexdigest()[:DIGEST_CHARS]
                else:
                    out[prefix] = digest(item, plain)
        else:
            out[join_path("spec", key)] = digest(value, plain)
    return out


def differing_fields(ours: Mapping[str, str], theirs: Mapping[str, str]) -> list[str]:
    """Paths whose digest differs or that exist on one side only, in a stable order."""
    # (path, digest) pairs on one side only: C-level set work, most fields being equal
    paths = {path for path, _ in ours.items() ^ theirs.items()}
    return sorted(paths, key=natural_key)
