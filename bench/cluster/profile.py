"""py-spy profiles of snapready during ``make bench-cluster --profile DIR``.

One extra, unmeasured phase of selected pods per snapready variant, sampled with
``bench.harness.profile.record`` (raw collapsed stacks in DIR) and summarised by
``bench.harness.profile.summarise_profile``.
"""

from __future__ import annotations

from pathlib import Path

from bench.cluster.phases import Bench, delete_pods
from bench.harness.profile import record


def profile_phase(bench: Bench, scenario: str, pods: int, out: Path) -> Path | None:
    """Sample ``scenario``'s server with py-spy while ``pods`` selected pods are created."""
    bench.activate(scenario)
    bench.create("selected", 64)
    pid = bench.hooks[scenario].server.process.pid
    raw = record(pid, out / f"{scenario}.collapsed.txt", lambda: bench.create("selected", pods))
    delete_pods(bench.api)
    return raw
