"""Percentiles by each benchmark's method, and the Markdown tables the README quotes."""

from __future__ import annotations

import statistics

import pytest

from bench.harness.stats import markdown_table, percentile, verdict

HUNDRED = [float(n) for n in range(1, 101)]


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        pytest.param(HUNDRED, 50, 50.0, id="nearest-rank-median-of-1-to-100-is-50"),
        pytest.param(HUNDRED, 99, 99.0, id="nearest-rank-p99-of-1-to-100-is-99"),
        pytest.param(HUNDRED, 100, 100.0, id="nearest-rank-p100-is-the-maximum"),
        pytest.param([3.0, 1.0, 2.0], 50, 2.0, id="nearest-rank-sorts-first"),
        pytest.param([7.0], 99, 7.0, id="nearest-rank-of-one-value-is-that-value"),
    ],
)
def test_nearest_rank(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == expected


@pytest.mark.parametrize("method", ["inclusive", "exclusive"])
def test_quantile_methods_are_statistics_quantiles(method: str) -> None:
    values = [0.5 * n * n for n in range(37)]
    cuts = statistics.quantiles(values, n=100, method=method)  # type: ignore[arg-type]
    assert percentile(values, 50, method) == cuts[49]  # type: ignore[arg-type]
    assert percentile(values, 99, method) == cuts[98]  # type: ignore[arg-type]


@pytest.mark.parametrize("method", ["nearest", "inclusive", "exclusive"])
def test_empty_is_nan_and_one_value_is_itself(method: str) -> None:
    assert percentile([], 50, method) != percentile([], 50, method)  # type: ignore[arg-type]
    assert percentile([4.0], 99, method) == 4.0  # type: ignore[arg-type]


def test_markdown_table_renders_empty_cells_as_the_readme_does() -> None:
    table = markdown_table(["target (design.md)", "measured", ""], [["RSS", "83 MiB", "met"]])
    assert table.splitlines() == [
        "| target (design.md) | measured | |",
        "|---|---|---|",
        "| RSS | 83 MiB | met |",
    ]
    assert markdown_table(["a", "b"], [["x", ""]]).splitlines()[-1] == "| x | |"


def test_verdicts() -> None:
    assert (verdict(True), verdict(False)) == ("met", "NOT met")
