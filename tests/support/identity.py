"""snapready's own identity in real-API tests: a ServiceAccount with the Helm chart's RBAC.

In-process cluster sources and ``snapready serve`` processes of the cluster, CLI and e2e tiers
run as a ServiceAccount bound to what the chart grants (rendered at run time with the real Helm
engine, never copied), not as admin: on GKE, snapready holds exactly those rights, and GKE's guard
refuses its PodSnapshot writes (the control plane carries the guard, ``tests/envtest``). Admin
stays for test setup (namespaces, pods, policies).

:func:`install_identity` renders the chart for a release ``snapready-<hex>`` in the test's
namespace, creates the chart's ServiceAccount, ClusterRole(s), ClusterRoleBinding(s), Role(s) and
RoleBinding(s) there (cluster-scoped names carry the release's random suffix: parallel xdist
workers never collide), and writes a token kubeconfig. Grants the chart limits by
``resourceNames`` to its own objects (the leader-election Lease, the webhook configurations the
scope controller patches) are re-targeted to the names the test gives (``lease_name``,
``configuration``); nothing else of a rule changes. Fixture ``snapready_identity`` (a factory)
removes everything after the test.

The ServiceAccount's name starts with ``snapready``: the envtest plugin's end-of-run audit check
(``tests/envtest/plugin.py``, ``snapready_writes``) fails the run on any PodSnapshot write by it.
"""

from __future__ import annotations

import contextlib
import copy
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest
import yaml
from kubernetes import client

from tests.envtest.controlplane import ControlPlane
from tests.envtest.plugin import service_account_token, wait_for
from tests.support import kube_raw
from tests.support.helm_support import Obj, by_kind, objects, one, render, settings_of

RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
LEASES = "leases"
CONFIGURATIONS = ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")


class NotSnapreadyIdentityError(AssertionError):
    """A kubeconfig given to snapready in a real-API test authenticates with a client
    certificate (admin, GKE's controller), not a ServiceAccount token."""


@dataclass
class SnapreadyIdentity:
    """snapready's ServiceAccount with the chart's RBAC (see :func:`install_identity`).

    Attributes:
        kubeconfig: a token kubeconfig of the ServiceAccount (default namespace: ``namespace``).
        namespace: where the ServiceAccount, its Roles and RoleBindings live.
        release: the chart release (default ``snapready-<hex>``, then also the ServiceAccount).
        username: ``system:serviceaccount:<namespace>:<release>``.
        lease_name: the Lease the chart's Role lets it write (the chart's own name unless the
            test gave one).
        configuration: the webhook configuration name the ClusterRole lets it patch.
        settings: the chart's server settings for these values (``settings.yaml``, parsed).
        rendered: every object the chart rendered.
        created: the RBAC objects created (deleted again by :func:`install_identity`).
    """

    kubeconfig: Path
    namespace: str
    release: str
    username: str
    lease_name: str
    configuration: str
    settings: Obj
    rendered: list[Obj]
    created: list[Obj] = field(default_factory=list)


def _retarget(rules: list[Obj], fullname: str, names: dict[str, str]) -> list[Obj]:
    """``rules`` with ``resourceNames: [fullname]`` replaced by the test's name of each resource
    of that rule (``names`` by resource); every other field as the chart wrote it."""
    result = copy.deepcopy(rules)
    for rule in result:
        listed = rule.get("resourceNames")
        if not listed or fullname not in listed:
            continue
        renamed = [names.get(resource, fullname) for resource in rule.get("resources", [])]
        others = [name for name in listed if name != fullname]
        rule["resourceNames"] = sorted({*others, *renamed})
    return result


