"""The webhook-scope controller on a real API server: what reaches snapready when it is down.

snapready's own webhook configurations (rendered from the chart, ``clientConfig`` pointed at a
closed port: snapready stopped, ``failurePolicy: Fail``) get the ``snapready-scope`` condition from
a running cluster source; then, with snapready stopped, the API server itself decides: pods in
namespaces without policies and unselected pods are created, selected pods are refused. For
isolation on the shared control plane each configuration is limited to the test's namespaces and
starts with a ``false`` scope (a rendered chart has no condition at all).
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.envtest.controlplane import ControlPlane
from tests.envtest.plugin import unique_name, wait_for, wait_for_service_account
from tests.support import helm_support
from tests.support.identity import IdentityFactory, require_token
from tests.support.ports import free_port
from webhook.base.config import LeaderSettings, ScopeSettings, Settings, SourceSettings
from webhook.base.tracking import OutcomeSettings
from webhook.cluster.manager import Cluster, start_cluster
from webhook.kube.scope import CONDITION_NAME

GROUP, VERSION = "podsnapshot.gke.io", "v1"


@pytest.fixture
def namespaces(
    kube_admin: client.ApiClient, podsnapshot_crds: list[str], request: pytest.FixtureRequest
) -> Iterator[list[str]]:
    """Two fresh namespaces: the first gets policies, the second never does."""
    core = client.CoreV1Api(kube_admin)
    names = [unique_name(f"{request.node.name}-{i}") for i in (1, 2)]
    for name in names:
        core.create_namespace(client.V1Namespace.model_validate({"metadata": {"name": name}}))
        wait_for_service_account(kube_admin, name)
    yield names
    for name in names:
        with contextlib.suppress(ApiException):
            core.delete_namespace(name, propagation_policy="Background")


@pytest.fixture
def configurations(
    control_plane: ControlPlane, kube_admin: client.ApiClient, namespaces: list[str]
) -> Iterator[str]:
    """The chart's two webhook configurations, snapready stopped; their (shared) name."""
    release = unique_name("scope", prefix="sr")[:40]
    objs = helm_support.objects(helm_support.render(name=release, namespace="snapready-system"))
    ca_bundle = base64.b64encode(control_plane.ca_file.read_bytes()).decode()
    closed = f"https://127.0.0.1:{free_port()}"
    admission = client.AdmissionregistrationV1Api(kube_admin)
    name = ""
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        obj = helm_support.one(objs, kind)
        name = obj["metadata"]["name"]
        # The ownership webhooks (pod UPDATEs and Bindings carrying snapready's metadata) and
        # the gated-placement one render their own matchConditions and are not about the
        # scope: left out of this copy.
        owners = (
            "ownership.snapready.io",
            "binding-ownership.snapready.io",
            "scheduling.snapready.io",
        )
        obj["webhooks"] = [w for w in obj["webhooks"] if w["name"] not in owners]
        for webhook in obj["webhooks"]:
            assert "matchConditions" not in webhook, "the chart must render no matchConditions"
            path = "/mutate" if kind.startswith("Mutating") else "/validate"
            webhook["clientConfig"] = {"url": closed + path, "caBundle": ca_bundle}
            webhook["namespaceSelector"]["matchExpressions"].append(
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces}
            )
            webhook["matchConditions"] = [{"name": CONDITION_NAME, "expression": "false"}]
            # Policies are created and changed while "snapready is stopped" here: leave the
            # snapshot CRDs (always in scope) out of this copy.
            webhook["rules"] = [
                r for r in webhook["rules"] if "podsnapshot.gke.io" not in r["apiGroups"]
            ]
        if kind.startswith("Mutating"):
            admission.create_mutating_webhook_configuration(
                client.V1MutatingWebhookConfiguration.model_validate(obj)
            )
        else:
            admission.create_validating_webhook_configuration(
                client.V1ValidatingWebhookConfiguration.model_validate(obj)
            )
    yield name
    with contextlib.suppress(ApiException):
        admission.delete_mutating_webhook_configuration(name)
    with contextlib.suppress(ApiException):
        admission.delete_validating_webhook_configuration(name)


