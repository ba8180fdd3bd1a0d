"""snapready on the envtest control plane, installed the way the Helm chart installs it.

:func:`snapready_on_cluster` renders the chart with the real Helm engine, creates its
ServiceAccount and RBAC objects, registers the chart's Mutating/ValidatingWebhookConfiguration
with ``clientConfig.service`` replaced by ``url: https://127.0.0.1:PORT/mutate|/validate`` and
the test CA as ``caBundle``, and runs a ``snapready serve`` subprocess on that port as the
ServiceAccount (a TokenRequest token, not admin) with the chart's own ``settings.yaml``::

    with snapready_on_cluster(plane, admin, tmp, values={"injectHelpers": True, ...}) as sr:
        core.create_namespace(V1Namespace(metadata={"name": ns, "labels": sr.scope}))
        ...  # pods of that namespace now go through this snapready

Scoping, so that several instances (xdist workers, other test tiers) share one control plane
without seeing each other's requests: each instance's webhooks also require the namespace label
``snapready.test/instance=<id>`` (``sr.scope``), added to the chart's ``namespaceSelector``, and a
``matchCondition`` lets cluster-scoped objects (PodSnapshotStorageConfigs, which ignore
``namespaceSelector``) through only when they carry the same label. Everything else in the
configurations is the chart's.

Readiness: ``/readyz`` (caches synced, scope written) says nothing about the API server having
picked up the webhook configurations; :func:`wait_until` polls a caller-given probe (e.g. a
dry-run create of a selected pod until it comes back stamped) instead. Benchmarks: label the
measured namespaces with ``sr.scope``; the extra ``matchCondition`` applies to every request.
"""

from __future__ import annotations

import contextlib
import copy
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.envtest.controlplane import ControlPlane
from tests.envtest.plugin import service_account_token
from tests.support import kube_raw
from tests.support.helm_support import Obj, by_kind, objects, one, render, settings_of
from tests.support.ports import free_port
from tests.support.snapready_proc import (
    SnapreadyProcess,
    ca_bundle,
    generate_certs,
    start_snapready,
)

SCOPE_LABEL = "snapready.test/instance"
"""Namespace (and cluster-scoped object) label that routes requests to one test instance."""
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
"""The chart's RBAC objects, created with its ServiceAccount (Roles: e.g. a leader-election Lease
in the release namespace)."""
T = TypeVar("T")


def new_instance() -> str:
    """A fresh instance id (6 hex digits) for :func:`snapready_on_cluster`."""
    return secrets.token_hex(3)


def render_chart(
    values: dict[str, Any] | None = None, *, release: str, namespace: str
) -> list[Obj]:
    """Every object of ``helm template`` for ``release`` in ``namespace`` (real Helm engine)."""
    return objects(render(values, name=release, namespace=namespace))


def scope_condition(label_value: str) -> dict[str, str]:
    """A ``matchCondition``: namespaced requests pass (``namespaceSelector`` scopes them); a
    cluster-scoped object passes only with ``snapready.test/instance=<label_value>``.

    Every access is guarded: a cluster-scoped request has no ``request.namespace`` key at all,
    and an evaluation error under ``failurePolicy: Fail`` rejects the request.
    """
    labels = "object.metadata.labels"
    expression = (
        '(has(request.namespace) && request.namespace != "") || (object != null && '
        f'has(object.metadata) && has({labels}) && "{SCOPE_LABEL}" in {labels} && '
        f'{labels}["{SCOPE_LABEL}"] == "{label_value}")'
    )
    return {"name": "snapready-test-instance", "expression": expression}


def point_at(config: Obj, url: str, ca: str, *, scope: dict[str, str] | None = None) -> Obj:
    """A copy of a rendered webhook configuration that calls ``url`` + each webhook's service
    path, trusting ``ca`` (base64 PEM); with ``scope``, also restricted to namespaces carrying
    those labels (and cluster-scoped objects carrying ``SCOPE_LABEL``, see
    :func:`scope_condition`)."""
    pointed = copy.deepcopy(config)
    for hook in pointed["webhooks"]:
        path = hook["clientConfig"]["service"]["path"]
        hook["clientConfig"] = {"url": f"{url}{path}", "caBundle": ca}
        if scope:
            selector = hook.setdefault("namespaceSelector", {})
            selector.setdefault("matchLabels", {}).update(scope)
            if SCOPE_LABEL in scope:
                conditions = hook.setdefault("matchConditions", [])
                conditions.append(scope_condition(scope[SCOPE_LABEL]))
    return pointed


def wait_until(what: str, probe: Callable[[], T | None], timeout: float = 30.0) -> T:
    """Call ``probe()`` every 50 ms until it returns something truthy; return it.

    Raises:
        TimeoutError: ``timeout`` seconds passed (names ``what`` and the last value).
    """
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.05)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


