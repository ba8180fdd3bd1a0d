"""bench-cluster's peers start and answer real AdmissionReviews over HTTPS, and count their calls.

The Go peer is built (once, cached) by ``scripts/peers.sh``; without Go it is skipped and says
why, except under ``CI=true``, where it fails (CI has Go, as for ``tests/gvisor``'s runsc). The
kopf peer reads the API server's discovery, so it runs against the run's envtest control plane.
Spec hashes are pinned for review 03's pod: a change to either peer's hashing shows as a diff.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client

from bench.cluster.webhooks import webhook_configs
from bench.harness.identity import chart_objects
from bench.harness.objects import review
from bench.harness.peers import (
    PeerUnavailable,
    go_peer_binary,
    go_peer_counts,
    kopf_peer_counts,
    start_go_peer,
    start_kopf_peer,
    wait_go_peer,
    wait_kopf_peer,
)
from bench.harness.servers import Launcher, Server, certificates, stop_servers
from bench.peers import kopf_peer
from tests.envtest.controlplane import ControlPlane
from tests.envtest.plugin import service_account_token
from tests.support.ports import free_port
from tests.support.required import unavailable

HASH_PATH = "/metadata/annotations/snapready.io~1spec-hash"
GO_HASH_03 = "peer:sha256:6995414ef7ab4caf9f2022fead343b75ccaa7fd4dc2f6c336b770cd097a15187"
KOPF_HASH_03 = "peer:sha256:84dcd4fbe0da0b7d7320a3e11569f574f58e0cfd32772621494316d90df18aec"


@pytest.fixture(scope="session")
def go_binary() -> Path:
    """The Go peer's binary (built once by scripts/peers.sh, or reused)."""
    try:
        return go_peer_binary()
    except PeerUnavailable as error:
        if shutil.which("go") is None:
            unavailable(
                "the Go peer", f"Go is not installed, so the Go peer cannot be built: {error}"
            )
        pytest.fail(f"Go is installed but the Go peer did not build: {error}")


@pytest.fixture
def certs(tmp_path: Path) -> Path:
    return certificates(tmp_path / "certs")


@pytest.fixture
def go_peer(go_binary: Path, certs: Path, tmp_path: Path) -> Iterator[Peer]:
    server = start_go_peer(Launcher(tmp_path), go_binary, free_port(), certs)
    try:
        wait_go_peer(server, certs)
        yield Peer(server, certs, lambda: go_peer_counts(server.port, certs / "ca.crt"))
    finally:
        stop_servers([server])


@pytest.fixture
def kopf(
    control_plane: ControlPlane, kube_admin: client.ApiClient, certs: Path, tmp_path: Path
) -> Iterator[Peer]:
    """The kopf peer as a ServiceAccount without RBAC: kopf only reads discovery, which every
    authenticated user may (``system:discovery``)."""
    token = service_account_token(kube_admin, "default", "bench-kopf-peer")
    kubeconfig = control_plane.token_kubeconfig(tmp_path / "kopf.kubeconfig", token)
    counts_port = free_port()
    server = start_kopf_peer(Launcher(tmp_path), free_port(), counts_port, certs, kubeconfig)
    try:
        wait_kopf_peer(server, counts_port, certs)
        yield Peer(server, certs, lambda: kopf_peer_counts(counts_port))
    finally:
        stop_servers([server])


class Peer:
    """A running peer: POST reviews to it over HTTPS (trusting the test CA), read its counts."""

    def __init__(self, server: Server, certs: Path, counts: Callable[[], dict[str, float]]) -> None:
        self.server, self.certs, self.counts = server, certs, counts

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        with urllib3.HTTPSConnectionPool(
            "127.0.0.1", self.server.port, ca_certs=str(self.certs / "ca.crt"),
            cert_reqs="CERT_REQUIRED", retries=False,
        ) as pool:  # fmt: skip
            reply = pool.request(
                "POST", path, body=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"}, timeout=10,
            )  # fmt: skip
        assert reply.status == 200, reply.data[:500]
        answer: dict[str, Any] = json.loads(reply.data)
        return answer


