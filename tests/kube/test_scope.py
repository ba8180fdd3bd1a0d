"""``webhook.kube.scope``: label selectors as CEL matchConditions, judged by the API server itself.

Each case registers a webhook whose ``matchConditions`` is our scope and whose URL is a closed
port, with ``failurePolicy: Fail``: the real kube-apiserver refuses a (dry-run) create exactly
when its own CEL evaluation of the condition is true, so "refused" is the API server's answer to
"would snapready be called". That answer must equal ``PolicyIndex.select`` (our selector
semantics, from k8s.io/apimachinery labels) for every operator, absent labels, empty selectors,
several policies and namespaces, and pod templates of every controller kind.
"""

from __future__ import annotations

import base64
import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.envtest.controlplane import ControlPlane
from tests.envtest.plugin import unique_name, wait_for, wait_for_service_account
from tests.support.ports import free_port
from webhook.kube.matching import Policy, PolicyIndex, compile_selector
from webhook.kube.scope import CONDITION_NAME, build_scope, requirement_cel, scope_expression

SELECTORS: dict[str, dict[str, Any]] = {
    "match-labels": {"matchLabels": {"app": "llm"}},
    "in": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
    "not-in": {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a", "b"]}]},
    "exists": {"matchExpressions": [{"key": "example.com/gpu", "operator": "Exists"}]},
    "does-not-exist": {
        "matchExpressions": [{"key": "example.com/opt-out", "operator": "DoesNotExist"}]
    },
    "combined": {
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["frontend", "edge"]},
            {"key": "example.com/opt-out", "operator": "DoesNotExist"},
        ],
    },
    "empty": {},
}
LABEL_SETS: list[dict[str, str]] = [
    {},
    {"app": "llm"},
    {"app": "LLM"},
    {"tier": "a"},
    {"tier": "c"},
    {"example.com/gpu": ""},
    {"example.com/opt-out": "yes"},
    {"app": "web", "tier": "edge"},
    {"app": "web", "tier": "edge", "example.com/opt-out": "1"},
    {"app": "web", "tier": "backend"},
]


def policy(name: str, namespace: str, selector: dict[str, Any]) -> Policy:
    """A policy with only what the scope reads."""
    return Policy(name, namespace, compile_selector(selector), "storage")


@pytest.fixture
def two_namespaces(
    kube_admin: client.ApiClient, request: pytest.FixtureRequest
) -> Iterator[list[str]]:
    """Two fresh namespaces labelled for the probe webhook's namespaceSelector."""
    core = client.CoreV1Api(kube_admin)
    names = [unique_name(f"{request.node.name}-{i}") for i in (1, 2)]
    for name in names:
        core.create_namespace(
            client.V1Namespace.model_validate(
                {"metadata": {"name": name, "labels": {"snapready.test/scope": "probe"}}}
            )
        )
        wait_for_service_account(kube_admin, name)
    yield names
    for name in names:
        with contextlib.suppress(ApiException):
            core.delete_namespace(name, propagation_policy="Background")


@contextlib.contextmanager
def probe_webhook(
    control_plane: ControlPlane, api: client.ApiClient, namespaces: list[str], expression: str
) -> Iterator[None]:
    """A validating webhook with our condition, failurePolicy Fail and nobody listening."""
    name = f"scope-probe-{uuid.uuid4().hex[:8]}"
    ca_bundle = control_plane.ca_file.read_bytes()

    body = {
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "probe.scope.snapready.test",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": 2,
                "clientConfig": {
                    "url": f"https://127.0.0.1:{free_port()}/validate",
                    "caBundle": base64.b64encode(ca_bundle).decode(),
                },
                "namespaceSelector": {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "In",
                            "values": namespaces,
                        }
                    ]
                },
                "rules": [
                    {
                        "apiGroups": ["", "apps", "batch"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods", "deployments", "cronjobs", "configmaps", "services"],
                    }
                ],
                # ConfigMaps are the canary: always sent, so we know when the webhook is active.
                "matchConditions": [
                    {
                        "name": CONDITION_NAME,
                        "expression": f"request.resource.resource == 'configmaps' || {expression}",
                    }
                ],
            }
        ],
    }
    admission = client.AdmissionregistrationV1Api(api)
    admission.create_validating_webhook_configuration(
        client.V1ValidatingWebhookConfiguration.model_validate(body)
    )
    try:
        wait_for("the probe webhook to be active", lambda: canary_refused(api, namespaces[0]))
        yield
    finally:
        admission.delete_validating_webhook_configuration(name)


