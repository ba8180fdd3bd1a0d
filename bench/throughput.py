"""Throughput and latency of ``snapready serve`` against the constant webhook (``make bench``).

Baseline: the constant-response server (``bench.harness.constant``, fixed body) with the same
generated certificate; both: one worker, uvloop + httptools, TLS 1.2+, on 127.0.0.1. Each scenario
posts the same captured AdmissionReview with 16 concurrent keep-alive connections, to the constant
server first and to snapready second, after a warm-up. The load generator is ``hey`` (Debian
package; limited to one CPU with ``-cpus 1``) when installed, else an asyncio + httpx generator in
this module (much slower: it then limits both servers alike). The generator runs on the same
machine and competes with the server for CPU: figures are comparable with each other (the ratios),
not with a dedicated load machine.

Prints requests/s, p50 and p99 per scenario and server, the ratios against the targets of
design.md, start-up to ready time, peak RSS of the snapready process, and the in-process cost of
one selected pod (``bench.admit``). No assertions: exit 0 whatever the figures.

Usage: ``python -m bench.throughput [--requests 10000] [--rounds 3] [--concurrency 16]
[--generator hey|httpx]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.admit import print_report
from bench.harness import proc, results
from bench.harness.objects import EXAMPLES, review_file
from bench.harness.servers import (
    Launcher,
    certificates,
    stop_servers,
    wait_ready,
)
from bench.harness.stats import percentile
from tests.support.ports import free_port

SCENARIOS = (
    ("selected pod CREATE", "03", "/mutate", 0.7),
    ("unselected pod", "01", "/mutate", 0.9),
    ("Deployment", "13", "/validate", 0.7),
)
"""(name, review file prefix, path, throughput target as a fraction of the constant server)."""
P99_TARGET_MS = 10.0
RSS_TARGET_MB = 150.0
STARTUP_TARGET_S = 2.0


@dataclass
class Result:
    """One load run: throughput and latency percentiles."""

    rps: float
    p50_ms: float
    p99_ms: float


def hey_load(url: str, body: Path, requests: int, concurrency: int) -> Result:
    """Drive ``url`` with ``hey`` and parse its summary."""
    out = subprocess.run(
        ["hey", "-n", str(requests), "-c", str(concurrency), "-cpus", "1", "-m", "POST",
         "-T", "application/json", "-D", str(body), url],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    codes = re.findall(r"\[(\d{3})\]\s+(\d+) responses", out)
    if any(code != "200" for code, _ in codes):
        raise SystemExit(f"non-200 answers from {url}:\n{out}")

    def seconds(pattern: str) -> float:
        match = re.search(pattern, out)
        if match is None:
            raise SystemExit(f"cannot parse hey output:\n{out}")
        return float(match.group(1))

    return Result(
        rps=seconds(r"Requests/sec:\s+([\d.]+)"),
        p50_ms=seconds(r"50% in ([\d.]+) secs") * 1000,
        p99_ms=seconds(r"99% in ([\d.]+) secs") * 1000,
    )


def httpx_load(url: str, body: Path, requests: int, concurrency: int, ca: Path) -> Result:
    """Drive ``url`` with ``concurrency`` asyncio workers sharing one httpx client."""
    payload = body.read_bytes()
    latencies: list[float] = []

    async def worker(client: httpx.AsyncClient, count: int) -> None:
        for _ in range(count):
            started = time.perf_counter()
            answer = await client.post(url, content=payload,
                                       headers={"Content-Type": "application/json"})  # fmt: skip
            latencies.append(time.perf_counter() - started)
            if answer.status_code != 200:
                raise SystemExit(f"HTTP {answer.status_code} from {url}")

    async def main() -> float:
        limits = httpx.Limits(max_connections=concurrency)
        async with httpx.AsyncClient(verify=str(ca), limits=limits, timeout=30) as client:
            started = time.perf_counter()
            share = requests // concurrency
            await asyncio.gather(*(worker(client, share) for _ in range(concurrency)))
            return time.perf_counter() - started

    elapsed = asyncio.run(main())
    p50, p99 = (percentile(latencies, q, "exclusive") * 1000 for q in (50, 99))
    return Result(len(latencies) / elapsed, p50, p99)


def main() -> int:
    """Run every scenario against both servers and print the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=10000, help="requests per run")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3, help="runs per server and scenario")
    parser.add_argument("--generator", choices=["hey", "httpx"], default=None)
    results.add_flag(parser)
    args = parser.parse_args()
    generator = args.generator or ("hey" if shutil.which("hey") else "httpx")
    with (
        results.recorded("throughput", args.docs),
        tempfile.TemporaryDirectory(prefix="snapready-bench-") as tmp_name,
    ):
        return bench(Path(tmp_name), generator, args.requests, args.concurrency, args.rounds)


