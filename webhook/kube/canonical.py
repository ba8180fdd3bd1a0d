"""RFC 8785 (JCS) canonical JSON bytes, fast and exact (pure: no I/O).

``canonical_json`` is what ``webhook.pod.distill`` hashes for the ``v1:sha256:`` fingerprint:
``rfc8785`` is the reference, ``orjson`` with sorted keys a byte-identical fast path for the
values where both agree. ``JCS_INT_MAX`` is the integer range JCS numbers can hold.
"""

from __future__ import annotations

from typing import Any, Final

import orjson
import rfc8785

JCS_INT_MAX: Final = 2**53 - 1  # RFC 8785 3.2.2.3: I-JSON integers (IEEE 754 double range)


def canonical_json(value: Any) -> bytes:
    """RFC 8785 (JCS) canonical JSON of ``value``.

    ``rfc8785.dumps`` is the reference but costs ~45 us for a typical distilled pod, on the
    admission hot path. For the common case the output of ``orjson`` with sorted keys is
    byte-identical: no floats (JCS formats numbers the ECMAScript way), integers within +-(2**53-1),
    ASCII keys (JCS sorts keys by UTF-16 code units, orjson by code points; they agree on ASCII),
    and the same string escaping (two-character escapes for backspace, form feed, newline, return
    and tab, six-character ones for other control characters, raw UTF-8 above). Anything else
    goes through ``rfc8785``. ``tests/kube/test_canonical.py`` checks both paths agree on generated
    JSON.

    Values nested deeper than orjson's limit (255 levels) also go through ``rfc8785``.

    Raises:
        ValueError: (``rfc8785.CanonicalizationError``) a value JCS cannot represent.
        RecursionError: nested deeper than Python's recursion limit (the admission edge answers
            that as a malformed request, 400).
    """
    if orjson_is_jcs(value):
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:  # nested deeper than orjson's 255 levels
            pass
    canonical: bytes = rfc8785.dumps(value)
    return canonical


def orjson_is_jcs(value: Any) -> bool:
    """Whether ``orjson`` with sorted keys writes exactly the JCS bytes for ``value``: exact
    str, bool, None, ints within ``JCS_INT_MAX``, dicts with ASCII string keys and lists, no
    float and no subclass. Such a value's orjson bytes also name it alone (no date, enum or
    NaN written like a string or null): ``pod.node_pins`` keys its memo by them."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(-JCS_INT_MAX <= value <= JCS_INT_MAX)
    if kind is dict:
        return all(type(k) is str and k.isascii() and orjson_is_jcs(v) for k, v in value.items())
    if kind is list:
        return all(orjson_is_jcs(v) for v in value)
    return False
