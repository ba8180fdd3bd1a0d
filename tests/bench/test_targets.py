"""bench-cluster's targets and verdict from constructed totals: each figure next to its target,
met / NOT met / not measured, and the one verdict line the run ends with."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from bench.cluster.phases import Totals
from bench.cluster.report import _ratio_cell, outside_load
from bench.cluster.targets import Figures, Target, evaluate, figures, targets_table, verdict_line

ADMIT_OK = (("admit /mutate (new pod)", 55.0, 60.0), ("admit /validate", 58.0, 60.0))


def totals_of(
    latency_ms: float, webhook_ms: float, *, pods: int = 100, calls: int = 1, wall_ms: float = 1000
) -> Totals:
    """``pods`` selected pods, each ``latency_ms`` to create and ``webhook_ms`` of webhook CPU."""
    return Totals(
        latencies=[latency_ms / 1000] * pods,
        pods=pods,
        wall_ms=wall_ms,
        cpu=Counter({"webhook": webhook_ms * pods, "apiserver": 5.0 * pods}),
        calls=Counter({"mutate": calls * pods, "validate": calls * pods}),
    )


def run(
    snapready_ms: float, go_ms: float | None, *, unselected_calls: int = 0
) -> dict[tuple[str, str], Totals]:
    """A run's totals: constant (50 ms, 1 ms CPU), the Go peer (if any) and snapready."""
    totals = {("constant", "selected"): totals_of(50, 1.0)}
    if go_ms is not None:
        totals["go-peer", "selected"] = totals_of(55, go_ms)
    totals["snapready", "selected"] = totals_of(60, snapready_ms)
    for kind, calls in (("unselected", unselected_calls), ("plain", 0)):
        totals["snapready", kind] = Totals(pods=100, calls=Counter({"mutate": calls}))
    return totals


def by_short(rows: list[Target]) -> dict[str, Target]:
    return {row.short: row for row in rows}


def test_every_target_met_reads_seven_of_seven() -> None:
    rows = evaluate(figures(run(1.8, 2.5), "snapready", ADMIT_OK))
    assert [row.ok for row in rows] == [True] * 7
    assert verdict_line(rows) == "verdict: 7/7 targets met"


def test_cpu_figures_are_ratios_to_the_floor_and_the_go_peer_with_both_figures_shown() -> None:
    rows = by_short(evaluate(figures(run(3.4, 2.72), "snapready", ADMIT_OK)))
    floor, go = rows["webhook CPU vs floor"], rows["webhook CPU vs Go peer"]
    assert (floor.figure, floor.detail, floor.target, floor.ok) == (
        "3.40x", "3.40 / 1.00 ms", "<= 2x", False
    )  # fmt: skip
    assert (go.figure, go.detail, go.target, go.ok) == ("1.25x", "3.40 / 2.72 ms", "< 1x", False)
    assert rows["CREATE p50"].figure == "1.20x"
    assert rows["CREATE p50"].ok is True


@pytest.mark.parametrize(
    ("snapready_ms", "go_ms", "ok"),
    [
        pytest.param(2.0, 2.5, True, id="exactly-twice-the-floor-is-met"),
        pytest.param(2.01, 2.5, False, id="just-above-twice-the-floor-is-not-met"),
    ],
)
def test_floor_bound_is_inclusive(snapready_ms: float, go_ms: float, ok: bool) -> None:
    rows = by_short(evaluate(figures(run(snapready_ms, go_ms), "snapready")))
    assert rows["webhook CPU vs floor"].ok is ok


def test_equal_to_the_go_peer_is_not_below_it() -> None:
    rows = by_short(evaluate(figures(run(1.5, 1.5), "snapready")))
    assert rows["webhook CPU vs Go peer"].ok is False


def test_a_skipped_go_peer_is_not_measured_and_says_why() -> None:
    skipped = {"go-peer": "scripts/peers.sh exited 1: go is not installed"}
    rows = evaluate(figures(run(1.5, None), "snapready", ADMIT_OK), skipped)
    go = by_short(rows)["webhook CPU vs Go peer"]
    assert go.ok is None
    assert go.mark == "not measured"
    assert "go is not installed" in go.detail
    assert verdict_line(rows) == (
        "verdict: 6/7 targets met (not measured: webhook CPU vs Go peer (go-peer skipped: "
        "scripts/peers.sh exited 1: go is not installed))"
    )


def test_verdict_names_every_target_not_met_with_its_figure() -> None:
    admit = (("admit /mutate (new pod)", 72.8, 60.0), ("admit /validate", 58.0, 60.0))
    rows = evaluate(figures(run(3.4, 2.72, unselected_calls=3), "snapready", admit))
    assert verdict_line(rows) == (
        "verdict: 3/7 targets met (NOT met: calls per 1,000 unselected pods 30 / 0; webhook CPU "
        "vs floor 3.40x; webhook CPU vs Go peer 1.25x; in-process admit 72.8 us)"
    )