@dataclass
class ClusterSnapready:
    """A snapready instance serving the control plane (see :func:`snapready_on_cluster`).

    Attributes:
        release, namespace: the chart release name and its namespace (the ServiceAccount's).
        instance: the value of ``SCOPE_LABEL`` that routes requests here.
        process: the ``snapready serve`` subprocess.
        settings_file: the chart's ``settings.yaml`` the server runs with (also the
            ``--config`` for ``snapready hash``/``diff``, as docs/concepts/fingerprint.md says).
        rendered: every object the chart rendered.
        configurations: the webhook configurations as registered (url, caBundle, scope).
    """

    release: str
    namespace: str
    instance: str
    process: SnapreadyProcess
    settings_file: Path
    rendered: list[Obj]
    configurations: list[Obj] = field(default_factory=list)

    @property
    def scope(self) -> dict[str, str]:
        """Labels a namespace needs for its requests to reach this instance."""
        return {SCOPE_LABEL: self.instance}


def _create_all(api: client.ApiClient, objs: list[Obj], created: list[Obj]) -> None:
    for obj in objs:
        reply = kube_raw.create(api, obj)
        if not reply.ok:
            raise RuntimeError(f"creating {obj['kind']}/{obj['metadata']['name']}: {reply.body}")
        created.append(obj)


@contextlib.contextmanager
def snapready_on_cluster(
    plane: ControlPlane,
    api: client.ApiClient,
    workdir: Path,
    *,
    values: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    instance: str | None = None,
    timeout: float = 30.0,
) -> Iterator[ClusterSnapready]:
    """Install and run snapready against ``plane`` as the chart would; undo it all on exit.

    Steps: render the chart (``values``; release ``snapready-<hex>`` in a namespace of that
    name, created here); create its ServiceAccount and RBAC objects (``RBAC_KINDS``); start
    ``snapready serve --kubeconfig`` with a token of that ServiceAccount, the chart's
    ``settings.yaml`` and ``POD_NAMESPACE`` set to the release namespace as in the chart's pod
    (``env`` on top), after creating the webhook configurations pointed at its port and scoped to
    ``ClusterSnapready.scope`` (in the chart's dynamic ``webhookScope`` the leader patches their
    ``matchConditions``, and ``/readyz`` includes that); wait for ``/readyz``.

    Teardown (also after a failure part-way): the webhook configurations first (so nothing
    calls a stopped server), then the process (by pid), then the RBAC objects and namespace.

    Args:
        api: an admin ``ApiClient`` (creates cluster-scoped objects).
        workdir: certificates, kubeconfig, settings and the server log go here.
        instance: the ``SCOPE_LABEL`` value (default: random); choose it to create labelled
            namespaces and policies before the server starts (its first list then has them).
    """
    instance = instance or new_instance()
    release = f"snapready-{instance}"
    rendered = render_chart(values, release=release, namespace=release)
    workdir.mkdir(parents=True, exist_ok=True)
    settings_file = workdir / "settings.yaml"
    settings = settings_of(rendered)
    settings_file.write_text(yaml.safe_dump(settings))
    core = client.CoreV1Api(api)
    created: list[Obj] = []
    registered: list[Obj] = []
    process: SnapreadyProcess | None = None
    namespace_body = client.V1Namespace.model_validate({"metadata": {"name": release}})
    core.create_namespace(namespace_body)
    try:
        account = one(rendered, "ServiceAccount")
        rbac = [account, *(obj for kind in RBAC_KINDS for obj in by_kind(rendered, kind))]
        _create_all(api, rbac, created)
        token = service_account_token(api, release, account["metadata"]["name"])
        kubeconfig = plane.token_kubeconfig(workdir / "kubeconfig", token, namespace=release)
        cert_dir = generate_certs(workdir / "certs")
        port = free_port()
        scope = {SCOPE_LABEL: instance}
        url = f"https://127.0.0.1:{port}"
        configurations = [
            point_at(config, url, ca_bundle(cert_dir), scope=scope)
            for kind in WEBHOOK_KINDS
            for config in by_kind(rendered, kind)
        ]
        # Registered before the server starts: with the chart's dynamic webhookScope the
        # leader patches their matchConditions and /readyz waits for that; a configuration
        # created after the leader started is only found at its next recheck (~30 s). Until
        # the server answers, only this instance's namespaces are affected.
        _create_all(api, configurations, registered)
        process = start_snapready(
            workdir,
            cert_dir,
            kubeconfig=kubeconfig,
            config_file=settings_file,
            env={"POD_NAMESPACE": release, **(env or {})},
            port=port,
            timeout=timeout,
        )
        yield ClusterSnapready(
            release, release, instance, process, settings_file, rendered, configurations
        )
    finally:
        for obj in reversed(registered):
            kube_raw.delete(api, obj)
        if process is not None:
            process.stop()
        for obj in reversed(created):
            kube_raw.delete(api, obj, namespace=release)
        with contextlib.suppress(ApiException):
            core.delete_namespace(release, propagation_policy="Background")


__all__ = [
    "SCOPE_LABEL",
    "WEBHOOK_KINDS",
    "ClusterSnapready",
    "new_instance",
    "point_at",
    "render_chart",
    "scope_condition",
    "snapready_on_cluster",
    "wait_until",
]
