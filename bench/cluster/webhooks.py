"""The webhook servers of ``make bench-cluster`` and the configurations that register them.

Every server is registered with the chart's two webhook configurations, only ``clientConfig``
pointed at it (``url`` + ``caBundle``), each webhook with the ``matchConditions`` snapready's
scope controller wrote; snapready runs as the chart's ServiceAccount (a TokenRequest token, the
chart's RBAC) with the chart's settings file.
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
from bench.harness.servers import (
    Launcher,
    Server,
    constant_counts,
    snapready_counts,
    wait_ready,
)
from tests.envtest.controlplane import ControlPlane, free_port
from tests.support.helm_support import settings_of
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
) -> dict[str, Webhook]:
    """Start the constant server and one ``snapready serve --source kube`` per variant, each
    snapready as the chart's ServiceAccount with the chart's settings file.

    The chart's webhook configurations (pointed at the first snapready) are registered before
    snapready starts: with ``scope.mode: dynamic`` its ``/readyz`` waits until the scope
    controller has written (leader) or seen (follower) the ``matchConditions`` on them. Those
    conditions are then kept for every scenario: the constant server is registered exactly like
    snapready."""
    ca = ca_bundle(certs)
    charts = {False: chart_objects(False)}
    if "snapready+inject" in scenarios:
        charts[True] = chart_objects(True)
    kubeconfig = install_identity(api, plane, charts[False], tmp)
    hooks: dict[str, Webhook] = {}
    launcher = Launcher(tmp, plane)
    if "constant" in scenarios:
        port = free_port()
        server = launcher.constant(port, certs, echo=True)
        counts = partial(constant_counts, port, certs / "ca.crt")
        hooks["constant"] = Webhook(server, webhook_configs(charts[False], port, ca), counts)
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
        counts = partial(snapready_counts, metrics_port)
        hooks[scenario] = Webhook(server, webhook_configs(objs, port, ca), counts)
        if len([s for s in hooks if s.startswith("snapready")]) == 1:
            register(api, hooks[scenario].configs, {})  # before readiness, see above
    for name, hook in hooks.items():
        wait_ready(hook.server, certs / "ca.crt", "/counts" if name == "constant" else "/readyz")
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
