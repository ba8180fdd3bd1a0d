"""The end-to-end tier: snapready serving a real kube-apiserver, objects created as a cluster would.

Each test module opens one :class:`Env` (module-scoped fixture ``env`` in the module) through
:func:`environment`: the snapshot CRDs, a ``gvisor`` RuntimeClass, a PodSnapshotStorageConfig
and the module's namespaces and policies are created first, then snapready is installed from the
chart and started (``tests.support.webhooks.snapready_on_cluster``: chart RBAC, a ServiceAccount
token, the chart's settings file, the chart's webhook configurations pointed at the process),
and the fixture waits until a dry-run create of a selected pod comes back stamped and a violating
one is denied. Under xdist every worker that runs tests of a module gets its own instance; the
``snapready.test/instance`` label keeps instances from seeing each other's requests.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.envtest.controlplane import ControlPlane
from tests.envtest.plugin import wait_for_service_account
from tests.support import kube_raw
from tests.support.kube_raw import Obj, Reply
from tests.support.snapready_proc import ROOT
from tests.support.webhooks import (
    SCOPE_LABEL,
    ClusterSnapready,
    new_instance,
    snapready_on_cluster,
    wait_until,
)

IMAGE = (
    "registry.k8s.io/pause:3.10"
    "@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a"
)
"""Pinned by digest (no ``image-digest`` warning); never pulled: the cluster has no nodes."""
SPEC_HASH = "snapready.io/spec-hash"
POLICY_ANNOTATION = "snapready.io/policy"
INJECT_VALUES: dict[str, Any] = {
    "injectHelpers": True,
    "helpersImage": {"digest": "sha256:" + "5e" * 32},
}
"""Chart values that turn helper injection on (the chart refuses the all-zeros digest)."""
BASE_VALUES: dict[str, Any] = {"settings": {"storage": {"enabled": False}}}
"""No GCS bucket inspection (there is no GCS here; the bucket name is still checked)."""


def compliant_pod(name: str, labels: dict[str, str] | None = None) -> Obj:
    """A Pod that passes every snapshot rule: gVisor, pinned to N2, image pinned by digest."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "llm", **(labels or {})}},
        "spec": pod_spec(),
    }


def pod_spec() -> Obj:
    """The compliant pod spec of :func:`compliant_pod` (also for pod templates)."""
    return {
        "runtimeClassName": "gvisor",
        "nodeSelector": {"cloud.google.com/machine-family": "n2"},
        "containers": [
            {
                "name": "app",
                "image": IMAGE,
                "ports": [{"containerPort": 8080, "name": "http"}],
                "env": [{"name": "MODEL", "value": "small"}],
            }
        ],
    }


def violating_pod(name: str, labels: dict[str, str] | None = None) -> Obj:
    """:func:`compliant_pod` without ``runtimeClassName``: breaks ``gvisor-runtime`` only."""
    pod = compliant_pod(name, labels)
    del pod["spec"]["runtimeClassName"]
    return pod


def policy(name: str, match_labels: dict[str, str], storage_config: str) -> Obj:
    """A PodSnapshotPolicy as GKE's CRD accepts it (retention, grouping labels nested right)."""
    return {
        "apiVersion": "podsnapshot.gke.io/v1",
        "kind": "PodSnapshotPolicy",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": match_labels},
            "storageConfigName": storage_config,
            "snapshotScope": "whole-pod",
            "triggerConfig": {"type": "workload", "postCheckpoint": "resume"},
            "retentionConfig": {"lastAccessTimeout": "30d"},
        },
    }


def must(reply: Reply) -> Obj:
    """The body of a 2xx reply; fails with the API server's message otherwise."""
    assert reply.ok, f"{reply.status}: {reply.message or reply.body}"
    return reply.body