def bench(tmp: Path, generator: str, requests: int, concurrency: int, rounds: int) -> int:
    """Start both servers, load them scenario by scenario, print the figures."""
    certs = certificates(tmp / "certs")
    ca = certs / "ca.crt"
    ours_port, constant_port = free_port(), free_port()
    launcher = Launcher(tmp)
    ours = launcher.snapready(
        "snapready",
        ["--port", str(ours_port), "--cert-file", str(certs / "tls.crt"),
         "--key-file", str(certs / "tls.key"), "--policies", str(EXAMPLES),
         "--metrics-port", "0"],
        ours_port,
    )  # fmt: skip
    constant = launcher.constant(constant_port, certs, echo=False)
    try:
        startup = wait_ready(ours, ca, timeout=30, every=0.01)
        wait_ready(constant, ca, "/counts", timeout=30, every=0.01)
        ports = {"constant": constant_port, "snapready": ours_port}
        rows = run_scenarios(tmp, generator, requests, concurrency, ca=ca, ports=ports,
                             rounds=rounds)  # fmt: skip
        rss = proc.memory_mib(ours.process.pid).get("VmHWM", float("nan"))
    finally:
        stop_servers([ours, constant], timeout=30)
    report(rows, startup=startup, rss=rss, generator=generator, requests=requests,
           concurrency=concurrency, rounds=rounds)  # fmt: skip
    return 0


def run_scenarios(
    tmp: Path,
    generator: str,
    requests: int,
    concurrency: int,
    *,
    ca: Path,
    ports: dict[str, int],
    rounds: int,
) -> list[tuple[str, float, Result, Result]]:
    """Warm up, then measure both servers ``rounds`` times per scenario, alternating, and keep
    each server's best round (other processes on a shared machine only ever slow a run down)."""
    rows = []
    for name, prefix, path, target in SCENARIOS:
        body = tmp / f"{prefix}.json"
        body.write_bytes(review_file(prefix).read_bytes())
        results: dict[str, Result] = {}
        load_of: dict[str, Callable[[int], Result]] = {}
        for server in ("constant", "snapready"):
            url = f"https://127.0.0.1:{ports[server]}{path}"

            def load(count: int, url: str = url, body: Path = body) -> Result:
                if generator == "hey":
                    return hey_load(url, body, count, concurrency)
                return httpx_load(url, body, count, concurrency, ca)

            load_of[server] = load

            load(max(concurrency, requests // 10))  # warm-up
        for _ in range(rounds):  # alternate servers; keep each one's best round
            for server in ("constant", "snapready"):
                result = load_of[server](requests)
                best = results.get(server)
                results[server] = result if best is None or result.rps > best.rps else best
        rows.append((name, target, results["constant"], results["snapready"]))
    return rows


def report(
    rows: list[tuple[str, float, Result, Result]],
    *,
    startup: float,
    rss: float,
    generator: str,
    requests: int,
    concurrency: int,
    rounds: int,
) -> None:
    """Print the figures and how they compare with the design targets."""
    cpus = os.cpu_count()
    gen = "hey -cpus 1" if generator == "hey" else "asyncio+httpx (slow: may bound both servers)"
    print(f"snapready bench: {requests} requests x {concurrency} connections per run, best of "
          f"{rounds} rounds, "
          f"load generator {gen},")  # fmt: skip
    print(f"same machine: {cpus} CPUs shared by the server and the load generator\n")
    print(f"{'scenario':<22}{'server':<11}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}"
          f"{'ratio':>8}{'target':>9}  verdict")  # fmt: skip
    for name, target, base, ours in rows:
        ratio = ours.rps / base.rps
        ok = ratio >= target and ours.p99_ms <= P99_TARGET_MS
        print(f"{name:<22}{'constant':<11}{base.rps:>9.0f}{base.p50_ms:>9.2f}{base.p99_ms:>9.2f}")
        print(f"{'':<22}{'snapready':<11}{ours.rps:>9.0f}{ours.p50_ms:>9.2f}{ours.p99_ms:>9.2f}"
              f"{ratio:>8.2f}{'>=' + str(target):>9}  {'ok' if ok else 'MISSED'}")  # fmt: skip
    print("\nper request at saturation (one worker: 1 / req/s):")
    for name, target, base, ours in rows:
        base_us, ours_us = 1e6 / base.rps, 1e6 / ours.rps
        budget = base_us / target - base_us  # what the target allows on top of the constant
        print(f"  {name:<22} constant {base_us:6.1f} us, snapready {ours_us:6.1f} us: "
              f"{ours_us - base_us:6.1f} us added (target allows {budget:.1f} us)")  # fmt: skip
    print(f"\nstartup to ready: {startup:.2f} s (target <= {STARTUP_TARGET_S} s)")
    print(f"peak RSS of snapready serve: {rss:.0f} MiB (target <= {RSS_TARGET_MB:.0f} MiB)")
    print(f"p99 target: <= {P99_TARGET_MS} ms at {concurrency} connections\n")
    print_report(inject=False, rounds=5, number=2000)


if __name__ == "__main__":
    sys.exit(main())
