"""What commands print: pretty JSON, the ``snapready: ...`` error line, kubectl-like ages."""

from __future__ import annotations

import sys
from typing import Any

import orjson

from webhook.base.text import clip


def print_json(payload: Any) -> None:
    """Pretty, key-sorted JSON on stdout (stable for scripts and golden files)."""
    sys.stdout.write(
        orjson.dumps(payload, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n"
    )


def fail(message: str, code: int = 2) -> int:
    """Print ``snapready: message`` on stderr and return ``code``."""
    sys.stderr.write(f"snapready: {message}\n")
    return code


def internal_error(exc: Exception) -> int:
    """The last line of a command: ``snapready: internal error: ...`` and 2, never a traceback."""
    text = str(exc)
    return fail(f"internal error: {type(exc).__name__}" + (f": {clip(text, 200)}" if text else ""))


def age_text(seconds: float | None) -> str:
    """``45s``, ``12m``, ``3h20m``, ``5d`` (kubectl-like); ``-`` when unknown."""
    if seconds is None:
        return "-"
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m"
    if whole < 86400:
        hours, minutes = divmod(whole // 60, 60)
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    return f"{whole // 86400}d"
