"""The tables ``make bench-cluster`` prints: per kind, the ratios, the targets, where CPU goes.

Every webhook is compared with the constant webhook (the floor) and the Go controller-runtime
peer of the same run; the targets of design.md "Targets" (``bench.cluster.targets``) are printed
with each figure next to its target, met or NOT met, and :func:`report` returns the verdict line
the run ends with. The in-process figures come from ``bench.admit`` in this process once the
cluster is idle.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Mapping

from bench.admit import CACHE_FLUSH_BYTES, Timing, admit_timings, pod_micros, whole_pod
from bench.cluster.objects import KINDS
from bench.cluster.phases import Bench, Totals
from bench.cluster.targets import div, evaluate, figures, targets_table, verdict_line

SPEC_HASH = "snapready.io/spec-hash"
PEERS = ("go-peer", "kopf-peer")


def report(
    totals: dict[tuple[str, str], Totals],
    scenarios: list[str],
    *,
    args: argparse.Namespace,
    versions: str,
    bench: Bench,
    skipped: Mapping[str, str] | None = None,
) -> str:
    """Print the per-scenario tables, the ratios and the targets; return the verdict line."""
    skipped = skipped or {}
    print(
        f"\nsnapready bench-cluster: {versions} on 127.0.0.1, {os.cpu_count()} CPUs shared by "
        f"everything (API server, etcd, controller-manager, webhook, load generator);\n"
        f"{args.pods} pods x {args.rounds} rounds per scenario and pod kind, {args.concurrency} "
        f"concurrent creates, scenarios alternating (order reversed every other round); "
        f"snapready scope.mode {args.scope or 'from the chart'}."
    )
    print("webhook configurations in force (matchConditions per webhook):")
    for scenario in scenarios:
        print(f"  {scenario:<18}{bench.scope_seen.get(scenario, '?')}")
    for name, why in skipped.items():
        print(f"  {name:<18}skipped: {why}")
    for kind, namespace, description in KINDS:
        print_kind(totals, scenarios, kind, f"{description} (namespace {namespace})")
    print(
        "\n(CPU over each measured phase: each process's CPU clock (clock_gettime, ns, every "
        "thread), the event loop's from its schedstat; 'client' is this script's load "
        "generator; 'other cores': CPU used meanwhile by processes outside the bench (10 ms "
        "ticks of /proc/stat), e.g. other test runs: noise.)"
    )
    print(outside_load(totals))
    errors = [(key, e) for key, t in totals.items() for e in t.errors]
    if errors:
        print(f"\n{len(errors)} failed creates, first ones:")
        for (scenario, kind), error in errors[:5]:
            print(f"  {scenario}/{kind}: {error}")
    print_ratios(totals, scenarios)

    ours = [s for s in scenarios if s.startswith("snapready")]
    rounds, number = (2, 300) if args.quick else (5, 2000)  # --quick: a smoke run
    timings = {s: admit_timings(s == "snapready+inject", rounds, number) for s in ours}
    rows = {s: evaluate(figures(totals, s, with_targets(timings[s])), skipped) for s in ours}
    judged = "snapready" if "snapready" in ours else ours[0]
    print(
        f'\ntargets (design.md "Targets"; the verdict counts {judged}'
        + (", snapready+inject is shown beside it):" if len(ours) > 1 else "):")
    )
    print("\n".join(targets_table(rows)))
    report_where(totals, ours, timings, pods=100 if args.quick else 500)
    report_rounds(totals, [s for s in scenarios if s not in ("none", "constant")], bench)
    return verdict_line(rows[judged])


def with_targets(timings: list[Timing]) -> tuple[tuple[str, float, float], ...]:
    """(name, microseconds, target) of the in-process figures that have a target."""
    return tuple((t.name, t.micros, t.target) for t in timings if t.target is not None)


def print_kind(
    totals: dict[tuple[str, str], Totals], scenarios: list[str], kind: str, description: str
) -> None:
    """One pod kind's table: latency, CPU per pod by process, calls per pod, outside load."""
    print(f"\n{kind} pods: {description}")
    print(
        f"{'':<18}{'':>5}{'':>4}{'latency ms':>25}  {'CPU ms per pod':<38}"
        f"{'calls per pod':>17}{'other':>7}"
    )
    print(
        f"{'scenario':<18}{'pods':>5}{'err':>4}{'p50':>8}{'p90':>8}{'p99':>9}  "
        f"{'webhook':>8}{'apisrv':>7}{'etcd':>6}{'kcm':>6}{'client':>7}"
        f"{'mutate':>11}{'validate':>9}{'cores':>7}"
    )
    for scenario in scenarios:
        t = totals[scenario, kind]
        hook = scenario != "none"
        webhook = f"{t.per_pod(t.cpu['webhook']):.2f}" if hook else "-"
        mutate = f"{t.per_pod(t.calls['mutate']):.2f}" if hook else "-"
        validate = f"{t.per_pod(t.calls['validate']):.2f}" if hook else "-"
        other = t.cpu["other"] / t.wall_ms if t.wall_ms else float("nan")
        print(
            f"{scenario:<18}{t.pods:>5}{len(t.errors):>4}{t.pct(50):>8.1f}{t.pct(90):>8.1f}"
            f"{t.pct(99):>9.1f}  {webhook:>8}{t.per_pod(t.cpu['apiserver']):>7.2f}"
            f"{t.per_pod(t.cpu['etcd']):>6.2f}{t.per_pod(t.cpu['kcm']):>6.2f}"
            f"{t.per_pod(t.cpu['client']):>7.2f}{mutate:>11}{validate:>9}{other:>7.2f}"
        )


