"""``python -m bench.cluster``: flags, the set-up, the alternating rounds, the report, the clean-up.

What it measures and against which baselines: ``bench/cluster/__init__.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.cluster.objects import pod_bodies, set_up_cluster
from bench.cluster.phases import Bench, run_bench
from bench.cluster.profile import profile_apiserver, profile_phase
from bench.cluster.report import report
from bench.cluster.webhooks import live_conditions, register, start_servers
from bench.harness import results
from bench.harness.api import Api
from bench.harness.peers import (
    PeerUnavailable,
    go_peer_binary,
    go_peer_version,
    kopf_unavailable,
    kopf_version,
)
from bench.harness.plane import assets, run_in_folder, start_plane, versions
from bench.harness.profile import summarise_profile
from bench.harness.servers import certificates, stop_servers


@dataclass
class Peers:
    """What the run knows of the peers before it starts: the Go peer's binary and version, and
    why a peer is skipped."""

    go_binary: Path | None = None
    go_version: str = ""
    skipped: dict[str, str] = field(default_factory=dict)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.cluster",
        description="Pod CREATE latency and webhook CPU through a real kube-apiserver: none vs "
        "a constant webhook vs Go (controller-runtime) and kopf peers vs snapready (alternating "
        "rounds), each figure next to its target, ending with a one-line verdict. See "
        "bench/cluster/__init__.py.",
    )
    parser.add_argument("--pods", type=int, default=200, help="pods per kind, scenario and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 20 pods x 1 round, short in-process runs"
    )
    parser.add_argument(
        "--injection",
        choices=["both", "chart", "on"],
        default="both",
        help="snapready with the chart's defaults (injectHelpers=false), with injection on, or "
        "both (default)",
    )
    parser.add_argument(
        "--peers",
        choices=["all", "go", "kopf", "none"],
        default="all",
        help="peer webhooks doing only the gVisor check and a spec hash: the Go "
        "controller-runtime one (built once with Go) and the kopf one; all (default) or none",
    )
    parser.add_argument("--scope", choices=["static", "dynamic"],
                        help="override the chart's scope.mode for snapready")  # fmt: skip
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="after the rounds, sample each snapready variant with py-spy during one unmeasured "
        "phase of selected pods, then take the API server's CPU profile behind each webhook "
        "(the control plane runs with --profiling); raw profiles and summaries in DIR",
    )
    parser.add_argument(
        "--profile-pods",
        type=int,
        default=2000,
        help="selected pods of each py-spy phase of --profile (each API-server profile runs "
        "10 s, however many pods that takes)",
    )
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="work in DIR and keep it (control plane and server logs)")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=1800, help="give up after SECONDS")
    results.add_flag(parser)
    args = parser.parse_args()
    if args.profile is not None and args.profile.exists() and not args.profile.is_dir():
        parser.error(f"--profile: {args.profile} exists and is not a directory")
    if args.quick:
        args.pods, args.rounds = 20, 1
    return args


def main() -> int:
    """Parse flags, set everything up, run the scenarios, print the report, stop everything."""
    args = parse_args()
    scenarios = ["none", "constant"]
    peers = Peers()
    if args.peers in ("all", "go"):
        print("the Go peer: building or reusing it (scripts/peers.sh)", flush=True)
        try:
            peers.go_binary = go_peer_binary(echo=True)
            peers.go_version = go_peer_version(peers.go_binary)
            scenarios.append("go-peer")
        except PeerUnavailable as error:
            peers.skipped["go-peer"] = str(error)
    if args.peers in ("all", "kopf"):
        why = kopf_unavailable()
        if why:
            peers.skipped["kopf-peer"] = why
        else:
            scenarios.append("kopf-peer")
    for name, why in peers.skipped.items():
        print(f"{name} skipped: {why}", flush=True)
    scenarios += {"both": ["snapready", "snapready+inject"], "chart": ["snapready"],
                  "on": ["snapready+inject"]}[args.injection]  # fmt: skip
    with results.recorded("cluster", args.docs):
        return run_in_folder(
            "bench-cluster", args.keep, lambda tmp: bench_in(tmp, args, scenarios, peers)
        )


def bench_in(tmp: Path, args: argparse.Namespace, scenarios: list[str], peers: Peers) -> int:
    """The whole run inside ``tmp``; every process is stopped by pid before returning."""
    began = time.monotonic()
    binaries = assets(tmp)
    print(f"starting the control plane ({binaries})", flush=True)
    plane = start_plane(binaries, tmp, "controlplane", profiling=args.profile is not None)
    stop = threading.Event()
    api = Api(plane, args.concurrency + 2)
    bench = Bench(plane, api, {}, pod_bodies(), args.concurrency, began + args.timeout, stop)
    verdict = ""
    try:
        print(f"[{time.monotonic() - began:.0f} s] control plane ready; setting up", flush=True)
        set_up_cluster(api)
        certs = certificates(tmp / "certs")
        bench.hooks = start_servers(
            plane, api, tmp, scenarios=scenarios, certs=certs, scope_mode=args.scope,
            go_peer=peers.go_binary,
        )  # fmt: skip
        bench.conditions = live_conditions(api)
        ran = versions(plane, binaries)
        described = (
            f"snapready tree {ran.tree}, kube-apiserver {ran.apiserver} + "
            f"{ran.etcd.replace('Version: ', '')}"
        )
        if peers.go_version:
            described += f", Go peer ({peers.go_version.removeprefix('peer ')})"
        if "kopf-peer" in scenarios:
            described += f", kopf peer (kopf {kopf_version()})"
        print(
            f"[{time.monotonic() - began:.0f} s] servers up; {described}; measuring "
            f"{', '.join(scenarios)}",
            flush=True,
        )
        totals = run_bench(bench, scenarios, args.pods, args.rounds)
        verdict = report(
            totals, scenarios, args=args, versions=described, bench=bench, skipped=peers.skipped
        )
        if args.profile:
            profile(bench, scenarios, args.profile, args.profile_pods)
        print(f"\ntotal wall time {time.monotonic() - began:.0f} s")
        return 0
    finally:
        stopping = time.monotonic()
        stop.set()
        with contextlib.suppress(Exception):
            register(api, [], {})
        api.close()
        stop_servers([hook.server for hook in bench.hooks.values()], plane=plane)
        servers_stopped = time.monotonic()
        plane.stop(remove=not args.keep)
        print(
            f"stopped every process by pid: servers in {servers_stopped - stopping:.1f} s, "
            f"control plane in {time.monotonic() - servers_stopped:.1f} s",
            flush=True,
        )
        if verdict:
            print(verdict, flush=True)  # the run's last line


def profile(bench: Bench, scenarios: list[str], folder: Path, pods: int) -> None:
    """One py-spy profile per snapready variant, summarised next to its raw stacks; then one
    API-server CPU profile behind each webhook (``bench.cluster.profile.profile_apiserver``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for scenario in [s for s in scenarios if s.startswith("snapready")]:
        raw = profile_phase(bench, scenario, pods, folder.resolve())
        if raw is not None:
            summary = summarise_profile(raw)
            (folder / f"{scenario}.summary.txt").write_text(summary + "\n")
            print(f"\npy-spy profile of {scenario}, {pods} selected pods "
                  f"(raw stacks: {raw}):\n{summary}")  # fmt: skip
    table = profile_apiserver(bench, scenarios, folder.resolve())
    if table is not None:
        (folder / "apiserver.summary.txt").write_text(table + "\n")
        print(f"\nAPI-server CPU profile (go tool pprof, inclusive; apiserver-*.pb.gz in "
              f"{folder}; no column for `none`, which has no webhook):\n{table}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
