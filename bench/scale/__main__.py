"""``python -m bench.scale``: flags, both clusters, the snapready runs, the latency rounds.

What it measures and against which baseline: ``bench/scale/__init__.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness import proc, results
from bench.harness.api import Api, create
from bench.harness.identity import RELEASE_NS, chart_objects, install_identity
from bench.harness.objects import Obj
from bench.harness.plane import assets, run_in_folder, start_plane, versions
from bench.harness.proc import MIB
from bench.harness.profile import recording, summarise_profile
from bench.harness.servers import certificates
from bench.scale import serve
from bench.scale.churn import Churn
from bench.scale.heap import heap_report
from bench.scale.latency import Busy, busy_rounds, measure_latency, profile_rounds, review_body
from bench.scale.nodes import POOLS, node_objects
from bench.scale.populate import (
    record_objects,
    run_parallel,
    set_up_base,
    snapshot_objects,
    snapshot_uids,
)
from bench.scale.report import Outcome, listed_line, report
from bench.scale.reports import Target, measure_reports
from bench.scale.serve import Figures, Snapready
from bench.scale.workload import Plan, Sizes, make_plan, namespace_name, pod_objects
from tests.envtest.controlplane import ControlPlane

DEFAULTS = {"nodes": 2000, "pods": 20000, "snapshots": 5000, "namespaces": 50}
QUICK = {"nodes": 200, "pods": 2000, "snapshots": 500, "namespaces": 10}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.scale",
        description="snapready's caches at scale on a real control plane: sync time, RSS and "
        "in-handler admission latency against an empty cluster. See the module docstring.",
    )
    for name, default in DEFAULTS.items():
        parser.add_argument(f"--{name}", type=int, default=None, help=f"default {default}")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: " + "/".join(map(str, QUICK.values())) + ", 400 requests, settle 10 s",
    )
    parser.add_argument("--concurrency", type=int, default=24, help="create threads (default 24)")
    parser.add_argument("--requests", type=int, default=None, help="POST /mutate per server (2000)")
    parser.add_argument("--rounds", type=int, default=8, help="alternating latency rounds (8)")
    parser.add_argument(
        "--settle", type=float, default=None, help="seconds before the second RSS (30)"
    )
    parser.add_argument(
        "--no-stages",
        dest="stages",
        action="store_false",
        help="skip the RSS measurements after the nodes and after the pods",
    )
    parser.add_argument(
        "--heap",
        choices=["auto", "on", "off"],
        default="auto",
        help="in-process tracemalloc of the caches (auto: when an RSS target is missed)",
    )
    parser.add_argument(
        "--ready-timeout", type=float, default=600, help="give snapready SECONDS to sync"
    )
    parser.add_argument(
        "--busy-rounds",
        type=int,
        default=4,
        help="alternating rounds while pods and PodSnapshots of the scale cluster change, so "
        "the leader's passes run (0: skip; default 4)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="after the measured rounds, one unmeasured round per server under py-spy (raw "
        "stacks and a summary of the event-loop thread in DIR)",
    )
    parser.add_argument(
        "--reports",
        action="store_true",
        help="then what policy reports cost: OpenReports CRDs, snapready's first audit pass "
        "and a restart's (bench/scale/reports.py)",
    )
    parser.add_argument("--keep", type=Path, metavar="DIR", help="work in DIR and keep it (logs)")
    parser.add_argument("--timeout", type=float, default=3600, help="give up after SECONDS")
    results.add_flag(parser)
    args = parser.parse_args()
    preset = QUICK if args.quick else DEFAULTS
    for name, value in preset.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.requests is None:
        args.requests = 400 if args.quick else 2000
    if args.settle is None:
        args.settle = 10.0 if args.quick else 30.0
    if args.quick:
        args.rounds = min(args.rounds, 4)
        args.busy_rounds = min(args.busy_rounds, 2)
    return args


def main() -> int:
    args = parse_args()
    with results.recorded("scale", args.docs):
        return run_in_folder("bench-scale", args.keep, lambda tmp: bench_in(tmp, args))


@dataclass
class Run:
    """One run: its folder, flags, and what it started (for the clean-up)."""

    tmp: Path
    args: argparse.Namespace
    began: float = field(default_factory=time.monotonic)
    planes: list[ControlPlane] = field(default_factory=list)
    servers: list[Snapready] = field(default_factory=list)
    apis: list[Api] = field(default_factory=list)
    kubeconfigs: dict[str, Path] = field(default_factory=dict)

    @property
    def certs(self) -> Path:
        return self.tmp / "certs"

    def say(self, text: str) -> None:
        print(f"[{time.monotonic() - self.began:5.0f} s] {text}", flush=True)

    def identity(self, plane: ControlPlane, api: Api) -> Path:
        """snapready's ServiceAccount on ``plane`` with the chart's RBAC (created once per
        plane): a kubeconfig with its token. snapready never runs as admin here either."""
        key = str(plane.directory)
        if key not in self.kubeconfigs:
            create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": RELEASE_NS}})
            folder = self.tmp / f"identity-{len(self.kubeconfigs)}"
            folder.mkdir(parents=True, exist_ok=True)
            self.kubeconfigs[key] = install_identity(api, plane, chart_objects(False), folder)
        return self.kubeconfigs[key]

    def serve(self, label: str, plane: ControlPlane, api: Api, settle_s: float) -> Snapready:
        """Start snapready on ``plane`` as its ServiceAccount; wait until ready; RSS now and
        ``settle_s`` later."""
        server = serve.start(label, plane, self.identity(plane, api), self.certs, self.tmp)
        self.servers.append(server)
        folder = self.args.profile
        profiled = folder is not None and label == "scale"
        with contextlib.ExitStack() as stack:
            if profiled:
                folder.mkdir(parents=True, exist_ok=True)
                raw = folder.resolve() / "scale-sync.collapsed.txt"
                stack.enter_context(recording(server.pid, raw))
            serve.wait_synced(server, self.certs / "ca.crt", self.args.ready_timeout)
            f = server.figures
            self.say(
                f"  snapready {label}: ready in {f.ready_s:.1f} s, RSS {f.rss_sync_mib:.0f} MiB "
                f"(peak {f.hwm_sync_mib:.0f}); lists: {listed_line(f)}"
            )
            serve.settle(server, settle_s)
            self.say(f"  +{settle_s:.0f} s: RSS {f.rss_settled_mib:.0f} MiB")
        if profiled:
            summary = summarise_profile(raw, thread=None)
            (raw.parent / "scale-sync.summary.txt").write_text(summary + "\n")
            self.say(f"py-spy profile of the sync and settle (every thread; figures of this "
                     f"run are perturbed by the sampling):\n{summary}")  # fmt: skip
        return server

    def stop(self, server: Snapready) -> None:
        serve.stop(server)
        self.servers.remove(server)


def bench_in(tmp: Path, args: argparse.Namespace) -> int:
    """The whole run inside ``tmp``; every process is stopped by pid before returning."""
    run = Run(tmp, args)
    try:
        return measure(run)
    finally:
        stopping = time.monotonic()
        for server in run.servers:
            with contextlib.suppress(Exception):
                serve.stop(server)
        for api in run.apis:
            api.close()
        for plane in run.planes:
            plane.stop(remove=not args.keep)
        print(f"stopped every process by pid in {time.monotonic() - stopping:.1f} s", flush=True)


def start_planes(run: Run) -> tuple[dict[str, ControlPlane], dict[str, Api], str]:
    """Both control planes, their clients, the empty cluster set up, the certificates."""
    binaries = assets(run.tmp)
    planes = {}
    for label in ("empty", "scale"):
        run.say(f"starting the {label} control plane ({binaries})")
        planes[label] = start_plane(binaries, run.tmp, label)
        run.planes.append(planes[label])
    concurrency = run.args.concurrency
    apis = {
        label: Api(plane, concurrency, retries=4, read_timeout=60)
        for label, plane in planes.items()
    }
    run.apis += apis.values()
    set_up_base(planes["empty"], apis["empty"], [namespace_name(0)])
    certificates(run.certs)
    ran = versions(planes["scale"], binaries)
    described = (
        f"snapready tree {ran.tree}, Python {sys.version.split()[0]}, kube-apiserver "
        f"{ran.apiserver}, {ran.etcd.replace('Version: ', 'etcd ')}, {os.cpu_count()} CPUs"
    )
    return planes, apis, described


def churn_objects(
    plan: Plan, sizes: Sizes, uids: dict[tuple[str, str], str]
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(pods, PodSnapshots) the busy rounds change: every 7th pod, every snapshot."""
    pods = [(plan.pods[i][1].namespace, plan.pods[i][0]) for i in range(0, sizes.pods, 7)]
    return pods, sorted(uids)


