"""design.md "Targets" as ``make bench-cluster`` measures them: one row per target, and the verdict.

Pure (no cluster, no clock): :func:`figures` reads a run's totals, :func:`evaluate` turns one
snapready variant's figures into rows (the figure next to its target, met or NOT met, or not
measured and why), :func:`verdict_line` sums them up in the one line the run ends with. The
baselines are servers of the same run: the constant webhook (the floor: what every webhook pays)
and the Go controller-runtime peer (``bench/peers/go``: only the gVisor check and a spec hash).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from bench.cluster.phases import Totals
from bench.harness import stats

TARGET_FLOOR_RATIO = 2.0
"""Webhook CPU per selected pod <= 2 x the constant webhook's."""
TARGET_GO_RATIO = 1.0
"""Webhook CPU per selected pod below the Go controller-runtime peer's."""
TARGET_P50_RATIO = 1.3
TARGET_P99_RATIO = 1.5
CALLS_TOLERANCE = 0.005
"""Calls per pod are counts over hundreds of pods: 1 +- 0.005 is one call per pod."""


def div(a: float, b: float) -> float:
    """``a / b``; NaN when ``b`` is 0 (a phase too short for a 10 ms CPU tick)."""
    return a / b if b else float("nan")


@dataclass(frozen=True)
class Figures:
    """What the targets read for one snapready variant, all from one run (NaN: no pods)."""

    scenario: str
    cpu_ms: float
    """snapready's webhook CPU ms per selected pod."""
    floor_ms: float | None
    """The constant webhook's (None: not measured)."""
    go_peer_ms: float | None
    """The Go peer's (None: not measured; ``skipped`` in :func:`evaluate` says why)."""
    p50_ratio: float | None
    p99_ratio: float | None
    """Selected-pod CREATE latency percentiles / the constant webhook's (None: no constant)."""
    mutate_per_pod: float
    validate_per_pod: float
    unselected_per_1000: float
    """Webhook calls per 1,000 unselected pods in the policy namespace."""
    plain_per_1000: float
    """... and in the namespace without policies."""
    admit_us: tuple[tuple[str, float, float], ...] = ()
    """In-process ``bench.admit`` figures that have a target: (name, microseconds, target)."""
    go_p50_ratio: float | None = None
    go_p99_ratio: float | None = None
    """The Go peer's CREATE percentiles / the constant webhook's (None: either not measured),
    shown beside snapready's: a webhook that patches makes the API server apply the patch and
    run the mutating admission chain again (reinvocation), which the constant webhook's empty
    answer never does (docs/performance.md, "What the API server does behind a patching
    webhook")."""


@dataclass(frozen=True)
class Target:
    """One target's row: its figure next to its target, and whether it is met."""

    name: str
    short: str
    """How the verdict line names it."""
    figure: str
    """The headline figure (a ratio, a count, microseconds)."""
    detail: str
    """What the figure is made of (e.g. both CPU figures), or why it was not measured."""
    target: str
    ok: bool | None
    """None: not measured."""

    @property
    def mark(self) -> str:
        return "not measured" if self.ok is None else stats.verdict(self.ok)


def figures(
    totals: Mapping[tuple[str, str], Totals],
    scenario: str,
    admit_us: tuple[tuple[str, float, float], ...] = (),
) -> Figures:
    """The figures of ``scenario`` (a snapready variant) against the run's constant webhook and
    Go peer, when they ran."""
    sel = totals[scenario, "selected"]
    base = totals.get(("constant", "selected"))
    go = totals.get(("go-peer", "selected"))

    def calls_per_1000(kind: str) -> float:
        t = totals[scenario, kind]
        return 1000 * t.per_pod(t.calls["mutate"] + t.calls["validate"])

    return Figures(
        scenario=scenario,
        cpu_ms=sel.per_pod(sel.cpu["webhook"]),
        floor_ms=base.per_pod(base.cpu["webhook"]) if base else None,
        go_peer_ms=go.per_pod(go.cpu["webhook"]) if go else None,
        p50_ratio=div(sel.pct(50), base.pct(50)) if base else None,
        p99_ratio=div(sel.pct(99), base.pct(99)) if base else None,
        mutate_per_pod=sel.per_pod(sel.calls["mutate"]),
        validate_per_pod=sel.per_pod(sel.calls["validate"]),
        unselected_per_1000=calls_per_1000("unselected"),
        plain_per_1000=calls_per_1000("plain"),
        admit_us=admit_us,
        go_p50_ratio=div(go.pct(50), base.pct(50)) if base and go else None,
        go_p99_ratio=div(go.pct(99), base.pct(99)) if base and go else None,
    )