def snapready_hash(settings_file: Path | None, *docs: Obj, args: tuple[str, ...] = ()) -> list[str]:
    """``snapready hash --json`` (a subprocess, as a user runs it) of each document, in order.

    Each document is written to its own JSON file, like ``kubectl get -o json > pod.json``;
    ``settings_file`` is passed as ``--config`` (the webhook's settings,
    docs/concepts/fingerprint.md).
    """
    directory = Path(os.environ.get("TMPDIR", "/tmp"))
    files: list[Path] = []
    with contextlib.ExitStack() as stack:
        for index, doc in enumerate(docs):
            path = directory / f"snapready-e2e-{os.getpid()}-{id(doc)}-{index}.json"
            path.write_text(json.dumps(doc))
            stack.callback(path.unlink, missing_ok=True)
            files.append(path)
        config = ["--config", str(settings_file)] if settings_file else []
        env = {k: v for k, v in os.environ.items() if not k.startswith("SNAPREADY_")}
        result = subprocess.run(
            [sys.executable, "-m", "webhook", "hash", "--json", *config, *args, *map(str, files)],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            check=False,
        )
    assert result.returncode == 0, result.stderr
    entries: list[dict[str, Any]] = json.loads(result.stdout)
    assert len(entries) == len(docs), entries
    return [entry["fingerprint"] for entry in entries]


@dataclass
class Env:
    """One module's snapready on the control plane, with its namespaces.

    Attributes:
        api: admin ``ApiClient``.
        snapready: the installed instance (process, settings file, registered configurations).
        namespaces: role -> namespace name (roles given to :func:`environment`).
        storage_config: the PodSnapshotStorageConfig every policy names.
    """

    plane: ControlPlane
    api: client.ApiClient
    snapready: ClusterSnapready
    namespaces: dict[str, str]
    storage_config: str
    owned: list[str] = field(default_factory=list)

    @property
    def scope_mode(self) -> str:
        """The server's ``scope.mode`` from the chart's settings (``dynamic``/``static``), or
        ``static`` when the chart renders none."""
        settings = yaml.safe_load(self.snapready.settings_file.read_text())
        mode: str = (settings.get("scope") or {}).get("mode", "static")
        return mode

    @property
    def core(self) -> client.CoreV1Api:
        """Typed core/v1 API as admin."""
        return client.CoreV1Api(self.api)

    def new_namespace(self, role: str, labels: dict[str, str] | None = None) -> str:
        """A fresh namespace served by this instance (deleted with the environment)."""
        name = f"e2e-{role}-{new_instance()}"
        create_namespace(self.api, name, {**self.snapready.scope, **(labels or {})})
        self.owned.append(name)
        return name

    def create(self, obj: Obj, namespace: str, *, dry_run: bool = False) -> Reply:
        """Create ``obj`` in ``namespace`` through the API server (raw JSON in and out)."""
        return kube_raw.create(self.api, obj, namespace=namespace, dry_run=dry_run)

    def get(self, obj: Obj, namespace: str) -> Obj:
        """The live object as stored (``kubectl get -o json``)."""
        path = kube_raw.object_path(self.api, obj, namespace=namespace, named=True)
        return must(kube_raw.request(self.api, "GET", path))

    def hash(self, *docs: Obj, args: tuple[str, ...] = ()) -> list[str]:
        """``snapready hash --config <the chart's settings>`` of each document."""
        return snapready_hash(self.snapready.settings_file, *docs, args=args)

    def admissions(self, **match: Any) -> list[dict[str, Any]]:
        """snapready's ``admission`` log lines whose fields equal ``match``.

        Waits 0.3 s first: the server flushes admission lines every 100 ms.
        """
        time.sleep(0.3)
        return [
            line
            for line in self.snapready.process.admissions()
            if all(line.get(key) == value for key, value in match.items())
        ]


def create_namespace(api: client.ApiClient, name: str, labels: dict[str, str]) -> None:
    """Create a namespace and wait for its ``default`` ServiceAccount (pods need it)."""
    body = client.V1Namespace.model_validate({"metadata": {"name": name, "labels": labels}})
    client.CoreV1Api(api).create_namespace(body)
    wait_for_service_account(api, name)