def measure_busy(
    run: Run,
    empty: Snapready,
    scale: Snapready,
    body: Path,
    *,
    objects: tuple[list[tuple[str, str]], list[tuple[str, str]]],
    admin: Api,
    gke: Api,
) -> Busy | None:
    """The busy rounds (``--busy-rounds``; None when 0), profiled with ``--profile``."""
    args = run.args
    if not args.busy_rounds:
        return None
    churn = Churn(admin, gke, *objects)
    run.say(
        f"admission latency while the leader's passes run: {args.requests} POST /mutate per "
        f"server, {args.busy_rounds} rounds, pods and PodSnapshots changing"
    )
    ca = run.certs / "ca.crt"
    raw = None
    with contextlib.ExitStack() as stack:
        if args.profile:  # every thread: the passes run beside the event loop
            args.profile.mkdir(parents=True, exist_ok=True)
            raw = args.profile.resolve() / "scale-busy.collapsed.txt"
            stack.enter_context(recording(scale.pid, raw))
        busy = busy_rounds(
            empty, scale, ca, body, requests=args.requests, rounds=args.busy_rounds, churn=churn
        )
    if raw is not None:
        summary = summarise_profile(raw, thread=None)
        (raw.parent / "scale-busy.summary.txt").write_text(summary + "\n")
        run.say(f"py-spy profile of the busy rounds (every thread; their figures are "
                f"perturbed by the sampling):\n{summary}")  # fmt: skip
    return busy