def settings(
    identities: IdentityFactory, name: str, lease_namespace: str, mode: str = "dynamic"
) -> Settings:
    """Cluster mode as snapready's ServiceAccount with the chart's RBAC (its Lease and webhook
    configuration grants re-targeted to this test's), scope reconciled on configuration
    ``name``, a fast recheck."""
    lease = f"lease-{name}"[:60]
    identity = identities(lease_namespace, lease_name=lease, configuration=name)
    return Settings(
        source=SourceSettings(kind="kube", kubeconfig=require_token(identity.kubeconfig)),
        scope=ScopeSettings.model_validate(
            {
                "mode": mode,
                "mutating_configuration": name,
                "validating_configuration": name,
                "recheck_seconds": 1.0,
            }
        ),
        leader=LeaderSettings(lease_name=lease, lease_namespace=lease_namespace),
        outcomes=OutcomeSettings(namespaces=["t-untracked"]),  # the scope is what is tested
    )


@contextlib.contextmanager
def running(config: Settings) -> Iterator[Cluster]:
    """A started cluster source (caches, leader election, scope controller); stopped after."""
    source = start_cluster(config)
    try:
        yield source
    finally:
        source.stop()


def create_policy(api: client.ApiClient, namespace: str, name: str, labels: dict[str, str]) -> None:
    """A PodSnapshotPolicy selecting ``labels`` (matchLabels)."""
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodSnapshotPolicy",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": labels},
            "storageConfigName": "snapshots",
            "triggerConfig": {"type": "workload"},
        },
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, "podsnapshotpolicies", body
    )


def conditions(api: client.ApiClient, name: str) -> list[list[dict[str, Any]]]:
    """The matchConditions of every webhook of both configurations, as plain dicts."""
    admission = client.AdmissionregistrationV1Api(api)
    found = []
    for config in (
        admission.read_mutating_webhook_configuration(name),
        admission.read_validating_webhook_configuration(name),
    ):
        for webhook in config.webhooks or []:
            found.append([c.to_dict() for c in webhook.match_conditions or []])
    return found


def scope_mentions(api: client.ApiClient, name: str, text: str) -> bool:
    """Every webhook carries exactly our condition, and its expression contains ``text``."""
    found = conditions(api, name)
    return all(len(c) == 1 and text in c[0]["expression"] for c in found) and bool(found)