def chart_rbac(
    values: dict[str, Any] | None,
    namespace: str,
    *,
    release: str | None = None,
    lease_name: str | None = None,
    configuration: str | None = None,
) -> tuple[str, list[Obj], list[Obj]]:
    """(release, rendered objects, the ServiceAccount and RBAC objects to create) for the chart
    rendered with ``values`` as ``release`` (default ``snapready-<hex>``) in ``namespace``."""
    release = release or f"snapready-{secrets.token_hex(3)}"
    rendered = objects(render(values, name=release, namespace=namespace))
    account = one(rendered, "ServiceAccount")
    fullname = account["metadata"]["name"]
    names = {LEASES: lease_name or fullname}
    names.update(dict.fromkeys(CONFIGURATIONS, configuration or fullname))
    wanted = [copy.deepcopy(account)]
    for kind in RBAC_KINDS:
        for chart_obj in by_kind(rendered, kind):
            obj = copy.deepcopy(chart_obj)
            if kind in ("Role", "RoleBinding"):
                obj["metadata"]["namespace"] = namespace
            if "rules" in obj:
                obj["rules"] = _retarget(obj["rules"], fullname, names)
            wanted.append(obj)
    return release, rendered, wanted


def chart_values(settings: dict[str, Any]) -> dict[str, Any]:
    """The chart values that grant what snapready settings (overrides as given to
    ``make_settings``) need: ``lifecycle.prune``/``refresh`` (delete on podsnapshots, create on
    manual triggers, workload lists), ``origin.record_config`` (``staleConfig``: Secrets and
    ConfigMaps metadata) and ``reports.api`` (writes on that report API's reports, workload
    lists). The chart's defaults match the settings' defaults."""
    values: dict[str, Any] = {}
    lifecycle = settings.get("lifecycle") or {}
    if not isinstance(lifecycle, dict):
        lifecycle = lifecycle.model_dump()
    chosen = {key: lifecycle[key] for key in ("prune", "refresh") if key in lifecycle}
    if chosen:
        values["lifecycle"] = chosen
    origin = settings.get("origin") or {}
    if not isinstance(origin, dict):
        origin = origin.model_dump()
    if "record_config" in origin:
        values["staleConfig"] = bool(origin["record_config"])
    reports = settings.get("reports") or {}
    if not isinstance(reports, dict):
        reports = reports.model_dump()
    if "api" in reports:  # the grant on the one report API written (value reports.api)
        values["reports"] = {"api": reports["api"]}
    return values


def _authorized(api: client.ApiClient, user: str, namespace: str) -> bool:
    """RBAC lets ``user`` list pods cluster-wide (the ClusterRoleBinding is in effect)."""
    review = client.V1SubjectAccessReview.model_validate(
        {
            "spec": {
                "user": user,
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"],
                "resourceAttributes": {"resource": "pods", "verb": "list"},
            }
        }
    )
    status = client.AuthorizationV1Api(api).create_subject_access_review(review).status
    return bool(status is not None and status.allowed)