def canary_refused(api: client.ApiClient, namespace: str) -> bool:
    """Whether a dry-run ConfigMap create is refused (the probe webhook is in effect)."""
    body = client.V1ConfigMap.model_validate({"metadata": {"generateName": "canary-"}})
    try:
        client.CoreV1Api(api).create_namespaced_config_map(namespace, body, dry_run="All")
    except ApiException:
        return True
    return False


def pod(labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A minimal pod with ``labels`` (and ``annotations``)."""
    metadata: dict[str, Any] = {"generateName": "probe-", "labels": labels}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def called(
    api: client.ApiClient,
    namespace: str,
    kind: str,
    labels: dict[str, str],
    annotations: dict[str, str] | None = None,
) -> bool:
    """Whether the API server called the probe webhook for a dry-run create of ``kind``."""
    template = {"metadata": {"labels": labels}, "spec": pod(labels)["spec"]}
    try:
        if kind == "Pod":
            client.CoreV1Api(api).create_namespaced_pod(
                namespace, client.V1Pod.model_validate(pod(labels, annotations)), dry_run="All"
            )
        elif kind == "Service":
            body = {"metadata": {"generateName": "probe-"}, "spec": {"ports": [{"port": 80}]}}
            client.CoreV1Api(api).create_namespaced_service(
                namespace, client.V1Service.model_validate(body), dry_run="All"
            )
        elif kind == "Deployment":
            body = {
                "metadata": {"generateName": "probe-"},
                "spec": {"selector": {"matchLabels": labels or {"x": "y"}}, "template": template},
            }
            if not labels:
                template["metadata"]["labels"] = {"x": "y"}
            client.AppsV1Api(api).create_namespaced_deployment(
                namespace, client.V1Deployment.model_validate(body), dry_run="All"
            )
        else:
            template["spec"]["restartPolicy"] = "Never"
            body = {
                "metadata": {"generateName": "probe-"},
                "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}},
            }
            client.BatchV1Api(api).create_namespaced_cron_job(
                namespace, client.V1CronJob.model_validate(body), dry_run="All"
            )
    except ApiException as error:
        assert "failed calling webhook" in str(error.body), error.body
        return True
    return False


def test_every_operator_matches_the_api_servers_own_evaluation(
    control_plane: ControlPlane, kube_admin: client.ApiClient, two_namespaces: list[str]
) -> None:
    first, second = two_namespaces
    for selector_id, selector in SELECTORS.items():
        policies = [policy(selector_id, first, selector)]
        index = PolicyIndex.build(policies)
        with probe_webhook(control_plane, kube_admin, two_namespaces, scope_expression(policies)):
            for labels in LABEL_SETS:
                expected = bool(index.select(first, labels))
                got = called(kube_admin, first, "Pod", labels)
                assert got == expected, f"{selector_id} {labels}: API server said {got}"
            # The other namespace has no policy: never sent, whatever the labels.
            assert not called(kube_admin, second, "Pod", {"app": "llm", "tier": "a"})


@pytest.mark.parametrize("kind", ["Deployment", "CronJob"])
def test_pod_templates_are_judged_by_their_own_labels(
    control_plane: ControlPlane, kube_admin: client.ApiClient, two_namespaces: list[str], kind: str
) -> None:
    first, second = two_namespaces
    policies = [
        policy("llm", first, SELECTORS["match-labels"]),
        policy("web", second, SELECTORS["combined"]),
    ]
    with probe_webhook(control_plane, kube_admin, two_namespaces, scope_expression(policies)):
        assert called(kube_admin, first, kind, {"app": "llm"})
        assert not called(kube_admin, first, kind, {"app": "web", "tier": "edge"})
        assert called(kube_admin, second, kind, {"app": "web", "tier": "edge"})
        assert not called(kube_admin, second, kind, {"app": "llm"})


def test_namespace_fallback_sends_every_pod_of_a_policy_namespace(
    control_plane: ControlPlane, kube_admin: client.ApiClient, two_namespaces: list[str]
) -> None:
    first, second = two_namespaces
    policies = [policy("llm", first, SELECTORS["match-labels"])]
    expression = scope_expression(policies, by_namespace_only=True)
    with probe_webhook(control_plane, kube_admin, two_namespaces, expression):
        assert called(kube_admin, first, "Pod", {})
        assert called(kube_admin, first, "Deployment", {"other": "x"})
        assert not called(kube_admin, second, "Pod", {"app": "llm"})


def test_custom_workloads_are_sent_in_namespaces_that_have_a_policy(
    control_plane: ControlPlane, kube_admin: client.ApiClient, two_namespaces: list[str]
) -> None:
    # Services stand in for a custom resource's (group, resource): the clause is the same CEL,
    # evaluated by the API server without a CRD to install.
    first, second = two_namespaces
    policies = [policy("llm", first, SELECTORS["match-labels"])]
    expression = scope_expression(policies, custom=[("", "services")])
    with probe_webhook(control_plane, kube_admin, two_namespaces, expression):
        assert called(kube_admin, first, "Service", {})
        assert not called(kube_admin, second, "Service", {})
    # Without policies nothing is sent, custom workloads included.
    with probe_webhook(
        control_plane, kube_admin, two_namespaces, scope_expression([], custom=[("", "services")])
    ):
        assert not called(kube_admin, first, "Service", {})


def test_no_policies_sends_no_pod(
    control_plane: ControlPlane, kube_admin: client.ApiClient, two_namespaces: list[str]
) -> None:
    with probe_webhook(control_plane, kube_admin, two_namespaces, scope_expression([])):
        assert not called(kube_admin, two_namespaces[0], "Pod", {"app": "llm"})


def test_scope_falls_back_to_namespaces_then_to_everything_never_narrower() -> None:
    many = [
        policy(f"p{i}", f"ns{i % 7}", {"matchLabels": {"app": f"model-{i}"}}) for i in range(200)
    ]
    precise = build_scope(many, max_chars=1_000_000)
    assert precise.level == "policies"
    coarse = build_scope(many, max_chars=len(scope_expression(many)) - 1)
    assert coarse.level == "namespaces"
    assert '"ns0"' in coarse.conditions[0]["expression"]
    too_small = len(scope_expression(many, by_namespace_only=True)) - 1
    assert build_scope(many, max_chars=too_small).level == "everything"
    assert build_scope(many, max_chars=too_small).conditions == ()


def test_label_keys_and_values_are_quoted_as_cel_strings() -> None:
    selector = compile_selector({"matchLabels": {'we"ird/key': "v\\1"}})
    text = requirement_cel(selector.requirements[0], "L")
    assert text == '("we\\"ird/key" in L && L["we\\"ird/key"] == "v\\\\1")'


def test_a_pod_carrying_snapreadys_keys_is_sent_whatever_its_labels(
    control_plane: ControlPlane, kube_admin: client.ApiClient, two_namespaces: list[str]
) -> None:
    """A forged ``selected`` label or ``restore-outcome`` on a pod no policy selects must reach
    ``/mutate`` (which removes it): the API server's own evaluation of the clause, in a
    namespace with a policy and in one without; the two keys a user sets send nothing."""
    first, second = two_namespaces
    policies = [policy("llm", first, SELECTORS["match-labels"])]
    with probe_webhook(control_plane, kube_admin, two_namespaces, scope_expression(policies)):
        for namespace in (first, second):
            assert called(kube_admin, namespace, "Pod", {"snapready.io/selected": "true"})
            outcome = {"snapready.io/restore-outcome": "restored"}
            assert called(kube_admin, namespace, "Pod", {"app": "web"}, outcome)
            users = {"snapready.io/inject": "false"}
            assert not called(kube_admin, namespace, "Pod", {"snapready.io/snapshot-source": "x"})
            assert not called(kube_admin, namespace, "Pod", {"app": "web"}, users)
            other = {"example.com/snapready.io": "x"}  # another prefix that merely contains it
            assert not called(kube_admin, namespace, "Pod", {"app": "web"}, other)
        # a prefix of another name is judged by it (Settings.prefix)
        custom = scope_expression(policies, prefix="snap.example.com/")
    with probe_webhook(control_plane, kube_admin, two_namespaces, custom):
        assert called(kube_admin, second, "Pod", {"snap.example.com/selected": "true"})
        assert not called(kube_admin, second, "Pod", {"snapready.io/selected": "true"})
