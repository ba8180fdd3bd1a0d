"""The tables ``make bench-scale`` prints (Markdown, as docs/performance.md quotes them).

Per run of ``snapready serve``: ready time, RSS after sync and after settling, peak RSS, CPU; the
lists' times; the in-handler and client latencies of both servers and their ratios; the targets
of design.md ("Targets"), each met or NOT met; the RSS each kind of object added (the stages).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from bench.harness.proc import MIB
from bench.harness.stats import markdown_table, percentile, verdict, verdict_line
from bench.scale.latency import Busy, Latency, describe_answer
from bench.scale.serve import Figures
from bench.scale.workload import Sizes, namespace_name

TARGET_RSS_SCALE_MIB = 250.0
TARGET_RSS_EMPTY_MIB = 150.0
TARGET_SYNC_S = 15.0
TARGET_P99_RATIO = 1.5
TARGET_P50_RATIO = 1.3
"""In-handler p99 and p50 at scale / on the empty cluster (design.md "Targets")."""


@dataclass
class Outcome:
    """Everything the report prints."""

    sizes: Sizes
    create_s: dict[str, float]
    empty: Figures
    scale: Figures
    stages: list[tuple[str, Figures]]
    """(kind just added, figures) after the nodes and after the pods."""
    latency: dict[str, Latency]
    requests: int
    rounds: int
    versions: str
    busy: Busy | None = None
    """The rounds measured while the leader's passes ran (None: not measured)."""
    quick: bool = False


def figures_table(rows: Sequence[tuple[str, Figures]]) -> str:
    """One row per ``snapready serve`` run."""
    header = ["run", "ready s", "RSS at sync MiB", "peak RSS MiB", "RSS +settle MiB",
              "CPU to sync s", "CPU while settling s"]  # fmt: skip
    return markdown_table(header, [
        [label, f"{f.ready_s:.1f}", f"{f.rss_sync_mib:.0f}",
         f"{max(f.hwm_sync_mib, f.hwm_settled_mib):.0f}", f"{f.rss_settled_mib:.0f}",
         f"{f.cpu_sync_s:.1f}", f"{f.cpu_settle_s:.1f}"]
        for label, f in rows
    ])  # fmt: skip


def listed_line(figures: Figures) -> str:
    """When each cache's list was in, in that order."""
    order = sorted(figures.listed.items(), key=lambda item: item[1][0])
    return ", ".join(f"{name} {count} in {at:.1f} s" for name, (at, count) in order)


def report(outcome: Outcome) -> bool:
    """Print the tables; True when every RSS target is met."""
    sizes, empty, scale = outcome.sizes, outcome.empty, outcome.scale
    total = sum(outcome.create_s.values())
    print(f"\n{outcome.versions}")
    print(
        "\ncreated (no webhook registered): "
        + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in outcome.create_s.items())
        + f"; total {total:.0f} s"
    )
    print("\nsnapready serve --source kube (static scope, leader election on):\n")
    stages = [
        (
            f"stage: {sizes.namespaces} policies + {sizes.nodes} nodes"
            if kind == "nodes"
            else f"stage: + {sizes.pods} pods",
            figures,
        )
        for kind, figures in outcome.stages
    ]
    rows = [
        ("empty cluster (1 namespace + policy)", empty),
        *stages,
        (f"scale: + {sizes.snapshots} PodSnapshots (all {sizes.namespaces} namespaces)", scale),
    ]
    print(figures_table(rows))
    for label, figures in rows:
        print(f"  lists of {label}: {listed_line(figures)}")
    print(
        f"  RSS after the latency rounds: empty {empty.rss_after_load_mib:.0f} MiB, scale "
        f"{scale.rss_after_load_mib:.0f} MiB"
    )
    p50_ratio, p99_ratio = print_latency(outcome)
    rss_scale = max(scale.rss_sync_mib, scale.rss_settled_mib)
    rss_empty = max(empty.rss_sync_mib, empty.rss_settled_mib)
    checks = [
        (
            f"RSS at scale <= {TARGET_RSS_SCALE_MIB:.0f} MiB (after sync / +settle; peak)",
            f"{scale.rss_sync_mib:.0f} / {scale.rss_settled_mib:.0f}; "
            f"peak {scale.hwm_settled_mib:.0f}",
            rss_scale <= TARGET_RSS_SCALE_MIB,
        ),
        (
            f"RSS on the empty cluster <= {TARGET_RSS_EMPTY_MIB:.0f} MiB",
            f"{empty.rss_sync_mib:.0f} / {empty.rss_settled_mib:.0f}; "
            f"peak {empty.hwm_settled_mib:.0f}",
            rss_empty <= TARGET_RSS_EMPTY_MIB,
        ),
        (
            f"caches synced <= {TARGET_SYNC_S:.0f} s after start",
            f"{scale.ready_s:.1f} s",
            scale.ready_s <= TARGET_SYNC_S,
        ),
        (
            f"in-handler p99 scale / empty <= {TARGET_P99_RATIO}",
            f"{p99_ratio:.2f}",
            p99_ratio <= TARGET_P99_RATIO,
        ),
        (
            f"in-handler p50 scale / empty <= {TARGET_P50_RATIO}",
            f"{p50_ratio:.2f}",
            p50_ratio <= TARGET_P50_RATIO,
        ),
    ]
    if outcome.busy is not None:
        busy = outcome.busy.ratio_p99
        checks.append((
            f"in-handler p99 while the leader's passes run / empty <= {TARGET_P99_RATIO}",
            f"{busy:.2f}",
            busy <= TARGET_P99_RATIO,
        ))  # fmt: skip
    rows_ = [(name, measured, verdict(ok)) for name, measured, ok in checks]
    print("\n" + markdown_table(["target (design.md)", "measured", ""], rows_))
    if outcome.stages:
        print_costs(outcome)
    if outcome.quick:
        print("\n(--quick: a smoke run at a tenth of the size; the targets are for the defaults)")
    print("\n" + verdict_line(checks))
    return checks[0][2] and checks[1][2]


