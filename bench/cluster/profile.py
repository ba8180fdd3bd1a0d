"""Profiles taken during ``make bench-cluster --profile DIR``, after the measured rounds.

* snapready: one extra, unmeasured phase of selected pods per snapready variant, sampled with
  ``bench.harness.profile.record`` (raw collapsed stacks in DIR) and summarised by
  ``bench.harness.profile.summarise_profile``.
* the API server: Go's CPU profile (``/debug/pprof/profile``; the control plane runs with
  ``--profiling`` only in this mode) over ``APISERVER_SECONDS`` of selected-pod creation behind
  each webhook in turn, the constant one included, kept as ``apiserver-<scenario>.pb.gz`` (read
  it with ``go tool pprof``) and summarised as milliseconds of API-server CPU per pod for the
  frames of ``APISERVER_FRAMES``: what a webhook makes the API server do.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench.cluster.phases import Bench, delete_pods
from bench.harness.api import Api
from bench.harness.profile import record

APISERVER_SECONDS = 10
"""Length of each API-server profile; pods are created in batches until it is over."""
BATCH = 50
"""Pods per batch while the API server is profiled. The last batch runs past the profile's
window (0.1-0.3 s at the bench's rates), so the pods counted are scaled by the window's share of
the creation's wall time (``apiserver_phase``): an estimate at a steady rate."""

APISERVER_FRAMES: tuple[tuple[str, str], ...] = (
    ("decoding the request, encoding the answer", r"CreateResource\.createHandler\.func1$"),
    ("admission and storage (the finisher)", r"CreateResource\.createHandler\.func1\.2$"),
    ("  mutating webhooks (and reinvocation)", r"mutating\.\(\*mutatingDispatcher\)\.Dispatch$"),
    ("    calling one, applying its patch", r"\(\*mutatingDispatcher\)\.callAttrMutatingHook$"),
    ("      applying the patch", r"json-patch.*\.Patch\.Apply$"),
    ("  validating webhooks", r"validating\.\(\*validatingDispatcher\)\.Dispatch$"),
    ("  matchConditions (CEL), every webhook", r"matchconditions\.\(\*matcher\)\.Match$"),
    ("watch events encoded for watchers", r"handlers\.\(\*watchEncoder\)\.Encode$"),
    ("garbage collection (background mark)", r"runtime\.gcBgMarkWorker$"),
)  # fmt: skip
"""(label, regular expression of a Go function in ``go tool pprof -top -cum``): the frames the
summary shows, inclusive (a frame's callees count in it, so the rows do not add up: the
matchConditions are inside both webhook rows). ``createHandler.func1.2`` runs admission and the
write to etcd on the finisher's goroutine; ``createHandler.func1`` decodes the body and encodes
the answer around it."""


def profile_phase(bench: Bench, scenario: str, pods: int, out: Path) -> Path | None:
    """Sample ``scenario``'s server with py-spy while ``pods`` selected pods are created."""
    bench.activate(scenario)
    bench.create("selected", 64)
    pid = bench.hooks[scenario].server.process.pid
    raw = record(pid, out / f"{scenario}.collapsed.txt", lambda: bench.create("selected", pods))
    delete_pods(bench.api)
    return raw


def apiserver_phase(bench: Bench, scenario: str, out: Path) -> tuple[Path, int] | None:
    """The API server's CPU profile over ``APISERVER_SECONDS`` of selected pods created behind
    ``scenario``'s webhook: (the ``.pb.gz`` written in ``out``, pods created meanwhile), or None
    when the API server refused (it runs without ``--profiling``: printed)."""
    bench.activate(scenario)
    bench.create("selected", 64)
    api = Api(bench.plane, 1, read_timeout=APISERVER_SECONDS + 60)
    answer: list[tuple[int, bytes]] = []
    try:
        fetch = threading.Thread(
            target=lambda: answer.append(
                api.call("GET", f"/debug/pprof/profile?seconds={APISERVER_SECONDS}")
            ),
            daemon=True,
        )
        started = time.monotonic()
        fetch.start()
        created = 0
        while fetch.is_alive() and not bench.stop.is_set():
            latencies, _ = bench.create("selected", BATCH)
            created += len(latencies)  # created, not asked for
        elapsed = time.monotonic() - started
        fetch.join()
    finally:
        api.close()
    delete_pods(bench.api)
    pods = round(created * min(1.0, APISERVER_SECONDS / elapsed)) if elapsed > 0 else created
    if not answer or answer[0][0] != 200:
        status = answer[0][0] if answer else "none"
        print(f"  no API-server profile of {scenario}: HTTP {status}", flush=True)
        return None
    path = out / f"apiserver-{scenario}.pb.gz"
    path.write_bytes(answer[0][1])
    return path, pods


def pprof_top(profile: Path, go: str | None = None) -> str | None:
    """``go tool pprof -top -cum`` of ``profile`` (every node), or None without Go or when it
    fails (not a profile, a timeout)."""
    go = go or shutil.which("go")
    if go is None:
        return None
    try:
        done = subprocess.run(
            [go, "tool", "pprof", "-top", "-cum", "-nodecount=100000", "-nodefraction=0",
             str(profile)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


_TOP_LINE = re.compile(
    r"^\s*[\d.]+(?:[mun]?s)?\s+[\d.]+%\s+[\d.]+%\s+"
    r"(?P<cum>[\d.]+)(?P<cum_unit>[mun]?s)?\s+[\d.]+%\s+(?P<func>.+?)\s*$"
)
"""One row of ``go tool pprof -top``: flat, flat%, sum%, cum, cum%, function; a zero has no
unit (``0     0%``)."""
_INLINE = re.compile(r" \((?:partial-)?inline\)$")
_UNIT = {"s": 1000.0, "ms": 1.0, "us": 0.001, "ns": 0.000001, None: 0.0}
_TOTAL = re.compile(r"Total samples = (?P<value>[\d.]+)(?P<unit>[mun]?s)")


def cumulative_ms(top: str) -> dict[str, float]:
    """Inclusive CPU milliseconds by function name (`` (inline)``, `` (partial-inline)`` taken
    off), from ``go tool pprof -top -cum`` text; the whole profile's total under ``""``."""
    out: dict[str, float] = {}
    if total := _TOTAL.search(top):
        out[""] = float(total["value"]) * _UNIT[total["unit"]]
    for line in top.splitlines():
        if match := _TOP_LINE.match(line):
            name = _INLINE.sub("", match["func"])
            out.setdefault(name, float(match["cum"]) * _UNIT[match["cum_unit"]])
    return out


def per_pod(cumulative: dict[str, float], pods: int) -> list[tuple[str, float]]:
    """(label, ms of API-server CPU per pod) for each of ``APISERVER_FRAMES`` and the total,
    a frame's first matching function counted (0 when none matches); first the pods."""
    rows = [("pods created while profiled", float(pods))]
    rows.append(("API server, all CPU", cumulative.get("", 0.0) / pods))
    for label, pattern in APISERVER_FRAMES:
        expression = re.compile(pattern)
        found = next((ms for name, ms in cumulative.items() if expression.search(name)), 0.0)
        rows.append((label, found / pods))
    return rows


def apiserver_table(columns: dict[str, list[tuple[str, float]]]) -> str:
    """The per-pod rows of every scenario side by side (scenario names as column heads)."""
    names = list(columns)
    labels = [label for label, _ in next(iter(columns.values()))] if columns else []
    width = max((len(label) for label in labels), default=10)
    lines = [f"{'ms of API-server CPU per selected pod':<{width}}  " + "".join(
        f"{name:>18}" for name in names
    )]  # fmt: skip
    for index, label in enumerate(labels):
        digits = 0 if index == 0 else 3  # the first row counts pods
        cells = "".join(f"{columns[name][index][1]:>18.{digits}f}" for name in names)
        lines.append(f"{label:<{width}}  {cells}")
    return "\n".join(lines)


def profile_apiserver(
    bench: Bench,
    scenarios: list[str],
    folder: Path,
    *,
    top: Callable[[Path], str | None] = pprof_top,
) -> str | None:
    """One API-server profile behind each webhook of ``scenarios`` (``none`` has no webhook and
    is skipped, so the table has no column for it), summarised per pod; None when no profile
    was taken or none could be read. Without Go on PATH the profiles are still saved, and that
    is said once."""
    columns: dict[str, list[tuple[str, float]]] = {}
    if top is pprof_top and shutil.which("go") is None:
        print(
            f"  go is not on PATH: the API-server profiles are saved in {folder} but not "
            "summarised (read them with `go tool pprof -top -cum FILE`)",
            flush=True,
        )
        top = _no_summary
    for scenario in [s for s in scenarios if s != "none"]:
        taken = apiserver_phase(bench, scenario, folder)
        if taken is None:
            continue
        path, pods = taken
        text = top(path)
        if text is None:
            if top is not _no_summary:
                print(f"  `go tool pprof` could not read {path}", flush=True)
            continue
        columns[scenario] = per_pod(cumulative_ms(text), max(pods, 1))
    return apiserver_table(columns) if columns else None


def _no_summary(profile: Path) -> str | None:
    """No summary of ``profile`` (Go is missing: said once by ``profile_apiserver``)."""
    return None