def patch_of(answer: dict[str, Any]) -> list[dict[str, Any]]:
    assert answer["response"]["patchType"] == "JSONPatch"
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(answer["response"]["patch"]))
    return ops


def gvisor_without_annotations() -> dict[str, Any]:
    """Review 01's plain pod (no annotations at all) made a gVisor pod."""
    body = copy.deepcopy(review("01"))
    body["request"]["object"]["spec"]["runtimeClassName"] = "gvisor"
    return body


def check_peer(peer: Peer, hash_03: str) -> None:
    """What both peers do: the spec hash on a gVisor pod, a denial of any other pod, counts."""
    gvisor, plain = review("03"), review("01")
    stamped = peer.post("/mutate", gvisor)
    assert stamped["apiVersion"] == "admission.k8s.io/v1"
    assert stamped["response"]["uid"] == gvisor["request"]["uid"]
    assert stamped["response"]["allowed"] is True
    assert patch_of(stamped) == [{"op": "add", "path": HASH_PATH, "value": hash_03}]

    [created] = patch_of(peer.post("/mutate", gvisor_without_annotations()))
    assert (created["op"], created["path"]) == ("add", "/metadata/annotations")
    assert list(created["value"]) == ["snapready.io/spec-hash"]
    assert re.fullmatch(r"peer:sha256:[0-9a-f]{64}", created["value"]["snapready.io/spec-hash"])

    untouched = peer.post("/mutate", plain)["response"]
    assert untouched["allowed"] is True
    assert "patch" not in untouched

    assert peer.post("/validate", gvisor)["response"]["allowed"] is True
    denied = peer.post("/validate", plain)["response"]
    assert denied["uid"] == plain["request"]["uid"]
    assert denied["allowed"] is False
    assert denied["status"]["code"] == 403
    assert "runtimeClassName is not set; set it to gvisor" in denied["status"]["message"]

    assert {k: peer.counts().get(k) for k in ("mutate", "validate")} == {
        "mutate": 3,
        "validate": 2,
    }


def test_go_peer_hashes_gvisor_pods_and_denies_others(go_peer: Peer) -> None:
    check_peer(go_peer, GO_HASH_03)


def test_kopf_peer_hashes_gvisor_pods_and_denies_others(kopf: Peer) -> None:
    check_peer(kopf, KOPF_HASH_03)


def test_kopf_spec_hash_of_review_03_is_pinned() -> None:
    assert kopf_peer.spec_hash(review("03")["request"]["object"]["spec"]) == KOPF_HASH_03


@pytest.mark.parametrize(
    ("container", "pod", "hashed"),
    [
        pytest.param({"env": [{"name": "X", "value": "1"}]}, {}, True, id="env-is-hashed"),
        pytest.param({"image": "other@sha256:" + "0" * 64}, {}, True, id="image-is-hashed"),
        pytest.param({}, {"nodeSelector": {"zone": "b"}}, True, id="node-selector-is-hashed"),
        pytest.param({"terminationMessagePath": "/x"}, {}, False, id="other-container-fields-not"),
        pytest.param({}, {"schedulerName": "other"}, False, id="other-pod-fields-not"),
    ],
)
def test_kopf_spec_hash_covers_the_listed_fields_only(
    container: dict[str, Any], pod: dict[str, Any], hashed: bool
) -> None:
    spec = copy.deepcopy(review("03")["request"]["object"]["spec"])
    spec["containers"][0].update(container)
    spec.update(pod)
    assert (kopf_peer.spec_hash(spec) != KOPF_HASH_03) is hashed


def test_peers_are_registered_like_the_constant_server() -> None:
    """Only ``clientConfig`` differs between two servers' configurations (webhooks.py)."""
    objs = chart_objects(False)
    first, second = webhook_configs(objs, 1111, "Q0E="), webhook_configs(objs, 2222, "Q0E=")
    for a, b in zip(first, second, strict=True):
        urls = [hook.pop("clientConfig")["url"] for hook in a["webhooks"]]
        assert all(url.startswith("https://127.0.0.1:1111/") for url in urls)
        for hook in b["webhooks"]:
            hook.pop("clientConfig")
        assert a == b
