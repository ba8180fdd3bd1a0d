"""The webhook servers of ``make bench-cluster`` and the configurations that register them.

Every server (the constant webhook, the Go and kopf peers, each snapready variant) is registered
with the chart's two webhook configurations, only ``clientConfig`` pointed at it (``url`` +
``caBundle``), each webhook with the ``matchConditions`` snapready's scope controller wrote;
snapready runs as the chart's ServiceAccount (a TokenRequest token, the chart's RBAC) with the
chart's settings file, and the kopf peer reads discovery with the same token.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import yaml

from bench.harness.api import Api
from bench.harness.identity import RELEASE_NS, chart_objects, install_identity
from bench.harness.objects import Obj
from bench.harness.peers import (
    go_peer_counts,
    kopf_peer_counts,
    start_go_peer,
    start_kopf_peer,
    wait_go_peer,
    wait_kopf_peer,
)
from bench.harness.servers import (
    Launcher,
    Server,
    constant_counts,
    snapready_counts,
    wait_ready,
)
from tests.envtest.controlplane import ControlPlane
from tests.support.helm_support import settings_of
from tests.support.ports import free_port
from tests.support.snapready_proc import ca_bundle
from tests.support.webhooks import WEBHOOK_KINDS, point_at

"""Placeholder helpers digest for ``injectHelpers=true`` (the chart refuses all zeros)."""
ADMISSION_API = "/apis/admissionregistration.k8s.io/v1"
CONFIG_PATHS = {
    "MutatingWebhookConfiguration": f"{ADMISSION_API}/mutatingwebhookconfigurations",
    "ValidatingWebhookConfiguration": f"{ADMISSION_API}/validatingwebhookconfigurations",
}


@dataclass
class Webhook:
    """A webhook server of the bench, its configurations and its own call counter."""

    server: Server
    configs: list[Obj]
    counts: Callable[[], dict[str, float]]
    """Calls answered so far, by ``mutate``/``validate``."""
    ready: Callable[[], float]
    """Waits until the server answers; seconds since its start."""


def webhook_configs(objs: list[Obj], port: int, ca: str) -> list[Obj]:
    """The chart's two webhook configurations, pointed at ``https://127.0.0.1:port``."""
    url = f"https://127.0.0.1:{port}"
    configs = [point_at(obj, url, ca) for obj in objs if obj["kind"] in WEBHOOK_KINDS]
    assert len(configs) == 2, "the chart renders one mutating and one validating configuration"
    return configs


def live_conditions(api: Api) -> dict[str, list[Obj]]:
    """``matchConditions`` of every registered webhook, by webhook name."""
    found: dict[str, list[Obj]] = {}
    for path in CONFIG_PATHS.values():
        for item in api.json("GET", path).get("items", []):
            for hook in item.get("webhooks", []):
                found[hook["name"]] = hook.get("matchConditions") or []
    return found


def register(api: Api, configs: list[Obj], conditions: dict[str, list[Obj]]) -> None:
    """Replace every webhook configuration by ``configs`` (none: unregister), each webhook with
    the ``matchConditions`` snapready's scope controller wrote (``conditions``, by name)."""
    for path in CONFIG_PATHS.values():
        for item in api.json("GET", path).get("items", []):
            api.json("DELETE", f"{path}/{item['metadata']['name']}", ok=(404,))
    for config in configs:
        scoped = copy.deepcopy(config)
        for hook in scoped["webhooks"]:
            if conditions.get(hook["name"]):
                hook["matchConditions"] = conditions[hook["name"]]
        api.json("POST", CONFIG_PATHS[scoped["kind"]], scoped)


