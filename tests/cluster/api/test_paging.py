"""``KubeTransport.list`` page by page on the real API server, the next page fetched while this
one is converted (issue 35): every item once, in the server's order, and no thread left behind
when the conversion fails mid-list."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from kubernetes import client

from tests.cluster.conftest import kube_settings
from tests.support.identity import IdentityFactory
from webhook.base.types import RawObject
from webhook.cluster.api.client import api_client
from webhook.cluster.api.transport import KubeTransport


@pytest.fixture
def transport(namespace: str, snapready_identity: IdentityFactory) -> KubeTransport:
    kubeconfig: Path = snapready_identity(namespace).kubeconfig
    return KubeTransport(api_client(kube_settings(kubeconfig)), 10.0)


@pytest.fixture
def config_maps(kube_admin: client.ApiClient, namespace: str) -> list[str]:
    core = client.CoreV1Api(kube_admin)
    names = [f"cm-{number:02d}" for number in range(23)]
    for name in names:
        body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data={"k": name})
        core.create_namespaced_config_map(namespace, body)
    return names


def test_every_page_once_in_order(
    transport: KubeTransport, namespace: str, config_maps: list[str]
) -> None:
    seen: list[str] = []

    def take(item: RawObject) -> None:
        seen.append(item["metadata"]["name"])

    path = f"/api/v1/namespaces/{namespace}/configmaps"
    leftovers, version = transport.list(path, page_size=4, each=take)
    assert leftovers == [] and version
    assert [n for n in seen if n.startswith("cm-")] == config_maps  # 6 pages, name order
    assert len(seen) == len(set(seen)) == len(config_maps) + 1  # + kube-root-ca.crt
    items, _ = transport.list(path, page_size=5)  # without ``each``: the items returned
    assert [i["metadata"]["name"] for i in items] == seen


def test_a_failed_conversion_leaves_no_page_in_flight(
    transport: KubeTransport, namespace: str, config_maps: list[str]
) -> None:
    taken: list[str] = []

    def take(item: RawObject) -> None:
        taken.append(item["metadata"]["name"])
        if len(taken) == 6:  # on the second page, while the third is being fetched
            raise RuntimeError("convert failed")

    with pytest.raises(RuntimeError, match="convert failed"):
        transport.list(f"/api/v1/namespaces/{namespace}/configmaps", page_size=4, each=take)
    assert len(taken) == 6
    assert not [t.name for t in threading.enumerate() if t.name.startswith("snapready-page")]
