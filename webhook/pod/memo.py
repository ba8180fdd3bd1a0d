"""``fingerprint`` remembered by content, so a pod's validating call reuses its mutating call's.

The API server sends a selected pod to ``/mutate`` (snapready stamps ``fingerprint`` of the
mutated pod) and then, usually to the same replica, to ``/validate``, where ``hash-drift``
fingerprints the final pod again to see whether a later webhook changed hashed fields. Nothing
links the two calls (each has its own ``request.uid``), but the final pod is byte for byte the
pod snapready stamped unless a later webhook changed it. ``fingerprint`` is a pure function of
the distilled fields, so keying it by those fields' content cannot go stale: a changed pod is a
new key and is computed afresh; an entry is only ever evicted (bounded, least recently used
first: ``base.lru.Lru``).

The key is SHA-256 over orjson's sorted-keys bytes of what ``distill`` reads (the spec, the
``dev.gvisor.*`` annotations, the hashed labels): ~5 us against ~30 us for the fingerprint of
review 03's pod (``make bench-admit``, docs/performance.md), with the options of
``distill.PLAIN_JSON``. Only for JSON-decoded pods (what admission sees): the key cannot tell a
tuple from a list, or NaN from null, which JSON never holds; what those options refuse (dataclasses,
dates, subclasses, integers beyond 2**53, non-string keys) skips the memo. Only ``/mutate`` writes
entries (``admitted_fingerprint``); ``hash-drift`` only reads them (``recorded_fingerprint``),
since it also runs on YAML manifests in ``snapready check``.

``admitted_field_digests`` remembers the per-field digests (``webhook.pod.fields``) of a
fingerprint ``/mutate`` just stamped: a prediction that misses names the differing fields, and
the replicas of one template (the same fingerprint) then distill once, not once per pod
(py-spy, ``make bench-scale --profile``: 12% of a missing pod's admission was that second
distill). The template's first pod distills once too: ``admitted`` hands back the distilled pod
its fingerprint was computed from, which the request's view keeps for the digests
(``mutation.annotations.DISTILLED_KEY``: a new template's miss, ``stamp_prediction``, 83 -> 51 us
on 2 cores).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

import orjson

from webhook.base.lru import Lru
from webhook.base.types import RawObject, mapping
from webhook.pod.distill import (
    GVISOR_ANNOTATION_PREFIX,
    HASHED_LABELS,
    PLAIN_JSON,
    Distilled,
    distilled,
    fingerprint,
    fingerprint_of,
)
from webhook.pod.fields import digests_of, field_digests

MEMO_SIZE: Final = 2048
"""Pods remembered (~150 bytes each): the mutating/validating pairs in flight, many times over."""

DIGESTS_SIZE: Final = 128
"""Fingerprints whose field digests are remembered (~3 KiB each for review 03's pod)."""
DIGESTS_MAX_FIELDS: Final = 1024
"""Field digests of one pod remembered at most (a 100-container pod has about 1,000): admission
runs before the API server validates a pod, and 128 pods of thousands of ``dev.gvisor.*``
annotations each would otherwise stay in memory."""

DIGESTS_MAX_PATH_CHARS: Final = 64 * 1024
"""Characters of field paths one remembered pod may hold (review 03's: under 1,000): a
``dev.gvisor.*`` annotation key can be megabytes before the API server refuses the pod."""

_memo: Lru[bytes, str] = Lru(MEMO_SIZE)
_digests: Lru[str, Mapping[str, str]] = Lru(DIGESTS_SIZE)


def content_key(pod: RawObject) -> bytes | None:
    """SHA-256 of the fields ``distill`` reads (32 bytes), or None when orjson cannot write
    them exactly (see the module docstring)."""
    metadata = mapping(pod.get("metadata"))
    annotations = {
        key: value
        for key, value in mapping(metadata.get("annotations")).items()
        if isinstance(key, str) and key.startswith(GVISOR_ANNOTATION_PREFIX)
    }
    labels = mapping(metadata.get("labels"))
    hashed = [labels.get(key) for key in HASHED_LABELS]
    try:
        raw = orjson.dumps([pod.get("spec"), annotations, hashed], option=PLAIN_JSON)
    except orjson.JSONEncodeError:
        return None
    return hashlib.sha256(raw).digest()


def admitted_fingerprint(pod: RawObject) -> str:
    """``fingerprint(pod)``, remembered for the validating call of the same pod: what
    ``/mutate`` stamps. Only for pods decoded from an AdmissionReview's JSON (plus snapready's
    own injected values): nothing else may enter the memo.

    Raises:
        ValueError: as ``fingerprint`` (never for a pod decoded from JSON).
    """
    return admitted(pod)[0]


def admitted(pod: RawObject) -> tuple[str, Distilled | None]:
    """``admitted_fingerprint(pod)`` and, when it was computed here (not remembered), the
    distilled pod it was computed from: ``admitted_field_digests`` then needs no second distill
    for a new template's prediction miss.

    Raises:
        ValueError: as ``fingerprint``.
    """
    key = content_key(pod)
    known = _known(key)
    if known is not None:
        return known, None
    pod_distilled = distilled(pod)
    value = fingerprint_of(pod_distilled)
    if key is not None:
        _memo.put(key, value)
    return value, pod_distilled


def recorded_fingerprint(pod: RawObject) -> str:
    """``fingerprint(pod)``: the memo's value when ``/mutate`` stamped this content in this
    process, else computed (and not remembered). For ``hash-drift``, which also runs on
    manifests (``snapready check``): YAML can hold ``.nan``, which orjson writes like ``null``,
    so a manifest must never put its value into the memo.

    Raises:
        ValueError: as ``fingerprint``.
    """
    known = _known(content_key(pod))
    return known if known is not None else fingerprint(pod)


def _known(key: bytes | None) -> str | None:
    """The remembered fingerprint for ``key`` (None: no key, or not remembered)."""
    return None if key is None else _memo.get(key)


def admitted_field_digests(
    spec_hash: str, pod: RawObject, pod_distilled: Distilled | None = None
) -> Mapping[str, str]:
    """``field_digests(pod)`` (read-only), remembered by ``spec_hash``; computed from
    ``pod_distilled`` (``admitted``'s, for the same pod) when given.

    ``spec_hash`` must be the fingerprint snapready itself just computed for ``pod``
    (``stamp_fingerprint`` writes it on every selected pod, overwriting whatever the pod
    brought), never a value read from a request: equal fingerprints mean equal distilled
    fields, hence equal digests. Bounded to ``DIGESTS_SIZE``, least recently used out first;
    a pod with over ``DIGESTS_MAX_FIELDS`` fields or ``DIGESTS_MAX_PATH_CHARS`` characters of
    paths is computed, never kept.

    Raises:
        ValueError: as ``field_digests`` (never for a pod decoded from JSON).
    """
    known = _digests.get(spec_hash)
    if known is not None:
        return known
    digests = field_digests(pod) if pod_distilled is None else digests_of(pod_distilled)
    value: Mapping[str, str] = MappingProxyType(digests)
    if len(digests) > DIGESTS_MAX_FIELDS or sum(map(len, digests)) > DIGESTS_MAX_PATH_CHARS:
        return value  # a tenant's pod of thousands of fields, or of huge keys, is not kept
    _digests.put(spec_hash, value)
    return value
