"""Percentiles, verdicts and Markdown tables.

Each benchmark keeps the percentile method its published figures were computed with, so that a
figure stays comparable with docs/performance.md's: ``nearest`` (nearest rank, ``make
bench-scale``), ``inclusive`` and ``exclusive`` (``statistics.quantiles`` with ``n=100``: ``make
bench-cluster`` and ``make bench``'s httpx generator).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Literal

Method = Literal["nearest", "inclusive", "exclusive"]


def percentile(values: Sequence[float], q: float, method: Method = "nearest") -> float:
    """Percentile ``q`` (0-100; 1-99 for the quantile methods) of ``values``; NaN when empty."""
    if not values:
        return float("nan")
    if method == "nearest":
        ordered = sorted(values)
        rank = max(1, round(q / 100 * len(ordered) + 0.5 - 1e-9))
        return ordered[min(len(ordered), rank) - 1]
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=100, method=method)[int(q) - 1]


def verdict(ok: bool) -> str:
    """How a target reads in every report."""
    return "met" if ok else "NOT met"


def verdict_line(checks: Sequence[tuple[str, str, bool | None]]) -> str:
    """The one line a benchmark ends with: ``verdict: 5/7 targets met (NOT met: name
    measured; ...)`` from (target, measured, met) rows; met ``None`` is a target that could not
    be measured (``measured`` says why): listed apart, never counted as met."""
    met = sum(1 for _, _, ok in checks if ok)
    missed = [f"{name} {measured}" for name, measured, ok in checks if ok is False]
    unknown = [f"{name} ({measured})" for name, measured, ok in checks if ok is None]
    notes = [f"NOT met: {'; '.join(missed)}"] if missed else []
    notes += [f"not measured: {'; '.join(unknown)}"] if unknown else []
    line = f"verdict: {met}/{len(checks)} targets met"
    return line + (f" ({'; '.join(notes)})" if notes else "")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table (what docs/performance.md quotes), one line per row."""
    lines = [_row(header), "|" + "---|" * len(header)]
    lines += [_row(row) for row in rows]
    return "\n".join(lines)


def _row(cells: Sequence[object]) -> str:
    """``| a | b |``; an empty cell is ``| |``."""
    return "|" + "|".join(f" {cell} " if str(cell) else " " for cell in cells) + "|"