def outside_load(totals: Mapping[tuple[str, str], Totals]) -> str:
    """One line: the cores that processes outside the bench used during the measured phases."""
    wall = sum(t.wall_ms for t in totals.values())
    if not wall:
        return "load outside the bench during the measured phases: no phase measured"
    (scenario, kind), worst = max(
        totals.items(), key=lambda item: item[1].cpu["other"] / (item[1].wall_ms or 1)
    )
    peak = worst.cpu["other"] / (worst.wall_ms or 1)
    average = sum(t.cpu["other"] for t in totals.values()) / wall
    return (
        f"load outside the bench during the measured phases ('other cores'): {average:.2f} "
        f"cores on average, at most {peak:.2f} ({scenario}, {kind} pods)"
    )


def print_ratios(totals: dict[tuple[str, str], Totals], scenarios: list[str]) -> None:
    """Selected pods: every webhook's figures / the constant webhook's and the Go peer's."""
    base = totals.get(("constant", "selected"))
    go = totals.get(("go-peer", "selected"))
    hooks = [s for s in scenarios if s not in ("none", "constant")]
    if base is None or not hooks:
        return
    floor = base.per_pod(base.cpu["webhook"])
    go_ms = go.per_pod(go.cpu["webhook"]) if go else float("nan")
    print("\nratios, selected pods (webhook CPU: also ms per pod; the floor is the constant's):")
    print(
        f"{'scenario':<18}{'p50':>8}{'p99':>8}{'webhook CPU':>13}{'/ floor':>9}{'/ Go peer':>11}"
        f"{'apiserver CPU':>15}"
    )
    for scenario in ["constant", *hooks]:
        t = totals[scenario, "selected"]
        cpu = t.per_pod(t.cpu["webhook"])
        apiserver = div(t.per_pod(t.cpu["apiserver"]), base.per_pod(base.cpu["apiserver"]))
        print(
            f"{scenario:<18}{div(t.pct(50), base.pct(50)):>8.2f}"
            f"{div(t.pct(99), base.pct(99)):>8.2f}{cpu:>10.2f} ms{div(cpu, floor):>9.2f}"
            f"{_ratio_cell(cpu, go_ms, 11)}{apiserver:>15.2f}"
        )


def _ratio_cell(value: float, base: float, width: int) -> str:
    """``value / base`` right-aligned in ``width``, or ``-`` when ``base`` was not measured."""
    ratio = div(value, base)
    return f"{'-':>{width}}" if math.isnan(ratio) else f"{ratio:>{width}.2f}"


def report_where(
    totals: dict[tuple[str, str], Totals],
    ours: list[str],
    timings: dict[str, list[Timing]],
    *,
    pods: int,
) -> None:
    """Where a selected pod's webhook CPU goes: what any webhook pays (the constant server), and
    snapready's own work measured in this process with warm and with flushed CPU caches."""
    print("\nwhere a selected pod's webhook CPU goes (ms per pod):")
    base = totals.get(("constant", "selected"))
    floor = base.per_pod(base.cpu["webhook"]) if base is not None else float("nan")
    for scenario in ours:
        t = totals[scenario, "selected"]
        measured = timings[scenario]
        hot = pod_micros(measured, later=True) / 1000
        _, cold = whole_pod(inject=scenario == "snapready+inject", pods=pods)
        loop = t.per_pod(t.cpu["webhook loop"])
        print(
            f"  {scenario:<18}measured {t.per_pod(t.cpu['webhook']):.2f} = constant server "
            f"{floor:.2f} (TLS, HTTP, event loop: any webhook) + snapready's own "
            f"{t.per_pod(t.cpu['webhook']) - floor:.2f}; by thread: event loop {loop:.2f}, other "
            f"threads (watches, controllers, metrics) {t.per_pod(t.cpu['webhook']) - loop:.2f}; "
            f"that work in-process (a later replica of one template, as every selected pod "
            f"here is): {hot:.2f} with warm caches, {cold / 1000:.2f} after "
            f"{CACHE_FLUSH_BYTES >> 20} MiB were read and written (other processes between two "
            "calls)"
        )


def report_rounds(totals: dict[tuple[str, str], Totals], hooks: list[str], bench: Bench) -> None:
    """Mutating-webhook rounds per selected pod, and what the admitted probe pod carries."""
    print("\nmutating-webhook rounds per selected pod (the server's mutate counter / pods):")
    for scenario in hooks:
        t = totals[scenario, "selected"]
        rounds_per_pod = t.per_pod(t.calls["mutate"])
        probe = bench.probe_log.get(scenario, {})
        spec = probe.get("spec", {})
        init = [
            f"{c['name']} (mounts: {', '.join(m['name'] for m in c.get('volumeMounts', []))})"
            for c in spec.get("initContainers", [])
        ]
        stamped = probe.get("metadata", {}).get("annotations", {}).get(SPEC_HASH)
        hashed = f"set ({stamped[:20]}...)" if stamped else "MISSING"
        note = "reinvoked: the API server called /mutate twice" if rounds_per_pod > 1.5 else "once"
        print(
            f"  {scenario:<18}{rounds_per_pod:.2f} ({note}); admitted pod: spec-hash "
            f"{hashed}, init containers: {', '.join(init) or 'none'}"
        )
