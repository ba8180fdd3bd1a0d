"""The report writer's decisions without an API server (``cluster.reports``).

Which API discovery picks, that reports are off (and ``/readyz`` says why) when neither CRD is
served or RBAC refuses the list, and what a write sends: nothing for unchanged content, a
create, a patch after a 409, no retry of a refused content, the token bucket. The real
schemas, the watch and the garbage collector are exercised in ``test_reports.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

import pytest

from tests.conftest import make_settings
from webhook.base.config import Settings
from webhook.base.types import RawObject
from webhook.cluster.api.syncing import Conflict, NotServed, Timing, TransportError
from webhook.cluster.controllers.audit.queue import StampedQueue
from webhook.cluster.controllers.audit.reports import ReportWriter
from webhook.cluster.controllers.audit.worker import AuditWorker
from webhook.kube.policy_reports import OPENREPORTS, ReportView, Scope, digest, result
from webhook.snapshots.state import ClusterState

KEY = "snapready.io/report-digest"
SCOPE = Scope("v1", "Pod", "ns", "p1", "uid-1")
RESULTS = [result("llm", "gpu-driver", "warn", "medium", "pin the latest driver")]
DISCOVERY = {
    "/apis/openreports.io/v1alpha1": {"resources": [{"name": "reports"}]},
    "/apis/wgpolicyk8s.io/v1alpha2": {"resources": [{"name": "policyreports"}]},
}


class Reads:
    """GETs answered from ``documents`` (404 for anything else, or ``refuse`` for a prefix)."""

    def __init__(self, documents: dict[str, RawObject], refuse: str = "") -> None:
        self.documents, self.refuse = documents, refuse
        self.paths: list[str] = []

    def get(self, path: str) -> RawObject:
        self.paths.append(path)
        if self.refuse and path.startswith(self.refuse):
            raise TransportError("HTTP 403 Forbidden: reports is forbidden")
        if "?" in path:
            return {"items": []}
        if path not in self.documents:
            raise NotServed(path)
        return self.documents[path]

    def list(self, path: str, **_: Any) -> Any:
        return [], "1"

    def watch(self, path: str, **_: Any) -> Any:
        raise TransportError("no watch here")


class Writes:
    """Records every write; ``fail`` maps an operation to the exception it raises."""

    def __init__(self, fail: dict[str, Exception] | None = None) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.fail = fail or {}

    def _do(self, what: str, path: str, body: Any) -> RawObject:
        self.calls.append((what, path, body))
        if what in self.fail:
            raise self.fail.pop(what)
        return {}

    def create(self, path: str, body: RawObject) -> RawObject:
        return self._do("create", path, body)

    def merge_patch(self, path: str, patch: RawObject, *, field_manager: str = "") -> RawObject:
        return self._do("patch", path, patch)

    def delete(self, path: str, *, uid: str = "") -> RawObject:
        return self._do("delete", path, uid)


def writer(
    reads: Reads, writes: Writes | None = None, **reports: Any
) -> tuple[ReportWriter, Writes]:
    writes = writes or Writes()
    settings = make_settings(reports={"writes_per_second": 1000, **reports}).reports
    made = ReportWriter(
        writes, reads, settings, digest_key=KEY, timing=Timing(), wait=lambda _s: False
    )
    return made, writes


def cached(made: ReportWriter, *views: ReportView) -> None:
    """Stand a fake, listed report cache in for the reflector."""
    items = {f"{v.namespace}/{v.name}": v for v in views}
    made.cache = cast(Any, SimpleNamespace(items=items, synced=True, served=True))


@pytest.mark.parametrize(
    ("choice", "served", "expected"),
    [
        pytest.param("auto", DISCOVERY, "openreports", id="auto-prefers-openreports"),
        pytest.param(
            "auto",
            {k: v for k, v in DISCOVERY.items() if "wgpolicy" in k},
            "wgpolicyk8s",
            id="auto-falls-back-to-wgpolicy",
        ),
        pytest.param("wgpolicyk8s", DISCOVERY, "wgpolicyk8s", id="a-named-api"),
        pytest.param(
            "openreports",
            {k: v for k, v in DISCOVERY.items() if "wgpolicy" in k},
            None,
            id="a-named-api-not-served-is-off",
        ),
    ],
)
def test_discovery(choice: str, served: dict[str, RawObject], expected: str | None) -> None:
    made, _ = writer(Reads(served), api=choice)
    found = made.discover()
    assert (found.name if found else None) == expected


def test_off_when_neither_api_is_served_said_once_and_in_readyz(
    caplog: pytest.LogCaptureFixture,
) -> None:
    made, _ = writer(Reads({}))
    for _ in range(3):
        assert made.discover() is None
    note = (
        "off: neither openreports.io/v1alpha1 nor wgpolicyk8s.io/v1alpha2 is served (install "
        "a report CRD, e.g. the chart's reports.installCRDs; re-checked every "
        "source.resync_seconds)"
    )
    assert made.note == note
    assert [r.getMessage() for r in caplog.records] == [f"policy reports {note}"]
    rebuilt: list[str] = []
    worker = audit_worker(Reads({}), lambda: rebuilt.append("x"))
    worker.reconcile()
    assert worker.status == note  # what /readyz shows under "reports"


def audit_worker(reads: Reads, on_change: Callable[[], None]) -> AuditWorker:
    settings: Settings = make_settings()
    return AuditWorker(
        Writes(),
        reads,
        cast(Any, None),
        settings,
        state=ClusterState,
        is_leader=lambda: True,
        lock=threading.Lock(),
        on_change=on_change,
        timing=Timing(),
    )


def test_off_when_rbac_refuses_the_list() -> None:
    made, _ = writer(Reads(DISCOVERY, refuse="/apis/openreports.io/v1alpha1/reports"))
    assert made.discover() is None
    assert made.note.startswith("off: listing openreports.io/v1alpha1 reports failed (HTTP 403")


def test_a_passing_discovery_error_keeps_the_api() -> None:
    reads = Reads(DISCOVERY)
    made, _ = writer(reads)
    assert made.discover() is OPENREPORTS
    reads.refuse = "/apis/openreports.io"
    assert made.discover() is OPENREPORTS


def test_unchanged_content_sends_nothing_and_a_change_one_patch() -> None:
    made, writes = writer(Reads(DISCOVERY))
    made.discover()
    same = ReportView("ns", "uid-1", "r-uid", digest(SCOPE, RESULTS), (0, 0, 1, 0, 0))
    cached(made, same)
    assert made.write(SCOPE, RESULTS, 10) == "unchanged"
    assert writes.calls == []
    cached(made, ReportView("ns", "uid-1", "r-uid", "old", (0, 1, 0, 0, 0)))
    assert made.write(SCOPE, RESULTS, 11) == "updated"
    ((what, path, body),) = writes.calls
    assert (what, path) == ("patch", "/apis/openreports.io/v1alpha1/namespaces/ns/reports/uid-1")
    assert body["metadata"]["annotations"][KEY] == digest(SCOPE, RESULTS)
    assert body["summary"]["warn"] == 1
    # The watch has not delivered the patch yet: the same content is not sent twice.
    assert made.write(SCOPE, RESULTS, 12) == "unchanged"
    assert len(writes.calls) == 1


def test_a_new_report_is_created_and_a_409_patches_instead() -> None:
    made, writes = writer(Reads(DISCOVERY), Writes({"create": Conflict("HTTP 409: exists")}))
    made.discover()
    cached(made)
    assert made.write(SCOPE, RESULTS, 10) == "updated"
    assert [c[0] for c in writes.calls] == ["create", "patch"]
    assert made.actions == {"updated": 1}


def test_no_kept_result_means_no_report() -> None:
    made, writes = writer(Reads(DISCOVERY), results=["fail"])
    made.discover()
    cached(made)
    assert made.write(SCOPE, RESULTS, 10) == "unchanged"  # only a warn: nothing to keep
    cached(made, ReportView("ns", "uid-1", "r-uid", "old", (0, 0, 1, 0, 0)))
    assert made.write(SCOPE, RESULTS, 11) == "deleted"
    assert writes.calls == [
        ("delete", "/apis/openreports.io/v1alpha1/namespaces/ns/reports/uid-1", "r-uid")
    ]


def test_a_refused_content_is_not_sent_again_until_it_changes() -> None:
    refusal = TransportError("HTTP 422 Unprocessable Entity: results[0].severity: bad")
    made, writes = writer(Reads(DISCOVERY), Writes({"create": refusal}))
    made.discover()
    cached(made)
    assert made.write(SCOPE, RESULTS, 10) == "failed"
    assert made.write(SCOPE, RESULTS, 11) == "skipped"
    other = [result("llm", "gpu-driver", "warn", "medium", "another fix")]
    assert made.write(SCOPE, other, 12) == "created"
    assert [c[0] for c in writes.calls] == ["create", "create"]
    assert made.actions == {"failed": 1, "created": 1}


def test_writes_wait_for_the_token_bucket() -> None:
    """A burst of 2 at 1 write/s: the third write waits; a stopping worker gives up."""
    waited: list[float] = []

    def wait(seconds: float) -> bool:
        waited.append(seconds)
        return len(waited) > 2  # stopping at the third pause

    made, writes = writer(Reads(DISCOVERY), writes_per_second=1, write_burst=2)
    made.wait = wait
    made.discover()
    cached(made)
    for index in range(3):
        scope = Scope("v1", "Pod", "ns", f"p{index}", f"uid-{index}")
        made.write(scope, RESULTS, 10)
    assert len(writes.calls) == 2
    assert waited == [1.0, 1.0, 1.0]


def test_a_stamped_pod_is_queued_when_new_or_when_its_report_would_change() -> None:
    """The pod cache's hook (``cluster.audit_queue``): a judged pod whose outcome and phase
    are unchanged is not queued again (status updates are frequent); a recorded outcome or a
    finished phase queues it; each pod is queued once however often it is offered."""
    queue = StampedQueue("snapready.io/restore-outcome")
    assert queue.offer("u1", "ns", "p1", (None, False))
    assert queue.offer("u1", "ns", "p1", (None, False))  # still queued: once in the queue
    assert len(queue) == 1
    assert queue.pop() == ("u1", "ns", "p1")
    running = {"metadata": {"annotations": {}}, "status": {"phase": "Running"}}
    queue.mark_pod("u1", running)
    assert not queue.offer("u1", "ns", "p1", (None, False))
    assert queue.offer("u1", "ns", "p1", ("restored", False))
    assert queue.offer("u1", "ns", "p1", (None, True))
    queue.clear()
    assert queue.pop() is None and not queue.judged("u1")