@contextlib.contextmanager
def install_identity(
    plane: ControlPlane,
    api: client.ApiClient,
    workdir: Path,
    namespace: str,
    values: dict[str, Any] | None = None,
    *,
    lease_name: str | None = None,
    configuration: str | None = None,
    release: str | None = None,
) -> Iterator[SnapreadyIdentity]:
    """snapready's ServiceAccount in ``namespace`` with the chart's RBAC for ``values``; removed
    on exit (ClusterRole(s) and binding(s) too; the namespace is the caller's).

    Args:
        api: an admin client (creates the RBAC objects).
        workdir: where the kubeconfig is written.
        values: the chart values the test's snapready settings imply (e.g.
            ``{"lifecycle": {"prune": "on"}}`` when the test prunes: the chart then grants delete
            on podsnapshots).
        lease_name, configuration: the names the test's settings use for the leader-election
            Lease and the scope controller's webhook configurations.
        release: the release name (default ``snapready-<hex>``; one without ``snapready`` in it
            names the ServiceAccount ``<release>-snapready``, which the end-of-run audit check
            does not look at: for tests that write PodSnapshots as it on purpose).
    """
    release, rendered, wanted = chart_rbac(
        values, namespace, release=release, lease_name=lease_name, configuration=configuration
    )
    created: list[Obj] = []
    try:
        for obj in wanted:
            reply = kube_raw.create(api, obj)
            if not reply.ok:
                raise RuntimeError(
                    f"creating {obj['kind']}/{obj['metadata']['name']}: {reply.body}"
                )
            created.append(obj)
        account = wanted[0]["metadata"]["name"]
        username = f"system:serviceaccount:{namespace}:{account}"
        wait_for("the chart's RBAC in effect", lambda: _authorized(api, username, namespace), 10)
        token = service_account_token(api, namespace, account)
        workdir.mkdir(parents=True, exist_ok=True)
        kubeconfig = plane.token_kubeconfig(
            workdir / f"{release}.kubeconfig", token, namespace=namespace, user=account
        )
        settings = settings_of(rendered)
        yield SnapreadyIdentity(
            kubeconfig=kubeconfig,
            namespace=namespace,
            release=release,
            username=username,
            lease_name=lease_name or str(settings["leader"]["lease_name"]),
            configuration=configuration or account,
            settings=settings,
            rendered=rendered,
            created=created,
        )
    finally:
        for obj in reversed(created):
            kube_raw.delete(api, obj, namespace=namespace)


def require_token(kubeconfig: Path | str) -> Path:
    """``kubeconfig`` when its current user authenticates with a bearer token (a ServiceAccount,
    e.g. :func:`install_identity`'s); else :class:`NotSnapreadyIdentityError`.

    The guard of real-API tests: no snapready process or in-process cluster source runs as
    admin (``system:masters``) or as GKE's controller (client certificates).
    """
    path = Path(kubeconfig)
    config = yaml.safe_load(path.read_text())
    current = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    user = next(u for u in config["users"] if u["name"] == current["context"]["user"])["user"]
    if not user.get("token") or user.get("client-certificate") or user.get("client-key"):
        raise NotSnapreadyIdentityError(
            f"{path}: snapready must run as its ServiceAccount with the chart's RBAC "
            "(tests/support/identity.py), not with a client certificate (admin)"
        )
    return path


class IdentityFactory(Protocol):
    """The ``snapready_identity`` fixture: ``(namespace, values=None, *, lease_name=None,
    configuration=None, plane=None, release=None) -> SnapreadyIdentity``."""

    def __call__(
        self,
        namespace: str,
        values: dict[str, Any] | None = None,
        *,
        lease_name: str | None = None,
        configuration: str | None = None,
        plane: ControlPlane | None = None,
        release: str | None = None,
    ) -> SnapreadyIdentity:
        """Install an identity (see :func:`install_identity`)."""
        ...


@pytest.fixture
def snapready_identity(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[IdentityFactory]:
    """A factory of snapready identities (:func:`install_identity`) on the run's control plane
    (or ``plane``); every one is removed after the test."""
    stack = contextlib.ExitStack()
    clients: list[client.ApiClient] = []

    def factory(
        namespace: str,
        values: dict[str, Any] | None = None,
        *,
        lease_name: str | None = None,
        configuration: str | None = None,
        plane: ControlPlane | None = None,
        release: str | None = None,
    ) -> SnapreadyIdentity:
        target = plane or control_plane
        api = target.api_client()
        clients.append(api)
        return stack.enter_context(
            install_identity(
                target,
                api,
                tmp_path_factory.mktemp("identity"),
                namespace,
                values,
                lease_name=lease_name,
                configuration=configuration,
                release=release,
            )
        )

    with stack:
        yield factory
    for api in clients:
        api.close()  # type: ignore[no-untyped-call]


__all__ = [
    "IdentityFactory",
    "NotSnapreadyIdentityError",
    "SnapreadyIdentity",
    "chart_rbac",
    "chart_values",
    "install_identity",
    "require_token",
    "snapready_identity",
]
