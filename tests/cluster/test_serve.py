"""End to end: a real ``snapready serve --source kube --kubeconfig ...`` subprocess over HTTPS.

The fake API server serves the captured lists plus one extra policy, ``llm-canary`` (a copy of the
captured ``llm-policy``), that exists only in the "cluster": a ``/validate`` answer naming it can
only come from the cluster caches, not from the ``--policies`` directory the fixture also passes.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import (
    REVIEWS,
    RunningServer,
    make_settings,
    start_server,
    stop_server,
    wait_ready,
)
from tests.support.fake_apiserver import NODES, POLICIES, FakeApiServer, default_routes, items_named
from webhook.cli.serve import with_source_flags

FAST = {
    "SNAPREADY_SOURCE__BACKOFF_INITIAL_SECONDS": "0.01",
    "SNAPREADY_SOURCE__BACKOFF_MAX_SECONDS": "0.05",
    "SNAPREADY_SERVER__DRAIN_SECONDS": "0",
}


def routes_with_canary() -> dict[str, Any]:
    """Every capture, plus ``llm-canary`` selecting the same pods as ``llm-policy``."""
    routes = default_routes()
    canary = items_named(routes[POLICIES], ["llm-policy"])[0]
    canary["metadata"].update(name="llm-canary", uid="00000000-0000-0000-0000-00000000c0de")
    routes[POLICIES]["items"].append(canary)
    return routes


def first_readyz(server: RunningServer, timeout: float = 20.0) -> httpx.Response:
    """The first ``/readyz`` answer once the server accepts connections."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise AssertionError(f"server exited:\n{server.log()}")
        try:
            with server.client() as client:
                return client.get("/readyz")
        except httpx.TransportError:
            time.sleep(0.05)
    raise AssertionError(f"server not up after {timeout}s:\n{server.log()}")


@pytest.mark.e2e
def test_serve_kube_is_ready_after_sync_and_validates_from_cluster_policies(
    tmp_path: Path,
) -> None:
    with FakeApiServer(routes_with_canary()) as api:
        api.hold(NODES)  # the node list hangs: the caches cannot all be synced
        kubeconfig = api.kubeconfig(tmp_path)
        server = start_server(
            tmp_path,
            "--source",
            "kube",
            "--kubeconfig",
            str(kubeconfig),
            env=FAST,
            wait=False,
        )
        try:
            before = first_readyz(server)
            assert before.status_code == 503
            assert before.json()["nodes"] == "syncing"
            api.release(NODES)
            wait_ready(server)
            review = (REVIEWS / "03-pod-create-gvisor-l4x4-gpu4.json").read_bytes()
            with server.client() as client:
                ready = client.get("/readyz").json()
                answer = client.post(
                    "/validate", content=review, headers={"Content-Type": "application/json"}
                )
        finally:
            stop_server(server)
    assert (ready["source"], ready["computeclasses"], ready["policies"]) == (
        "kube",
        "not served",
        "3",
    )
    response = answer.json()["response"]
    assert response["uid"] == "4905ae7a-88e9-414c-b80a-a3efc0e7fb9b"
    overlap = [w for w in response.get("warnings", []) if "[policy-overlap]" in w]
    assert len(overlap) == 1
    assert "llm-canary, llm-policy" in overlap[0]
    assert server.process.returncode == 0, server.log()
    assert "fake-token" not in server.log(), "the bearer token is never logged"


@pytest.mark.parametrize(
    ("flags", "kind", "kubeconfig"),
    [
        pytest.param({"source": None, "kubeconfig": None}, "files", None, id="no-flags-keep-files"),
        pytest.param({"source": "kube", "kubeconfig": None}, "kube", None, id="kube-in-cluster"),
        pytest.param(
            {"source": None, "kubeconfig": Path("k")},
            "kube",
            Path("k"),
            id="kubeconfig-implies-kube",
        ),
        pytest.param(
            {"source": "files", "kubeconfig": Path("k")},
            "files",
            Path("k"),
            id="explicit-files-wins",
        ),
    ],
)
def test_source_flags(flags: dict[str, Any], kind: str, kubeconfig: Path | None) -> None:
    settings = with_source_flags(make_settings(), argparse.Namespace(**flags))
    assert (settings.source.kind, settings.source.kubeconfig) == (kind, kubeconfig)
    assert settings.source.policy_dir == make_settings().source.policy_dir
