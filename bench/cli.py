"""The CLI against large and hostile input (``make bench-cli``; design.md "Targets";
docs/performance.md).

Targets: ``snapready check`` linear in its input (a 20 MB file of 24,000 objects judged in
seconds; before: 87.7 s, growing with the square of the object count), and any input
refused or judged within 10 s and 512 MiB, YAML alias bombs included (before: a 666-byte
manifest ran ``check`` past 120 s and 5.1 GB).

Each command runs as its own ``python -m webhook`` subprocess, as a CI job runs it, under an
address-space limit (``--limit-mib``, default 2048: a regression fails with MemoryError instead
of taking the shared machine) and a timeout (``--timeout``). Measured: wall-clock seconds and
peak RSS (``ru_maxrss`` of that child from ``os.wait4``), the exit status and the first stderr
line. Inputs, generated in a temporary folder:

* ``deployments-N``: N selected, identical Deployments (~830 bytes each, so 24,000 make 20 MB):
  every one shares its fingerprint with all others (the ``shared-fingerprint`` worst case);
* ``alias-bomb-L``: a Pod whose ``args`` nest L levels of nine YAML aliases each (9**L strings
  once expanded; 9 levels: 666 bytes);
* ``line-breaks.yaml``: a Pod with 10 million U+0085 in one annotation (20 MB), and
  ``keys-and-findings.yaml``: a Pod with 20,000 junk spec keys and 3,000 unpinned containers
  (under the 256 KiB ``check`` composes again): what ``check`` does to put findings on their
  lines must stay linear (``kube.field_lines``).

No assertions: exit 0 whatever the figures. Usage:
``python -m bench.cli [--objects 24000] [--scaling] [--limit-mib 2048] [--timeout 150]``
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.harness import results
from bench.harness.stats import markdown_table, verdict

POLICIES = "manifests/examples"
TARGET_SECONDS = 10.0
TARGET_MIB = 512.0

_DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm-{i:06d}
  namespace: snap
spec:
  replicas: 1
  selector:
    matchLabels:
      app: llm
      instance: llm-{i:06d}
  template:
    metadata:
      labels:
        app: llm
        model: gemma
        instance: llm-{i:06d}
    spec:
      runtimeClassName: gvisor
      nodeSelector:
        cloud.google.com/machine-family: n2
      containers:
        - name: server
          image: us-docker.pkg.dev/example/llm/server@sha256:{digest}
          args: ["--port", "8080", "--model", "gemma"]
          ports:
            - containerPort: 8080
          resources:
            requests:
              cpu: "2"
              memory: 8Gi
            limits:
              cpu: "2"
              memory: 8Gi
"""


def deployments(count: int) -> str:
    """``count`` selected Deployments that differ only in name (one YAML stream)."""
    return "---\n".join(_DEPLOYMENT.format(i=i, digest="a" * 64) for i in range(count))


def alias_bomb(levels: int) -> str:
    """A selected Pod whose ``args`` nest ``levels`` levels of nine aliases (9**levels strings
    once expanded), the shape of the 666-byte manifest a new-user trial found."""
    anchors = ["&a0 [x,x,x,x,x,x,x,x,x]"]
    for level in range(1, levels):
        anchors.append(f"&a{level} [" + ",".join([f"*a{level - 1}"] * 9) + "]")
    return (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bomb\n  namespace: snap\n"
        "  labels: {app: llm, model: m}\nspec:\n  runtimeClassName: gvisor\n"
        "  containers:\n  - name: c\n    image: x\n    args: [" + ", ".join(anchors) + "]\n"
    )


def line_breaks_value(chars: int) -> str:
    """A selected Pod whose annotation holds ``chars`` U+0085 characters (libyaml's line
    breaks, not an editor's): ``check`` counts them to number lines as editors do
    (``kube.field_lines.EditorLines``), in one pass and constant memory."""
    return (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: breaks\n  namespace: snap\n"
        '  labels: {app: llm}\n  annotations: {note: "' + "\x85" * chars + '"}\n'
        "spec:\n  runtimeClassName: gvisor\n  containers:\n  - name: c\n    image: x\n"
    )


