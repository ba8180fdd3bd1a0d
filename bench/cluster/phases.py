"""The measured phases of ``make bench-cluster``: switch the API server to a scenario, create pods.

A phase is one scenario, pod kind and round: ``--pods`` creates at ``--concurrency`` threads, with
the CPU of every process that matters (``bench.harness.proc``) and the webhook's own call counter
read before and after. Scenarios alternate round by round (the order reverses every other round);
each starts with a dry-run probe until the API server calls the registered server for both
webhooks and no other server, then a warm-up; its pods are deleted afterwards.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import partial

import urllib3

from bench.cluster.objects import KINDS, PLAIN_NS, POLICY_NS
from bench.cluster.webhooks import Webhook, live_conditions, register
from bench.harness import proc
from bench.harness.api import Api
from bench.harness.objects import Obj
from bench.harness.plane import BenchError, pid_of, wait
from bench.harness.stats import percentile
from tests.envtest.controlplane import ControlPlane


@dataclass
class Totals:
    """One measured phase (one scenario, kind and round), or the sum of a scenario and kind's
    phases over the rounds."""

    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    pods: int = 0
    wall_ms: float = 0.0
    cpu: Counter[str] = field(default_factory=Counter)
    """CPU milliseconds by process: webhook, apiserver, etcd, kcm, client; ``other``: the rest
    of the machine (other users' processes); ``webhook loop``: the webhook's main thread (its
    event loop; the rest of ``webhook`` is its other threads: watches, controllers, metrics)."""
    calls: Counter[str] = field(default_factory=Counter)
    """Webhook calls by ``mutate``/``validate`` (the server's own counter)."""

    def add(self, phase: Totals) -> None:
        self.latencies += phase.latencies
        self.errors += phase.errors
        self.pods += phase.pods
        self.wall_ms += phase.wall_ms
        self.cpu.update(phase.cpu)
        self.calls.update(phase.calls)

    def pct(self, q: int) -> float:
        """Percentile ``q`` (1-99) of the latencies, in ms."""
        return percentile(self.latencies, q, "inclusive") * 1000

    def per_pod(self, value: float) -> float:
        return value / self.pods if self.pods else float("nan")


def create_pods(
    api: Api, namespace: str, body: bytes, count: int, *, concurrency: int, stop: threading.Event
) -> tuple[list[float], list[str]]:
    """POST ``count`` pods with ``concurrency`` threads; (seconds per created pod, errors)."""
    latencies: list[float] = []
    errors: list[str] = []
    tickets = itertools.count()
    path = f"/api/v1/namespaces/{namespace}/pods"

    def worker() -> None:
        while not stop.is_set() and next(tickets) < count:
            started = time.perf_counter()
            try:
                status, data = api.call("POST", path, body)
            except urllib3.exceptions.HTTPError as error:
                errors.append(f"{type(error).__name__}: {error}")
                continue
            elapsed = time.perf_counter() - started
            if status == 201:
                latencies.append(elapsed)
            else:
                errors.append(f"HTTP {status}: {data[:300]!r}")

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(0.2)  # short joins: Ctrl-C is seen
    return latencies, errors


def delete_pods(api: Api) -> None:
    """deletecollection in both namespaces; wait until they are empty (no nodes: immediate)."""
    for namespace in (POLICY_NS, PLAIN_NS):
        api.json("DELETE", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0")
    for namespace in (POLICY_NS, PLAIN_NS):
        path = f"/api/v1/namespaces/{namespace}/pods?limit=1"
        wait(f"pods of {namespace} deleted", partial(api.empty, path))


@dataclass
class Bench:
    """Everything the scenarios share."""

    plane: ControlPlane
    api: Api
    hooks: dict[str, Webhook]
    bodies: dict[str, tuple[str, bytes]]
    concurrency: int
    deadline: float
    stop: threading.Event
    probe_log: dict[str, Obj] = field(default_factory=dict)
    conditions: dict[str, list[Obj]] = field(default_factory=dict)
    """``matchConditions`` by webhook name, as snapready's scope controller wrote them."""
    scope_seen: dict[str, str] = field(default_factory=dict)

    def all_counts(self) -> dict[str, dict[str, float]]:
        return {name: hook.counts() for name, hook in self.hooks.items()}

    def create(self, kind: str, count: int) -> tuple[list[float], list[str]]:
        """Create ``count`` pods of ``kind`` at the bench's concurrency."""
        namespace, body = self.bodies[kind]
        return create_pods(
            self.api, namespace, body, count, concurrency=self.concurrency, stop=self.stop
        )

    def activate(self, scenario: str) -> None:
        """Register ``scenario``'s webhook configurations; wait until the API server calls that
        server for both webhooks and no other server (a dry-run probe of a selected pod)."""
        hook = self.hooks.get(scenario)
        register(self.api, hook.configs if hook else [], self.conditions)
        namespace, body = self.bodies["selected"]
        path = f"/api/v1/namespaces/{namespace}/pods?dryRun=All"
        quiet = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            before = self.all_counts()
            status, data = self.api.call("POST", path, body)
            after = self.all_counts()
            moved = {
                name: {k: after[name].get(k, 0) - before[name].get(k, 0) for k in after[name]}
                for name in after
            }
            others = any(v > 0 for n, d in moved.items() if n != scenario for v in d.values())
            if hook is None:
                quiet = 0 if others else quiet + 1
                if quiet >= 3:
                    self.scope_seen[scenario] = "no webhook configuration"
                    return
            elif (
                not others
                and moved[scenario].get("mutate", 0) > 0
                and moved[scenario].get("validate", 0) > 0
            ):
                if status != 201:
                    raise BenchError(f"{scenario}: the probe pod was refused: {data[:800]!r}")
                self.probe_log[scenario] = json.loads(data)
                live = live_conditions(self.api)
                self.scope_seen[scenario] = "; ".join(
                    f"{name}: {', '.join(c['name'] for c in conds) or 'none'}"
                    for name, conds in sorted(live.items())
                )
                return
            time.sleep(0.2)
        raise BenchError(f"the API server did not switch to scenario {scenario} within 60 s")

    def cpu_now(self, scenario: str) -> dict[str, proc.CpuSample]:
        """CPU so far of the processes that matter (``proc.cpu_sample``: ticks and the exact CPU
        clock), the webhook's event loop (its main thread's run time), plus ``bench`` (all of
        this bench's processes) and ``machine`` (every CPU of the machine), those two in ticks
        only: ``other`` is their difference, and ``/proc/stat`` has nothing finer."""
        pids = {
            "apiserver": pid_of(self.plane, "kube-apiserver"),
            "etcd": pid_of(self.plane, "etcd"),
            "kcm": pid_of(self.plane, "kube-controller-manager"),
            "client": os.getpid(),
        }
        if scenario in self.hooks:
            pids["webhook"] = self.hooks[scenario].server.process.pid
        now = {name: proc.cpu_sample(pid) for name, pid in pids.items()}
        if "webhook" in pids:  # the server's event loop (its main thread), for the report
            loop = proc.main_thread_cpu_ms(pids["webhook"])
            now["webhook loop"] = proc.CpuSample(loop, loop)
        mine = {record.pid for record in self.plane.processes} | {os.getpid()}
        now["bench"] = proc.CpuSample(sum(proc.cpu_ms(pid) for pid in mine), None)
        now["machine"] = proc.CpuSample(proc.machine_busy_ms(), None)
        return now

    def measure(self, scenario: str, kind: str, count: int) -> Totals:
        """Create ``count`` pods of ``kind``; latencies, CPU and webhook call deltas."""
        if time.monotonic() > self.deadline:
            raise BenchError("--timeout reached")
        hook = self.hooks.get(scenario)
        calls_before = hook.counts() if hook else {}
        cpu_before = self.cpu_now(scenario)
        started = time.monotonic()
        latencies, errors = self.create(kind, count)
        wall_ms = (time.monotonic() - started) * 1000
        cpu_after = self.cpu_now(scenario)
        calls_after = hook.counts() if hook else {}
        cpu = {name: proc.cpu_delta_ms(cpu_before[name], cpu_after[name]) for name in cpu_after}
        cpu["other"] = max(0.0, cpu.pop("machine") - cpu.pop("bench"))
        calls = {k: calls_after.get(k, 0) - calls_before.get(k, 0) for k in calls_after}
        return Totals(latencies, errors, len(latencies), wall_ms, Counter(cpu), Counter(calls))


def run_bench(
    bench: Bench, scenarios: list[str], pods: int, rounds: int
) -> dict[tuple[str, str], Totals]:
    """Alternating rounds over ``scenarios``; the totals per (scenario, kind)."""
    totals: dict[tuple[str, str], Totals] = defaultdict(Totals)
    warmup = min(pods, 2 * bench.concurrency)
    for number in range(rounds):
        order = scenarios if number % 2 == 0 else list(reversed(scenarios))
        for scenario in order:
            started = time.monotonic()
            bench.activate(scenario)
            bench.create("selected", warmup)
            for kind, _, _ in KINDS:
                totals[scenario, kind].add(bench.measure(scenario, kind, pods))
            delete_pods(bench.api)
            sel = totals[scenario, "selected"]
            print(
                f"  round {number + 1}/{rounds} {scenario:<17} done in "
                f"{time.monotonic() - started:5.1f} s (selected so far: p50 {sel.pct(50):.1f} ms)",
                flush=True,
            )
    return dict(totals)