def print_latency(outcome: Outcome) -> tuple[float, float]:
    """The latency table and the ratios; returns the in-handler p50 and p99 ratios scale /
    empty."""
    lat_e, lat_s = outcome.latency["empty"], outcome.latency["scale"]
    print(
        f"\nPOST /mutate of review 03 in {namespace_name(0)} ({outcome.requests} per server, "
        f"{outcome.rounds} alternating rounds, one keep-alive connection; each request the "
        f"first pod of a new template, so nothing is remembered: bench.scale.latency):\n"
    )
    header = ["server", "in-handler p50 / p99 / max ms", "client p50 / p99 ms",
              "in-handler p99 per round ms"]  # fmt: skip
    rows = [
        [label,
         f"{percentile(lat.handler, 50):.2f} / {percentile(lat.handler, 99):.2f} / "
         f"{max(lat.handler):.1f}",
         f"{percentile(lat.client, 50):.2f} / {percentile(lat.client, 99):.2f}",
         " / ".join(f"{v:.2f}" for v in lat.round_p99)]
        for label, lat in (("empty", lat_e), ("scale", lat_s))
    ]  # fmt: skip
    print(markdown_table(header, rows))
    p50_ratio = percentile(lat_s.handler, 50) / percentile(lat_e.handler, 50)
    p99_ratio = percentile(lat_s.handler, 99) / percentile(lat_e.handler, 99)
    client_ratio = percentile(lat_s.client, 99) / percentile(lat_e.client, 99)
    per_round = sorted(s / e for s, e in zip(lat_s.round_p99, lat_e.round_p99, strict=True))
    print(
        f"  ratios scale / empty: in-handler p50 {p50_ratio:.2f}, p99 {p99_ratio:.2f}; "
        f"client p99 {client_ratio:.2f}; in-handler p99 per round "
        f"{per_round[0]:.2f}-{per_round[-1]:.2f} (median {percentile(per_round, 50):.2f})"
    )
    print(f"  answers: empty {describe_answer(lat_e.answer)}")
    print(f"           scale {describe_answer(lat_s.answer)}")
    busy = outcome.busy
    if busy is not None:
        print(
            f"  while the leader's passes run ({busy.what}): in-handler p50 / p99 / max "
            f"{percentile(busy.handler, 50):.2f} / {percentile(busy.handler, 99):.2f} / "
            f"{max(busy.handler):.1f} ms against the empty cluster's "
            f"{percentile(busy.empty, 50):.2f} / {percentile(busy.empty, 99):.2f} ms in the same "
            f"rounds: p99 ratio {busy.ratio_p99:.2f}; {busy.passes}"
        )
    return p50_ratio, p99_ratio


def print_costs(outcome: Outcome) -> None:
    """RSS each kind added, from the stages (after sync; peak in brackets)."""
    chain = [("empty", outcome.empty), *outcome.stages, ("snapshots", outcome.scale)]
    counts = {
        "nodes": outcome.sizes.nodes,
        "pods": outcome.sizes.pods,
        "snapshots": outcome.sizes.snapshots,
    }
    print("\nRSS added per kind (stage after minus stage before; RSS after sync, peak RSS):")
    for (_, before), (kind, after) in itertools.pairwise(chain):
        n = counts[kind]
        rss = after.rss_sync_mib - before.rss_sync_mib
        hwm = after.hwm_sync_mib - before.hwm_sync_mib
        per = f"{rss * MIB / n:,.0f} B/object (peak {hwm * MIB / n:,.0f} B)" if n else ""
        print(f"  + {kind}: {rss:+.0f} MiB RSS, {hwm:+.0f} MiB peak; {per}")
