"""A busy scale cluster for ``make bench-scale``: labels changing on pods and PodSnapshots.

While the leader's background passes run (the restore tracker on every changed pod, the
lifecycle pass over every pod and snapshot at most every 5 s, the record recorder on snapshot
changes), the in-handler latency is measured again (``latency.busy_rounds``). A thread patches
the label ``bench-churn`` on stamped pods (as admin) and PodSnapshots (as GKE's controller: its
guard refuses anyone else) at fixed rates, round-robin over the scale cluster's objects. A label
is what snapready's caches keep (a pod's grouping labels; a snapshot's GKE labels), so every
patch is a cache change that wakes the controllers, as a rollout or a checkpoint would.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass

from bench.harness.api import SNAPSHOT_API, Api
from bench.harness.plane import BenchError


@dataclass
class Churned:
    """What one churn run wrote."""

    pods: int = 0
    snapshots: int = 0
    seconds: float = 0.0


class Churn:
    """Patches ``pods_per_s`` pods and ``snapshots_per_s`` PodSnapshots per second until
    ``stop``.

    Args:
        admin, gke: API clients (admin for pods; GKE's controller identity for PodSnapshots).
        pods, snapshots: (namespace, name) of the objects to patch, round-robin.
    """

    def __init__(
        self,
        admin: Api,
        gke: Api,
        pods: list[tuple[str, str]],
        snapshots: list[tuple[str, str]],
        *,
        pods_per_s: float = 20.0,
        snapshots_per_s: float = 2.0,
    ) -> None:
        self.admin, self.gke = admin, gke
        self.pods, self.snapshots = itertools.cycle(pods), itertools.cycle(snapshots)
        self.pods_per_s, self.snapshots_per_s = pods_per_s, snapshots_per_s
        self.done = Churned()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-churn", daemon=True)
        self._error: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> Churned:
        """Stop; what was written. Raises ``BenchError`` when a patch failed."""
        self._stop.set()
        self._thread.join(30)
        if self._error is not None:
            raise BenchError(f"churn: {self._error}")
        return self.done

    def _run(self) -> None:
        began = time.monotonic()
        step = 1.0 / (self.pods_per_s + self.snapshots_per_s)
        share = self.snapshots_per_s / (self.pods_per_s + self.snapshots_per_s)
        owed = 0.0
        number = 0
        try:
            while not self._stop.wait(step):
                number += 1
                owed += share
                body = {"metadata": {"labels": {"bench-churn": str(number)}}}
                if owed >= 1.0:
                    owed -= 1.0
                    namespace, name = next(self.snapshots)
                    path = f"{SNAPSHOT_API}/namespaces/{namespace}/podsnapshots/{name}"
                    self.gke.json("PATCH", path, body, patch=True)
                    self.done.snapshots += 1
                else:
                    namespace, name = next(self.pods)
                    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
                    self.admin.json("PATCH", path, body, patch=True)
                    self.done.pods += 1
        except BaseException as exc:
            self._error = exc
        self.done.seconds = time.monotonic() - began
