"""The tables ``make bench-cluster`` prints: per kind, the ratios, the targets, where CPU goes.

Targets of design.md "Targets" (issue 16), each with the measured value and met or NOT met; the
in-process figures come from ``bench.admit`` in this process once the cluster is idle.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from bench.admit import CACHE_FLUSH_BYTES, admit_timings, whole_pod
from bench.cluster.objects import KINDS
from bench.cluster.phases import Bench, Totals
from bench.harness.stats import verdict

SPEC_HASH = "snapready.io/spec-hash"
TARGET_WEBHOOK_CPU_MS = 1.2
TARGET_APISERVER_RATIO = 1.3
TARGET_P50_RATIO = 1.3
TARGET_P99_RATIO = 1.5
TARGET_UNSELECTED_PER_1000 = 0.0


def report(
    totals: dict[tuple[str, str], Totals],
    scenarios: list[str],
    *,
    args: argparse.Namespace,
    versions: str,
    bench: Bench,
) -> None:
    """Print the per-scenario tables, the ratios and the targets."""
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
    for kind, namespace, description in KINDS:
        print(f"\n{kind} pods: {description} (namespace {namespace})")
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
    print(
        "\n(CPU from /proc/<pid>/stat utime+stime over each measured phase, 10 ms ticks; 'client' "
        "is this script's load generator; 'other cores': CPU used meanwhile by processes outside "
        "the bench, e.g. other test runs: noise.)"
    )
    errors = [(key, e) for key, t in totals.items() for e in t.errors]
    if errors:
        print(f"\n{len(errors)} failed creates, first ones:")
        for (scenario, kind), error in errors[:5]:
            print(f"  {scenario}/{kind}: {error}")

    base = totals.get(("constant", "selected"))
    ours = [s for s in scenarios if s.startswith("snapready")]
    if base is not None and ours:
        print("\nratios snapready/constant, selected pods:")
        print(f"{'scenario':<18}{'p50':>8}{'p99':>8}{'webhook CPU':>13}{'apiserver CPU':>15}")
        for scenario in ours:
            t = totals[scenario, "selected"]
            print(
                f"{scenario:<18}{t.pct(50) / base.pct(50):>8.2f}{t.pct(99) / base.pct(99):>8.2f}"
                f"{t.per_pod(t.cpu['webhook']) / base.per_pod(base.cpu['webhook']):>13.2f}"
                f"{t.per_pod(t.cpu['apiserver']) / base.per_pod(base.cpu['apiserver']):>15.2f}"
            )

    report_targets(totals, ours, base, bench)


def report_targets(
    totals: dict[tuple[str, str], Totals], ours: list[str], base: Totals | None, bench: Bench
) -> None:
    """Print each target of design.md with the measured value and a verdict; then the
    mutating-webhook rounds per selected pod."""
    print('\ntargets (design.md "Targets", issue 16):')
    print(f"{'target':<56}{'scenario':<18}{'measured':>9}  {'target':<9}verdict")

    def row(name: str, scenario: str, measured: float, target: str, ok: bool) -> None:
        print(f"{name:<56}{scenario:<18}{measured:>9.2f}  {target:<9}{verdict(ok)}")

    for scenario in ours:
        t = totals[scenario, "selected"]
        mutate, validate = t.per_pod(t.calls["mutate"]), t.per_pod(t.calls["validate"])
        row("mutating calls per selected pod", scenario, mutate, "= 1", abs(mutate - 1) < 0.005)
        row("validating calls per selected pod", scenario, validate, "= 1",
            abs(validate - 1) < 0.005)  # fmt: skip
        cpu = t.per_pod(t.cpu["webhook"])
        row(
            "webhook CPU ms per selected pod", scenario, cpu, "<= 1.2", cpu <= TARGET_WEBHOOK_CPU_MS
        )
        if base is not None:
            ratio = t.per_pod(t.cpu["apiserver"]) / base.per_pod(base.cpu["apiserver"])
            row("apiserver CPU per selected pod / constant's", scenario, ratio, "<= 1.3",
                ratio <= TARGET_APISERVER_RATIO)  # fmt: skip
            p50, p99 = t.pct(50) / base.pct(50), t.pct(99) / base.pct(99)
            row("selected-pod CREATE p50 / constant's", scenario, p50, "<= 1.3",
                p50 <= TARGET_P50_RATIO)  # fmt: skip
            row("selected-pod CREATE p99 / constant's", scenario, p99, "<= 1.5",
                p99 <= TARGET_P99_RATIO)  # fmt: skip
        for kind in ("unselected", "plain"):
            u = totals[scenario, kind]
            per_1000 = 1000 * u.per_pod(u.calls["mutate"] + u.calls["validate"])
            row(f"webhook calls per 1,000 {kind} pods", scenario, per_1000, "= 0",
                per_1000 <= TARGET_UNSELECTED_PER_1000)  # fmt: skip

    in_process: dict[str, list[Any]] = {}
    for scenario in ours:
        # In this process, after the measured phases (the cluster is idle): bench.admit.
        in_process[scenario] = admit_timings(inject=scenario == "snapready+inject")
        for timing in in_process[scenario]:
            if timing.target is not None:
                row(f"in-process {timing.name}, us", scenario, timing.micros,
                    f"<= {timing.target:.0f}", timing.micros <= timing.target)  # fmt: skip
    report_where(totals, ours, base, in_process)

    print("\nmutating-webhook rounds per selected pod (snapready's mutate counter / pods created):")
    for scenario in ours:
        t = totals[scenario, "selected"]
        rounds_per_pod = t.per_pod(t.calls["mutate"])
        probe = bench.probe_log.get(scenario, {})
        spec = probe.get("spec", {})
        init = [
            f"{c['name']} (mounts: {', '.join(m['name'] for m in c.get('volumeMounts', []))})"
            for c in spec.get("initContainers", [])
        ]
        hashed = SPEC_HASH in probe.get("metadata", {}).get("annotations", {})
        note = "reinvoked: the API server called /mutate twice" if rounds_per_pod > 1.5 else "once"
        print(
            f"  {scenario:<18}{rounds_per_pod:.2f} ({note}); admitted pod: spec-hash "
            f"{'set' if hashed else 'MISSING'}, init containers: {', '.join(init) or 'none'}"
        )


def report_where(
    totals: dict[tuple[str, str], Totals],
    ours: list[str],
    base: Totals | None,
    in_process: dict[str, list[Any]],
) -> None:
    """Where a selected pod's webhook CPU goes: what any webhook pays (the constant server), and
    snapready's own work measured in this process with warm and with flushed CPU caches."""
    print("\nwhere a selected pod's webhook CPU goes (ms per pod):")
    floor = base.per_pod(base.cpu["webhook"]) if base is not None else float("nan")
    for scenario in ours:
        t = totals[scenario, "selected"]
        timings = in_process[scenario]
        hot = (2 * timings[0].micros + timings[1].micros + timings[2].micros) / 1000
        _, cold = whole_pod(inject=scenario == "snapready+inject", pods=500)
        print(
            f"  {scenario:<18}measured {t.per_pod(t.cpu['webhook']):.2f} = constant server "
            f"{floor:.2f} (TLS, HTTP, event loop: any webhook) + snapready's own "
            f"{t.per_pod(t.cpu['webhook']) - floor:.2f}; that work in-process: {hot:.2f} with "
            f"warm caches, {cold / 1000:.2f} after {CACHE_FLUSH_BYTES >> 20} MiB were read and "
            "written (other processes between two calls)"
        )