def evaluate(fig: Figures, skipped: Mapping[str, str] | None = None) -> list[Target]:
    """The rows of design.md's targets for one snapready variant (``skipped``: why a baseline
    server did not run, by scenario)."""
    skipped = skipped or {}
    rows = [
        Target(
            "webhook calls per 1,000 unselected pods (policy ns / no-policy ns)",
            "calls per 1,000 unselected pods",
            f"{fig.unselected_per_1000:.0f} / {fig.plain_per_1000:.0f}",
            "",
            "= 0 / = 0",
            fig.unselected_per_1000 <= 0 and fig.plain_per_1000 <= 0,
        ),
        Target(
            "mutating / validating calls per selected pod",
            "calls per selected pod",
            f"{fig.mutate_per_pod:.2f} / {fig.validate_per_pod:.2f}",
            "",
            "= 1 / = 1",
            abs(fig.mutate_per_pod - 1) < CALLS_TOLERANCE
            and abs(fig.validate_per_pod - 1) < CALLS_TOLERANCE,
        ),
        cpu_row(
            "webhook CPU per selected pod / the constant webhook's (the floor)",
            "webhook CPU vs floor",
            fig.cpu_ms,
            fig.floor_ms,
            base="constant",
            target=f"<= {TARGET_FLOOR_RATIO:g}x",
            ok=lambda ratio: ratio <= TARGET_FLOOR_RATIO,
            skipped=skipped,
        ),
        cpu_row(
            "webhook CPU per selected pod / the Go controller-runtime peer's",
            "webhook CPU vs Go peer",
            fig.cpu_ms,
            fig.go_peer_ms,
            base="go-peer",
            target=f"< {TARGET_GO_RATIO:g}x",
            ok=lambda ratio: ratio < TARGET_GO_RATIO,
            skipped=skipped,
        ),
        ratio_row("CREATE p50", fig.p50_ratio, TARGET_P50_RATIO, fig.go_p50_ratio),
        ratio_row("CREATE p99", fig.p99_ratio, TARGET_P99_RATIO, fig.go_p99_ratio),
    ]
    if fig.admit_us:
        rows.append(admit_row(fig.admit_us))
    return rows


def admit_row(admit_us: tuple[tuple[str, float, float], ...]) -> Target:
    """The in-process target: every ``bench.admit`` figure that has one; the worst is shown."""
    worst = max(micros - target for _, micros, target in admit_us)
    name, micros, target = next(a for a in admit_us if a[1] - a[2] == worst)
    each = ", ".join(f"{n.removeprefix('admit ')} {m:.1f}" for n, m, _ in admit_us)
    return Target(
        "in-process admit per review, us (bench.admit; the worst shown)",
        "in-process admit",
        f"{micros:.1f} us",
        f"{name.removeprefix('admit ')}; all: {each}",
        f"<= {target:g} us",
        worst <= 0,
    )


def cpu_row(
    name: str,
    short: str,
    cpu_ms: float,
    base_ms: float | None,
    *,
    base: str,
    target: str,
    ok: Callable[[float], bool],
    skipped: Mapping[str, str],
) -> Target:
    """A row comparing snapready's webhook CPU with ``base``'s (a ratio, both figures shown)."""
    if base_ms is None:
        why = f"{base} skipped: {skipped[base]}" if base in skipped else f"{base} did not run"
        return Target(name, short, "-", why, target, None)
    ratio = div(cpu_ms, base_ms)
    figures = f"{cpu_ms:.2f} / {base_ms:.2f} ms"
    if math.isnan(ratio):  # no pods, or a phase shorter than one 10 ms CPU tick
        return Target(name, short, "n/a", f"{figures}: too few CPU ticks, create more pods",
                      target, None)  # fmt: skip
    return Target(name, short, f"{ratio:.2f}x", figures, target, ok(ratio))


def ratio_row(
    what: str, ratio: float | None, limit: float, go_ratio: float | None = None
) -> Target:
    """A selected-pod latency ratio to the constant webhook's; with ``go_ratio``, the Go peer's
    same ratio as the detail (a patching webhook's reference; it decides nothing)."""
    name = f"selected-pod {what} / the constant webhook's"
    if ratio is None:
        return Target(name, what, "-", "constant not measured", f"<= {limit:g}x", None)
    detail = "" if go_ratio is None else f"Go peer, which patches too: {go_ratio:.2f}x"
    return Target(name, what, f"{ratio:.2f}x", detail, f"<= {limit:g}x", ratio <= limit)


def verdict_line(rows: Sequence[Target]) -> str:
    """``verdict: 5/7 targets met (NOT met: webhook CPU vs Go peer 1.12x; ...)``: the shared
    format of every benchmark's last line (``bench.harness.stats.verdict_line``)."""
    return stats.verdict_line(
        [(row.short, row.figure if row.ok is not None else row.detail, row.ok) for row in rows]
    )


def targets_table(rows_by_scenario: Mapping[str, Sequence[Target]]) -> list[str]:
    """The targets table: each figure next to its target, per snapready variant."""
    lines = [f"{'target':<68}{'scenario':<18}{'measured':>16}  {'target':<12}verdict"]
    for scenario, rows in rows_by_scenario.items():
        for row in rows:
            detail = f"  ({row.detail})" if row.detail else ""
            lines.append(
                f"{row.name:<68}{scenario:<18}{row.figure:>16}  {row.target:<12}{row.mark}{detail}"
            )
    return lines
