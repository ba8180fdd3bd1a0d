"""How user-supplied values are shown in messages (pure: no I/O).

``clip``/``clip_all`` cut any value a rule, a quantity error or a CLI message quotes to at most
``CLIP_WIDTH`` characters each, so an attacker-sized value never makes a message long. Used by
``webhook.kube.quantity``, ``webhook.pod.node_pins``, the rules (``webhook/rules``) and ``snapready
check``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any

_DIGITS = re.compile(r"(\d+)")

CLIP_WIDTH = 20
"""Characters of a user-supplied value a message shows (rule messages stay under ~200 chars)."""


def clip(value: Any, width: int = CLIP_WIDTH) -> str:
    """``value`` for a message: strings as they are, anything else as ``repr``, cut to ``width``
    characters ending in ``...`` (a 400-digit GPU count shows as ``'99999999999999999...``)."""
    try:
        text = value if isinstance(value, str) else repr(value)
    except ValueError:  # int too large for str() (Python's 4300-digit limit)
        text = f"<{type(value).__name__}>"
    return text if len(text) <= width else text[: width - 3] + "..."


def clip_all(values: Iterable[Any], limit: int = 3, width: int = CLIP_WIDTH) -> str:
    """At most ``limit`` clipped values, comma-separated, then ``+N more``."""
    items = list(values)
    shown = ", ".join(clip(v, width) for v in items[:limit])
    return shown + (f" +{len(items) - limit} more" if len(items) > limit else "")


CACHED_KEY_CHARS = 256
"""Longest text whose ``natural_key`` is cached: field paths are short, and a tenant's can be
megabytes long (a pod's annotation key, before the API server validates it)."""


def natural_key(text: str) -> tuple[str | int, ...]:
    """Sort key that orders embedded numbers by value: ``containers[2]`` before
    ``containers[100]`` (plain string order puts ``1`` before ``2``). Strings and ints alternate
    at fixed positions, so keys of any two texts compare without a type error. Cached (bounded
    in entries, and only texts up to ``CACHED_KEY_CHARS``): findings of every pod sort by the
    same few field paths."""
    if len(text) > CACHED_KEY_CHARS:
        return _natural_key(text)
    return _cached_natural_key(text)


def _natural_key(text: str) -> tuple[str | int, ...]:
    parts = _DIGITS.split(text)
    return tuple(int(part) if index % 2 else part for index, part in enumerate(parts))


_cached_natural_key = functools.lru_cache(maxsize=2048)(_natural_key)