def measure(run: Run) -> int:
    args = run.args
    sizes = Sizes(args.nodes, args.pods, args.snapshots, args.namespaces)
    plan = make_plan(sizes)
    planes, apis, described = start_planes(run)
    run.say("snapready on the empty cluster")
    empty = run.serve("empty", planes["empty"], apis["empty"], args.settle)

    run.say(f"scale cluster: {sizes.namespaces} namespaces with a policy each")
    set_up_base(planes["scale"], apis["scale"], plan.namespaces)
    pool_of = {name: pool for pool in POOLS for name in plan.nodes_by_pool.get(pool.name, [])}
    kinds: list[tuple[str, int, Callable[[int], tuple[Obj, Obj | None] | None]]] = [
        ("nodes", sizes.nodes, node_objects),
        ("pods", sizes.pods, lambda i: pod_objects(*plan.pods[i], i)),
        ("snapshots", sizes.snapshots, lambda i: snapshot_objects(i, plan, pool_of)),
    ]
    create_s: dict[str, float] = {}
    stages: list[tuple[str, Figures]] = []
    # PodSnapshots are created as GKE's snapshot controller: GKE's guard refuses admin.
    gke = Api(planes["scale"], args.concurrency, retries=4, read_timeout=60, gke=True)
    run.apis.append(gke)
    for name, count, make in kinds:
        run.say(f"creating {count} {name} (+ status) with {args.concurrency} threads")
        create_s[name] = run_parallel(
            name,
            count,
            make,
            gke if name == "snapshots" else apis["scale"],
            concurrency=args.concurrency,
            deadline=run.began + args.timeout,
        )
        run.say(f"  {count} {name} in {create_s[name]:.0f} s ({count / create_s[name]:.0f}/s)")
        if args.stages and name != "snapshots":
            stage = run.serve(
                f"stage-{name}", planes["scale"], apis["scale"], min(args.settle, 10.0)
            )
            run.stop(stage)
            stages.append((name, stage.figures))
    # snapready's SnapshotRecords of 9 in 10 snapshots, as its leader writes them (GKE's guard
    # refuses records on PodSnapshots): created as admin, like snapready's ServiceAccount would.
    uids = snapshot_uids(apis["scale"])
    run.say(f"creating the SnapshotRecords of {len(uids)} snapshots (9 in 10)")
    create_s["records"] = run_parallel(
        "records",
        sizes.snapshots,
        lambda i: record_objects(i, plan, pool_of, uids),
        apis["scale"],
        concurrency=args.concurrency,
        deadline=run.began + args.timeout,
    )

    database = planes["scale"].directory / "etcd" / "member" / "snap" / "db"
    with contextlib.suppress(OSError):
        run.say(f"etcd database {database.stat().st_size / MIB:.0f} MiB (quota: etcd's 2 GiB)")
    run.say("snapready on the scale cluster")
    scale = run.serve("scale", planes["scale"], apis["scale"], args.settle)
    run.say(f"admission latency: {args.requests} POST /mutate per server, {args.rounds} rounds")
    body = review_body(run.tmp)
    latency = measure_latency(
        [empty, scale], run.certs / "ca.crt", body, args.requests, args.rounds
    )
    objects = churn_objects(plan, sizes, uids)
    busy = measure_busy(run, empty, scale, body, objects=objects, admin=apis["scale"], gke=gke)
    if args.profile:
        profile_rounds([empty, scale], run.certs / "ca.crt", body, args.requests, args.profile)
    for server in (empty, scale):
        server.figures.rss_after_load_mib = proc.memory_mib(server.pid)["VmRSS"]
    outcome = Outcome(sizes, create_s, empty.figures, scale.figures, stages, latency,
                      args.requests, args.rounds, described, busy, args.quick)  # fmt: skip
    rss_met = report(outcome)
    if args.heap == "on" or (args.heap == "auto" and not rss_met):
        for server in list(run.servers):
            run.stop(server)
        run.say("heap of the caches on the scale cluster (in-process, tracemalloc):")
        print(heap_report(run.identity(planes["scale"], apis["scale"])))
    if args.reports:
        for server in list(run.servers):
            run.stop(server)
        kubeconfig = run.identity(planes["scale"], apis["scale"])
        on = Target(planes["scale"], apis["scale"], kubeconfig, run.certs, run.tmp, run.say)
        measure_reports(on, args.timeout - (time.monotonic() - run.began))
    print(f"\ntotal wall time {time.monotonic() - run.began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