def keys_and_findings(keys: int, containers: int) -> str:
    """A selected Pod with ``keys`` junk keys in its spec (duplicates: YAML keeps each key node)
    and ``containers`` containers whose images are not pinned by digest (one finding each):
    ``check`` puts every finding on its line with one dict lookup per step
    (``kube.field_lines``), not a scan of the keys per finding."""
    junk = "".join("  a: 0\n" for _ in range(keys))
    listed = "".join(f"  - name: c{i}\n    image: x\n" for i in range(containers))
    return (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: keys\n  namespace: snap\n"
        "  labels: {app: llm}\nspec:\n  runtimeClassName: gvisor\n"
        + junk
        + "  containers:\n"
        + listed
    )


@dataclass(frozen=True)
class Run:
    """One command's figures."""

    seconds: float
    peak_mib: float
    status: int
    stderr: str


def run(command: list[str], limit_mib: int, timeout: float) -> Run:
    """``command`` under an address-space limit; wall time, peak RSS, exit status, stderr."""

    def limit() -> None:
        size = limit_mib * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size, size))

    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        # preexec_fn is unsafe only with threads in the parent; this process has none.
        process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=err,
            preexec_fn=limit,  # noqa: PLW1509
        )
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                process.kill()
                _, status, usage = os.wait4(process.pid, 0)
                break
            time.sleep(0.02)
        seconds = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode(errors="replace").strip().splitlines()
    first = text[0][:110] if text else ""
    return Run(seconds, usage.ru_maxrss / 1024, process.returncode, first)


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "webhook", *args]


def main(argv: list[str] | None = None) -> int:
    """Generate the inputs, run each command, print one Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--objects", type=int, default=24_000, help="Deployments in the big file")
    parser.add_argument(
        "--scaling", action="store_true", help="also 3,000 / 6,000 / 12,000 objects"
    )
    parser.add_argument("--bomb-levels", type=int, default=9, help="alias nesting of the bomb")
    parser.add_argument("--limit-mib", type=int, default=2048, help="address-space limit")
    parser.add_argument("--timeout", type=float, default=150.0, help="seconds per command")
    results.add_flag(parser)
    args = parser.parse_args(argv)
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory(prefix="snapready-bench-cli-") as tmp:
        folder = Path(tmp)
        bomb = folder / "alias-bomb.yaml"
        bomb.write_text(alias_bomb(args.bomb_levels))
        pod = folder / "pod.yaml"
        pod.write_text(deployments(1))
        breaks = folder / "line-breaks.yaml"
        breaks.write_text(line_breaks_value(10_000_000))
        keyed = folder / "keys-and-findings.yaml"
        keyed.write_text(keys_and_findings(20_000, 3_000))
        cases: list[tuple[str, list[str]]] = [
            (f"alias bomb, {args.bomb_levels} levels", _command("check", str(bomb))),
            ("alias bomb: hash", _command("hash", str(bomb))),
            ("alias bomb: diff", _command("diff", str(bomb), str(pod))),
            ("check, 10M U+0085 in a value (20 MB)", _command("check", str(breaks))),
            ("check, 20,000 keys and 3,000 findings", _command("check", str(keyed))),
        ]
        counts = [3_000, 6_000, 12_000] if args.scaling else []
        for count in [*counts, args.objects]:
            big = folder / f"deployments-{count}.yaml"
            big.write_text(deployments(count))
            size = big.stat().st_size / 1e6
            label = f"{count:,} objects, {size:.1f} MB"
            cases.append((f"check {label}", _command("check", str(big), "--format", "json")))
        for label, command in cases:
            if "check" in command:
                command += ["--policies", POLICIES]
            result = run(command, args.limit_mib, args.timeout)
            ok = result.seconds <= TARGET_SECONDS and result.peak_mib <= TARGET_MIB
            rows.append(
                [
                    label,
                    f"{result.seconds:.2f}",
                    f"{result.peak_mib:.0f}",
                    result.status,
                    verdict(ok),
                    result.stderr.replace("|", "/"),
                ]
            )
            print(f"{label}: {result.seconds:.2f} s, {result.peak_mib:.0f} MiB", file=sys.stderr)
    header = ["input", "seconds", "peak MiB", "exit", "10 s / 512 MiB", "first stderr line"]
    with results.recorded("cli", args.docs, argv):
        print(markdown_table(header, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
