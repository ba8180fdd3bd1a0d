"""In-handler admission latency of ``make bench-scale``: the scale server against the empty one.

Baseline: the same ``snapready serve`` on the empty cluster, measured in the same alternating
rounds (the order flips every round, so drift on a shared machine hits both alike). Each round is a
separate client process (``python -m bench.scale.latency PORT CA BODY COUNT``) sending ``POST
/mutate`` of review 03 (moved to ``bench-000``) over one keep-alive HTTPS connection. Latencies:
the server's own in-handler ``durationMs`` (its ``admission`` log lines: from reading the request
to the decision) and the client's round trip.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from bench.harness import objects, proc
from bench.harness.objects import ROOT, Obj
from bench.harness.plane import BenchError
from bench.harness.profile import record, summarise_profile
from bench.harness.stats import percentile
from bench.scale.churn import Churn
from bench.scale.serve import Snapready, log_entries
from bench.scale.workload import PREFIX, namespace_name


def run_client(port: int, ca: str, body_file: str, count: int) -> None:
    """POST the review ``count`` times, ``REQUEST_MARK`` in it replaced by a number new to each
    request; print latencies and the last answer as JSON."""
    template = Path(body_file).read_bytes()
    context = ssl.create_default_context(cafile=ca)
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
    latencies: list[float] = []
    answer: Obj = {}
    first = time.time_ns()  # numbers new to this client: no server has seen them
    for number in range(count):
        body = template.replace(REQUEST_MARK, str(first + number).encode())
        headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
        started = time.perf_counter()
        connection.request("POST", "/mutate", body, headers)
        response = connection.getresponse()
        data = response.read()
        latencies.append((time.perf_counter() - started) * 1000)
        if response.status != 200:
            raise SystemExit(f"HTTP {response.status}: {data[:300]!r}")
        answer = json.loads(data)
    connection.close()
    print(json.dumps({"latencies": latencies, "answer": answer}))


@dataclass
class Latency:
    """Latencies (ms) of one server over every round."""

    handler: list[float] = field(default_factory=list)
    client: list[float] = field(default_factory=list)
    round_p99: list[float] = field(default_factory=list)
    """In-handler p99 of each round (how much one server's p99 moves between rounds)."""
    answer: Obj = field(default_factory=dict)


def one_round(
    server: Snapready, ca: Path, body: Path, count: int
) -> tuple[list[float], list[float], Obj]:
    offset = server.log.stat().st_size
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.scale.latency",
            str(server.port),
            str(ca),
            str(body),
            str(count),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if out.returncode != 0:
        raise BenchError(f"client against {server.label}: {out.stderr[-800:]}")
    result = json.loads(out.stdout)
    time.sleep(0.4)  # admission lines are flushed every 100 ms
    handler = [
        float(entry["durationMs"])
        for entry in log_entries(server.log, offset)
        if entry.get("msg") == "admission" and entry.get("endpoint") == "mutate"
    ]
    if len(handler) != count:
        raise BenchError(f"{server.label}: {len(handler)} admission lines for {count} requests")
    return handler, list(result["latencies"]), dict(result["answer"])


def measure_latency(
    servers: Sequence[Snapready], ca: Path, body: Path, requests: int, rounds: int
) -> dict[str, Latency]:
    results = {server.label: Latency() for server in servers}
    for server in servers:  # warm-up, not counted
        one_round(server, ca, body, max(50, requests // 10))
    per_round = max(1, requests // rounds)
    for number in range(rounds):
        order = list(servers) if number % 2 == 0 else list(reversed(servers))
        for server in order:
            handler, client, answer = one_round(server, ca, body, per_round)
            result = results[server.label]
            result.handler += handler
            result.client += client
            result.round_p99.append(percentile(handler, 99))
            result.answer = answer
        print(
            f"    round {number + 1}/{rounds}: "
            + ", ".join(f"{s.label} p99 {results[s.label].round_p99[-1]:.2f} ms" for s in order),
            flush=True,
        )
    return results


@dataclass
class Busy:
    """In-handler latencies (ms) of the scale server while the leader's passes run (churn on
    its cluster), and of the empty server in the same alternating rounds."""

    handler: list[float]
    empty: list[float]
    what: str
    """The churn: objects changed per second."""
    passes: str
    """What the scale server spent meanwhile (CPU seconds)."""

    @property
    def ratio_p99(self) -> float:
        return percentile(self.handler, 99) / percentile(self.empty, 99)


def controller_passes(port: int) -> dict[str, tuple[float, float]]:
    """Each controller's ``(passes, CPU seconds of its thread in passes)`` from the server's
    ``snapready_controller_passes_total`` and ``snapready_controller_pass_cpu_seconds_total``
    (``/metrics``)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
    finally:
        connection.close()
    samples = {
        (sample.name, sample.labels.get("controller", "")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    return {
        name: (value, samples.get(("snapready_controller_pass_cpu_seconds_total", name), 0.0))
        for (series, name), value in samples.items()
        if series == "snapready_controller_passes_total"
    }


def passes_line(
    before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]
) -> str:
    """``lifecycle 5 x 41 ms, restores 30 x 2 ms, ...``: passes and CPU per pass between two
    ``controller_passes`` readings, busiest first; controllers that did not pass are left out."""
    rows = []
    for name, (count, cpu) in after.items():
        done = count - before.get(name, (0.0, 0.0))[0]
        spent = cpu - before.get(name, (0.0, 0.0))[1]
        if done > 0:
            rows.append((spent, f"{name} {done:.0f} x {1000 * spent / done:.0f} ms"))
    rows.sort(reverse=True)
    return ", ".join(text for _, text in rows) or "none"


def busy_rounds(
    empty: Snapready,
    scale: Snapready,
    ca: Path,
    body: Path,
    *,
    requests: int,
    rounds: int,
    churn: Churn,
) -> Busy:
    """``rounds`` alternating rounds (``requests`` per server in all) while ``churn`` changes
    objects of the scale cluster, so its leader's controllers pass again and again."""
    handler: list[float] = []
    baseline: list[float] = []
    cpu = proc.cpu_ms(scale.pid)
    controllers = controller_passes(scale.metrics_port)
    churn.start()
    try:
        time.sleep(6.0)  # a first lifecycle pass (at most one per 5 s) is under way
        per_round = max(1, requests // rounds)
        for number in range(rounds):
            order = [empty, scale] if number % 2 == 0 else [scale, empty]
            for server in order:
                latencies, _, _ = one_round(server, ca, body, per_round)
                (handler if server is scale else baseline).extend(latencies)
    finally:
        done = churn.stop()
    spent = (proc.cpu_ms(scale.pid) - cpu) / 1000
    by_controller = passes_line(controllers, controller_passes(scale.metrics_port))
    what = (
        f"{done.pods / done.seconds:.0f} pod and {done.snapshots / done.seconds:.1f} PodSnapshot "
        "label changes per second"
    )
    passes = (
        f"scale server CPU {spent:.1f} s over {done.seconds:.0f} s "
        f"({100 * spent / done.seconds:.0f}% of a core); controller passes (thread CPU per "
        f"pass): {by_controller}"
    )
    return Busy(handler, baseline, what, passes)


def profile_rounds(
    servers: Sequence[Snapready], ca: Path, body: Path, requests: int, folder: Path
) -> None:
    """One extra, unmeasured round of ``requests`` per server under py-spy; prints where each
    server's event-loop thread spends its busy samples (raw stacks kept in ``folder``)."""
    folder = folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    for server in servers:

        def during(server: Snapready = server) -> None:
            one_round(server, ca, body, requests)

        raw = record(server.pid, folder / f"{server.label}.collapsed.txt", during)
        if raw is None:
            continue
        summary = summarise_profile(raw)
        (folder / f"{server.label}.summary.txt").write_text(summary + "\n")
        print(f"\npy-spy profile of snapready {server.label}, {requests} POST /mutate "
              f"({raw}):\n{summary}", flush=True)  # fmt: skip


REQUEST_MARK = b"@REQUEST@"
"""Replaced in each POSTed body by a number new to that request: the value of an environment
variable of the pod's first container, so each request is the first pod of a new template
(a new fingerprint). snapready then distils, fingerprints and predicts every time: its replica
memo (``admission.replicas``), which answers a later replica of one template without that
work, never hides what the prediction costs at scale."""


def review_body(tmp: Path) -> Path:
    """Review 03 in ``bench-000`` (a namespace of both clusters, with the bench policy), its
    first container with the variable ``BENCH_TEMPLATE`` set to ``REQUEST_MARK``."""
    review = objects.review("03")
    review["request"]["namespace"] = namespace_name(0)
    review["request"]["object"]["metadata"]["namespace"] = namespace_name(0)
    container = review["request"]["object"]["spec"]["containers"][0]
    container.setdefault("env", []).append(
        {"name": "BENCH_TEMPLATE", "value": REQUEST_MARK.decode()}
    )
    path = tmp / "review.json"
    path.write_text(json.dumps(review))
    return path


def describe_answer(answer: Obj) -> str:
    """What the last answer said: allowed, and the ``restore-*`` annotations the patch wrote."""
    response = answer.get("response") or {}
    text = f"allowed={response.get('allowed')}"
    patch = response.get("patch")
    if patch:
        ops = json.loads(base64.b64decode(patch))
        written: dict[str, Any] = {}
        for op in ops:
            key = op.get("path", "").rsplit("/", 1)[-1].replace("~1", "/")
            value = op.get("value")
            written.update(value if isinstance(value, dict) else {key: value})
        notes = [
            f"{key.removeprefix(PREFIX)}={str(value)[:90]}"
            for key, value in sorted(written.items())
            if key.startswith(PREFIX + "restore-")
        ]
        text += f", {len(ops)} patch ops: {'; '.join(notes)}"
    return text


def main() -> int:
    port, ca, body, count = sys.argv[1:5]
    run_client(int(port), ca, body, int(count))
    return 0


if __name__ == "__main__":
    sys.exit(main())