def create_pod(api: client.ApiClient, namespace: str, labels: dict[str, str]) -> str | None:
    """Create a pod; None when admitted, else the API server's refusal."""
    body = {
        "metadata": {"generateName": "p-", "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    try:
        client.CoreV1Api(api).create_namespaced_pod(namespace, client.V1Pod.model_validate(body))
    except ApiException as error:
        return str(error.body)
    return None


def test_with_snapready_stopped_only_selected_pods_are_refused(
    snapready_identity: IdentityFactory,
    kube_admin: client.ApiClient,
    namespaces: list[str],
    configurations: str,
) -> None:
    with_policy, without = namespaces
    create_policy(kube_admin, with_policy, "llm-policy", {"app": "llm"})
    with running(settings(snapready_identity, configurations, with_policy)) as source:
        wait_for("scope synced", lambda: source.state().synced, timeout=30)
        assert source.state().scope_synced is True
        assert scope_mentions(kube_admin, configurations, with_policy)
    # snapready is stopped (and its URL was never served): the API server alone decides.
    assert create_pod(kube_admin, without, {"app": "llm"}) is None
    assert create_pod(kube_admin, with_policy, {"app": "web"}) is None
    assert create_pod(kube_admin, with_policy, {}) is None
    refusal = create_pod(kube_admin, with_policy, {"app": "llm"})
    assert refusal is not None and "failed calling webhook" in refusal


def test_policies_added_changed_deleted_while_running_are_covered_within_5s(
    snapready_identity: IdentityFactory,
    kube_admin: client.ApiClient,
    namespaces: list[str],
    configurations: str,
) -> None:
    with_policy, _ = namespaces
    custom = client.CustomObjectsApi(kube_admin)
    with running(settings(snapready_identity, configurations, with_policy)) as source:
        wait_for("scope synced", lambda: source.state().synced, timeout=30)
        assert create_pod(kube_admin, with_policy, {"app": "llm"}) is None  # no policy yet

        started = time.monotonic()
        create_policy(kube_admin, with_policy, "llm-policy", {"app": "llm"})
        wait_for("refusal", lambda: create_pod(kube_admin, with_policy, {"app": "llm"}), 5)
        assert time.monotonic() - started < 5

        patch = {"spec": {"selector": {"matchLabels": {"app": "llm-v2"}}}}
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, with_policy, "podsnapshotpolicies", "llm-policy", patch
        )
        wait_for("v2 refused", lambda: create_pod(kube_admin, with_policy, {"app": "llm-v2"}), 5)
        wait_for(
            "v1 created", lambda: create_pod(kube_admin, with_policy, {"app": "llm"}) is None, 5
        )

        custom.delete_namespaced_custom_object(
            GROUP, VERSION, with_policy, "podsnapshotpolicies", "llm-policy"
        )
        wait_for(
            "v2 created", lambda: create_pod(kube_admin, with_policy, {"app": "llm-v2"}) is None, 5
        )


def test_two_replicas_elect_one_leader_and_both_are_ready_once_the_scope_is_written(
    snapready_identity: IdentityFactory,
    kube_admin: client.ApiClient,
    namespaces: list[str],
    configurations: str,
) -> None:
    """Every ready replica reconciles the scope (issue 27: no gap at a hand-over); one leads the
    other writes (outcomes, Events, records), and both turn ready once the scope is written."""
    with_policy, _ = namespaces
    create_policy(kube_admin, with_policy, "llm-policy", {"app": "llm"})
    config = settings(snapready_identity, configurations, with_policy)
    with running(config) as first, running(config) as second:
        wait_for("both synced", lambda: first.state().synced and second.state().synced, 30)
        leaders = [s.state().details.get("leader", "") for s in (first, second)]
        assert sorted(leaders) == ["follower", "leader"], leaders
    managers = client.AdmissionregistrationV1Api(kube_admin).read_mutating_webhook_configuration(
        configurations
    )
    assert managers.metadata is not None
    owners = {entry.manager for entry in managers.metadata.managed_fields or []}
    assert "snapready" in owners


def test_not_ready_until_the_configuration_exists(
    snapready_identity: IdentityFactory, kube_admin: client.ApiClient, namespaces: list[str]
) -> None:
    name = unique_name("missing", prefix="sr")
    with running(settings(snapready_identity, name, namespaces[0])) as source:
        wait_for(
            "status", lambda: "error" in str(source.state().details.get("webhookScope", "")), 30
        )
        assert not source.state().synced
        assert source.state().scope_synced is False


def test_static_mode_removes_a_leftover_scope_and_does_not_gate_readiness(
    snapready_identity: IdentityFactory,
    kube_admin: client.ApiClient,
    namespaces: list[str],
    configurations: str,
) -> None:
    with running(settings(snapready_identity, configurations, namespaces[0], "static")) as source:
        wait_for("synced", lambda: source.state().synced, timeout=30)
        wait_for("no condition", lambda: conditions(kube_admin, configurations) == [[], []], 10)


def test_a_failed_write_keeps_the_last_conditions(
    control_plane: ControlPlane,
    kube_admin: client.ApiClient,
    namespaces: list[str],
    configurations: str,
    tmp_path: Path,
    *,
    snapready_identity: IdentityFactory,
) -> None:
    with_policy, _ = namespaces
    create_policy(kube_admin, with_policy, "llm-policy", {"app": "llm"})
    with running(settings(snapready_identity, configurations, with_policy)) as source:
        wait_for("scope synced", lambda: source.state().synced, timeout=30)
    before = conditions(kube_admin, configurations)
    # A replica that may read but not write: leader of its own lease, no patch permission.
    token_config = read_only_kubeconfig(control_plane, kube_admin, with_policy, tmp_path)
    create_policy(kube_admin, with_policy, "web-policy", {"app": "web"})
    config = settings(snapready_identity, configurations, with_policy)
    config.source.kubeconfig = token_config
    with running(config) as source:
        wait_for(
            "error", lambda: "error" in str(source.state().details.get("webhookScope", "")), 30
        )
        assert source.state().scope_synced is False
    assert conditions(kube_admin, configurations) == before


def read_only_kubeconfig(
    control_plane: ControlPlane, api: client.ApiClient, namespace: str, tmp_path: Path
) -> Path:
    """A ServiceAccount that may read everything and hold leases, but not patch webhooks."""
    from tests.envtest.plugin import service_account_token  # noqa: PLC0415

    rbac = client.RbacAuthorizationV1Api(api)
    name = unique_name("reader", prefix="sr")
    rules = [
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]},
        {"nonResourceURLs": ["/version"], "verbs": ["get"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"]},
    ]
    rbac.create_cluster_role(
        client.V1ClusterRole.model_validate({"metadata": {"name": name}, "rules": rules})
    )
    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }
    rbac.create_cluster_role_binding(client.V1ClusterRoleBinding.model_validate(binding))
    token = service_account_token(api, namespace, name)
    return control_plane.token_kubeconfig(
        tmp_path / "reader.kubeconfig", token, namespace=namespace
    )


