"""``snapready explain`` on a pod gVisor cannot restore: the fresh prediction says ``miss`` with
why (``restoreFails``), though the candidate's fingerprint and node facts match; with rule
``init-emptydir`` disabled its model is off here too. The live reading is built by hand (the
API-server reading is tests/cli/test_status_explain.py's)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tests.conftest import make_settings
from tests.rules.test_facts import policy
from webhook.cli.explain import explain
from webhook.cluster.api.snapshot_reader import Live
from webhook.pod.distill import fingerprint
from webhook.snapshots.index import SnapshotIndex
from webhook.snapshots.views import OriginRecord, SnapshotView

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
CACHE = {"name": "cache", "mountPath": "/cache"}
POD: dict[str, Any] = {
    "metadata": {"name": "p", "namespace": "snap", "labels": {"app": "llm"}},
    "spec": {
        "runtimeClassName": "gvisor",
        "initContainers": [{"name": "fetch", "image": "x", "volumeMounts": [CACHE]}],
        "containers": [{"name": "app", "image": "y", "volumeMounts": [CACHE]}],
        "volumes": [{"name": "cache", "emptyDir": {}}],
    },
}


def live() -> Live:
    """``llm-policy`` and one Ready snapshot whose origin had this pod's fingerprint."""
    origin = OriginRecord("origin", fingerprint(POD), {}, {}, {})
    view = SnapshotView("snap", "snap-1", "llm-policy", "origin", True, "Ready",
                        "2026-12-01T10:00:00Z", None, origin)  # fmt: skip
    return Live("snap", policies=[policy()], snapshots=[view], index=SnapshotIndex.build([view]))


def test_explain_says_why_a_matching_snapshot_cannot_restore_the_pod() -> None:
    doc = explain(POD, live(), make_settings(), now=NOW)
    prediction = doc["prediction"]
    assert (prediction["outcome"], prediction["snapshot"]) == ("miss", "snap-1")
    assert prediction["restoreFails"] == (
        "init container 'fetch' mounts emptyDir 'cache' first and has exited by the checkpoint "
        "(init-emptydir)"
    )
    assert prediction["restoreFailsFrom"] == "pod"
    (candidate,) = doc["candidates"]
    assert candidate["matches"] is True  # the fingerprint matches: gVisor is what refuses


def test_explain_follows_init_emptydir_disabled() -> None:
    settings = make_settings(rules={"disabled": ["init-emptydir"]})
    prediction = explain(POD, live(), settings, now=NOW)["prediction"]
    assert (prediction["outcome"], prediction["restoreFails"]) == ("hit", None)
    assert prediction["restoreFailsFrom"] is None


def test_explain_shows_a_candidates_recorded_blocker() -> None:
    """The pod's ``fetch`` is a native sidecar; the snapshot's record says its origin pod's was
    not: the candidate still ``matches``, and says why no pod restores from it."""
    pod = {**POD, "spec": {**POD["spec"], "initContainers": [
        {**POD["spec"]["initContainers"][0], "restartPolicy": "Always"}]}}  # fmt: skip
    blocker = "init container 'fetch' mounts emptyDir 'cache' first and has exited by the checkpoint (init-emptydir)"  # noqa: E501
    origin = OriginRecord("origin", fingerprint(pod), {}, {}, {}, blocker=blocker)
    view = SnapshotView("snap", "snap-1", "llm-policy", "origin", True, "Ready",
                        "2026-12-01T10:00:00Z", None, origin)  # fmt: skip
    found = Live("snap", policies=[policy()], snapshots=[view], index=SnapshotIndex.build([view]))
    doc = explain(pod, found, make_settings(), now=NOW)
    assert (doc["prediction"]["outcome"], doc["prediction"]["restoreFailsFrom"]) == (
        "miss",
        "origin",
    )
    (candidate,) = doc["candidates"]
    assert (candidate["matches"], candidate["restoreBlocker"]) == (True, blocker)