def ensure(api: client.ApiClient, obj: Obj) -> None:
    """Create a cluster-scoped object unless it exists (shared by every instance; kept)."""
    reply = kube_raw.create(api, obj)
    assert reply.ok or reply.status == 409, reply.body


GVISOR = {
    "apiVersion": "node.k8s.io/v1",
    "kind": "RuntimeClass",
    "metadata": {"name": "gvisor"},
    "handler": "runsc",
}
"""GKE Sandbox's RuntimeClass: the RuntimeClass admission plugin rejects pods naming a missing
one, so it must exist (cluster-scoped, shared, left in place)."""


@contextlib.contextmanager
def environment(
    plane: ControlPlane,
    workdir: Path,
    namespaces: dict[str, dict[str, str]],
    *,
    policies: dict[str, dict[str, str]] | None = None,
    values: dict[str, Any] | None = None,
) -> Iterator[Env]:
    """snapready installed from the chart, serving ``namespaces`` (see the module docstring).

    Args:
        namespaces: role -> extra namespace labels (e.g. ``{"snapready.io/enforcement":
            "warn"}``); each gets a fresh name and the instance's scope label.
        policies: role -> ``matchLabels`` of a policy ``llm-policy`` created in that namespace
            before snapready starts (default: ``{"app": "llm"}`` in every namespace).
        values: chart values over :data:`BASE_VALUES`.
    """
    api = plane.api_client()
    instance = new_instance()
    scope = {SCOPE_LABEL: instance}
    storage_config = f"e2e-{instance}"
    names = {role: f"e2e-{role}-{instance}" for role in namespaces}
    selectors = policies if policies is not None else {role: {"app": "llm"} for role in namespaces}
    storage = {
        "apiVersion": "podsnapshot.gke.io/v1",
        "kind": "PodSnapshotStorageConfig",
        "metadata": {"name": storage_config, "labels": scope},
        "spec": {"snapshotStorageConfig": {"gcs": {"bucket": f"snapready-e2e-{instance}"}}},
    }
    created: list[str] = []
    try:
        ensure(api, GVISOR)
        must(kube_raw.create(api, storage))
        for role, labels in namespaces.items():
            create_namespace(api, names[role], {**scope, **labels})
            created.append(names[role])
        for role, match_labels in selectors.items():
            body = policy("llm-policy", match_labels, storage_config)
            must(kube_raw.create(api, body, namespace=names[role]))
        with snapready_on_cluster(
            plane,
            api,
            workdir,
            values={**BASE_VALUES, **(values or {})},
            instance=instance,
        ) as snapready:
            env = Env(plane, api, snapready, names, storage_config, owned=created)
            wait_until_serving(env, next(iter(names.values())))
            yield env
    finally:
        core = client.CoreV1Api(api)
        for name in created:
            with contextlib.suppress(ApiException):
                core.delete_namespace(name, propagation_policy="Background")
        kube_raw.delete(api, storage)
        api.close()  # type: ignore[no-untyped-call]


def wait_until_serving(env: Env, namespace: str, timeout: float = 30.0) -> None:
    """Until the API server calls this snapready: a selected pod (dry run) comes back stamped
    with the spec-hash and a pod without gVisor is denied by the validating webhook."""

    def stamped() -> bool:
        reply = env.create(compliant_pod("probe"), namespace, dry_run=True)
        return reply.ok and SPEC_HASH in reply.annotations()

    def denied() -> bool:
        reply = env.create(violating_pod("probe"), namespace, dry_run=True)
        return reply.status == 403 and "gvisor-runtime" in reply.message

    wait_until("the mutating webhook to stamp a selected pod", stamped, timeout)
    wait_until("the validating webhook to deny a pod without gVisor", denied, timeout)