def test_reinvoked_mutation_is_not_one_call_per_pod() -> None:
    totals = run(1.5, 2.0)
    totals["snapready", "selected"] = totals_of(60, 1.5, calls=2)
    row = by_short(evaluate(figures(totals, "snapready")))["calls per selected pod"]
    assert (row.figure, row.ok) == ("2.00 / 2.00", False)


def test_no_pods_created_is_not_met_and_its_cpu_not_measured_rather_than_an_error() -> None:
    totals = run(1.5, 2.0)
    totals["snapready", "selected"] = Totals()
    rows = by_short(evaluate(figures(totals, "snapready")))
    assert rows["calls per selected pod"].ok is False
    assert rows["webhook CPU vs floor"].ok is None


def test_a_floor_under_one_cpu_tick_is_not_measured() -> None:
    fig = Figures("snapready", 1.5, 0.0, 2.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0)
    row = by_short(evaluate(fig))["webhook CPU vs floor"]
    assert (row.figure, row.ok) == ("n/a", None)
    assert row.detail == "1.50 / 0.00 ms: too few CPU ticks, create more pods"


def test_without_in_process_figures_there_are_six_targets() -> None:
    rows = evaluate(figures(run(1.5, 2.0), "snapready"))
    assert len(rows) == 6
    assert verdict_line(rows) == "verdict: 6/6 targets met"


def test_table_prints_each_figure_next_to_its_target_and_mark() -> None:
    rows = evaluate(figures(run(3.4, 2.72), "snapready", ADMIT_OK))
    lines = targets_table({"snapready": rows})
    assert lines[0].split() == ["target", "scenario", "measured", "target", "verdict"]
    go_line = next(line for line in lines if "Go controller-runtime" in line)
    assert go_line.startswith("webhook CPU per selected pod / the Go controller-runtime peer's")
    assert go_line.endswith(
        "snapready                    1.25x  < 1x        NOT met  (3.40 / 2.72 ms)"
    )
    assert len(lines) == 1 + 7
    assert all(re.search(r"  (met|NOT met|not measured)( |$)", line) for line in lines[1:])


def test_outside_load_is_other_cores_on_average_and_at_most() -> None:
    quiet = Totals(wall_ms=1000, cpu=Counter({"other": 100.0}))
    busy = Totals(wall_ms=1000, cpu=Counter({"other": 900.0}))
    line = outside_load({("constant", "selected"): quiet, ("snapready", "plain"): busy})
    assert line.endswith("0.50 cores on average, at most 0.90 (snapready, plain pods)")
    assert outside_load({}).endswith("no phase measured")


def test_verdict_lists_not_measured_apart_from_not_met() -> None:
    rows = evaluate(figures(run(3.4, None), "snapready"), {"go-peer": "no Go"})
    assert verdict_line(rows) == (
        "verdict: 4/6 targets met (NOT met: webhook CPU vs floor 3.40x; not measured: webhook CPU "
        "vs Go peer (go-peer skipped: no Go))"
    )


def test_in_process_row_shows_the_worst_figure_and_lists_them_all() -> None:
    admit = (("admit /mutate (new pod)", 58.0, 60.0), ("admit /validate", 61.5, 60.0))
    row = by_short(evaluate(figures(run(1.5, 2.0), "snapready", admit)))["in-process admit"]
    assert (row.figure, row.target, row.ok) == ("61.5 us", "<= 60 us", False)
    assert row.detail == "/validate; all: /mutate (new pod) 58.0, /validate 61.5"


def test_latency_rows_show_the_go_peers_ratio_beside_snapreadys() -> None:
    rows = by_short(evaluate(figures(run(1.5, 2.0), "snapready")))
    # constant 50 ms, Go peer 55 ms, snapready 60 ms (``run``)
    assert rows["CREATE p50"].figure == "1.20x"
    assert rows["CREATE p50"].detail == "Go peer, which patches too: 1.10x"
    assert rows["CREATE p99"].detail == "Go peer, which patches too: 1.10x"
    assert rows["CREATE p50"].ok is True  # the peer's ratio decides nothing


def test_without_a_go_peer_the_latency_rows_have_no_detail() -> None:
    rows = by_short(evaluate(figures(run(1.5, None), "snapready")))
    assert rows["CREATE p50"].detail == ""
    assert rows["CREATE p50"].figure == "1.20x"


def test_a_ratio_to_a_peer_that_did_not_run_is_a_dash_not_nan() -> None:
    assert _ratio_cell(1.5, float("nan"), 6) == "     -"
    assert _ratio_cell(1.5, 3.0, 6) == "  0.50"