def start_servers(
    plane: ControlPlane,
    api: Api,
    tmp: Path,
    *,
    scenarios: list[str],
    certs: Path,
    scope_mode: str | None,
    go_peer: Path | None = None,
) -> dict[str, Webhook]:
    """Start the constant server, the peers and one ``snapready serve --source kube`` per
    variant, each snapready as the chart's ServiceAccount with the chart's settings file
    (``go_peer``: the Go peer's binary, when ``go-peer`` is a scenario).

    The chart's webhook configurations (pointed at the first snapready) are registered before
    snapready starts: with ``scope.mode: dynamic`` its ``/readyz`` waits until the scope
    controller has written (leader) or seen (follower) the ``matchConditions`` on them. Those
    conditions are then kept for every scenario: the constant server and the peers are
    registered exactly like snapready."""
    ca = ca_bundle(certs)
    charts = {False: chart_objects(False)}
    if "snapready+inject" in scenarios:
        charts[True] = chart_objects(True)
    kubeconfig = install_identity(api, plane, charts[False], tmp)
    hooks: dict[str, Webhook] = {}
    launcher = Launcher(tmp, plane)

    def hook(name: str, server: Server, counts: Callable[[], dict[str, float]],
             ready: Callable[[], float], objs: list[Obj] = charts[False]) -> None:  # fmt: skip
        hooks[name] = Webhook(server, webhook_configs(objs, server.port, ca), counts, ready)

    if "constant" in scenarios:
        server = launcher.constant(free_port(), certs, echo=True)
        hook("constant", server, partial(constant_counts, server.port, certs / "ca.crt"),
             partial(wait_ready, server, certs / "ca.crt", "/counts"))  # fmt: skip
    if "go-peer" in scenarios:
        assert go_peer is not None, "go-peer needs the Go peer's binary"
        server = start_go_peer(launcher, go_peer, free_port(), certs)
        hook("go-peer", server, partial(go_peer_counts, server.port, certs / "ca.crt"),
             partial(wait_go_peer, server, certs))  # fmt: skip
    if "kopf-peer" in scenarios:
        counts_port = free_port()
        server = start_kopf_peer(launcher, free_port(), counts_port, certs, kubeconfig)
        hook("kopf-peer", server, partial(kopf_peer_counts, counts_port),
             partial(wait_kopf_peer, server, counts_port, certs))  # fmt: skip
    for scenario in [s for s in scenarios if s.startswith("snapready")]:
        objs = charts[scenario == "snapready+inject"]
        port, metrics_port = free_port(), free_port()
        config = settings_file(
            objs, tmp / f"{scenario}.settings.yaml", port=port, metrics_port=metrics_port,
            certs=certs, kubeconfig=kubeconfig, scope_mode=scope_mode,
        )  # fmt: skip
        argv = ["--config", str(config), "--kubeconfig", str(kubeconfig)]
        server = launcher.snapready(
            scenario, argv, port, SNAPREADY_CONFIG_FILE=str(config), POD_NAMESPACE=RELEASE_NS
        )
        hook(scenario, server, partial(snapready_counts, metrics_port),
             partial(wait_ready, server, certs / "ca.crt", "/readyz"), objs)  # fmt: skip
        if len([s for s in hooks if s.startswith("snapready")]) == 1:
            register(api, hooks[scenario].configs, {})  # before readiness, see above
    for webhook in hooks.values():
        webhook.ready()
    return hooks


def settings_file(
    objs: list[Obj],
    path: Path,
    *,
    port: int,
    metrics_port: int,
    certs: Path,
    kubeconfig: Path,
    scope_mode: str | None,
) -> Path:
    """The chart's settings (its ConfigMap) with local paths and ports, written to ``path``."""
    settings = settings_of(objs)
    settings["server"].update(
        host="127.0.0.1",
        port=port,
        cert_file=str(certs / "tls.crt"),
        key_file=str(certs / "tls.key"),
        metrics_port=metrics_port,
        drain_seconds=0,
    )
    settings["source"].update(kind="kube", kubeconfig=str(kubeconfig))
    if scope_mode:
        settings.setdefault("scope", {})["mode"] = scope_mode
    path.write_text(yaml.safe_dump(settings))
    return path