def test_retries_back_off_and_a_repeated_error_is_warned_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A configuration that stays missing (deleted while running, or never installed): the
    controller retries after 2 s doubling up to 8 s (scaled down here), warns once per distinct
    error, and a wake-up (policy change) retries at once. No API server is needed to show the
    schedule: the transport answers 404 like one without the configuration."""
    from webhook.cluster.api.syncing import NotServed  # noqa: PLC0415
    from webhook.cluster.controllers import scope as scope_module  # noqa: PLC0415
    from webhook.kube.matching import PolicyIndex  # noqa: PLC0415

    monkeypatch.setattr(scope_module, "FIRST_SYNC_RETRY", 0.05)
    monkeypatch.setattr(scope_module, "MAX_RETRY", 0.2)
    calls: list[float] = []

    class Missing:
        def get(self, path: str) -> Any:
            calls.append(time.monotonic())
            raise NotServed(f"{path}: 404 Not Found")

        def patch(self, path: str, ops: Any) -> Any:
            raise AssertionError("nothing to patch")

    controller = scope_module.ScopeController(
        Missing(),
        ScopeSettings(mode="dynamic"),
        policies=lambda: PolicyIndex.build([]),
        is_leader=lambda: True,
        lock=threading.Lock(),
        on_change=lambda: None,
    )
    caplog.set_level("DEBUG", logger="snapready.scope")
    controller.start()
    try:
        wait_for("six passes", lambda: len(calls) >= 6, timeout=10)
        gaps = [b - a for a, b in itertools.pairwise(calls)][:5]
        assert gaps[0] < gaps[2] and all(gap >= 0.045 for gap in gaps)  # 0.05, 0.1, 0.2, 0.2...
        assert max(gaps) < 1.0  # capped
        before = len(calls)
        controller.notify()
        wait_for("the wake-up pass", lambda: len(calls) > before, timeout=0.15)
    finally:
        controller.stop()
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "not reconciled" in warnings[0].getMessage()
    assert not controller.synced


def test_with_the_leader_killed_a_new_policy_is_covered_within_seconds(
    snapready_identity: IdentityFactory,
    kube_admin: client.ApiClient,
    namespaces: list[str],
    configurations: str,
    tmp_path: Path,
) -> None:
    """Issue 27 deliverable 5: two ``snapready serve`` replicas; the leader is SIGKILLed and a
    policy is created 0.4 s later. Before, only the leader widened the scope: the policy's pods
    went unjudged for ~16 s (until the Lease expired). Every ready replica writes it now: the
    window (policy created -> the API server sends its pods to snapready) is measured here."""
    from tests.support.snapready_proc import generate_certs, start_snapready  # noqa: PLC0415

    with_policy, _ = namespaces
    env = {
        "SNAPREADY_SCOPE__MODE": "dynamic",
        "SNAPREADY_SCOPE__MUTATING_CONFIGURATION": configurations,
        "SNAPREADY_SCOPE__VALIDATING_CONFIGURATION": configurations,
        "SNAPREADY_LEADER__LEASE_NAME": f"kill-{configurations}"[:60],
        "SNAPREADY_LEADER__LEASE_NAMESPACE": with_policy,
    }
    certs = generate_certs(tmp_path / "certs")
    identity = snapready_identity(
        with_policy, lease_name=f"kill-{configurations}"[:60], configuration=configurations
    )
    kubeconfig = require_token(identity.kubeconfig)
    replicas = [start_snapready(tmp_path / n, certs, kubeconfig=kubeconfig, env=env) for n in "ab"]
    try:

        def role(process: Any) -> str:
            try:
                return str(process.readyz()[1].get("leader", ""))
            except Exception:
                return ""

        wait_for("a leader", lambda: sorted(map(role, replicas)) == ["follower", "leader"], 30)
        leader = next(p for p in replicas if role(p) == "leader")
        assert create_pod(kube_admin, with_policy, {"app": "llm"}) is None  # no policy yet
        os.kill(leader.process.pid, signal.SIGKILL)
        leader.process.wait(10)
        time.sleep(0.4)
        started = time.monotonic()
        create_policy(kube_admin, with_policy, "llm-policy", {"app": "llm"})
        wait_for("judged", lambda: create_pod(kube_admin, with_policy, {"app": "llm"}), 10)
        window = time.monotonic() - started
        print(f"policy created -> its pods judged, leader killed: {window:.2f} s")
        assert window < 5, f"{window:.1f} s: the scope waited for a new leader"
    finally:
        for process in replicas:
            process.stop()
