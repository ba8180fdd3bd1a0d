"""The Helm chart, rendered with the real Helm engine for each certificate mode and a few values.

Checks: lint; every object valid under ``kubernetes-validate --strict`` (CRD kinds that have no
schema there are listed in ``tests/support/helm_support.py``); one object per template; webhook
configurations that reach the Service on the right paths and port and agree with the server's
settings (failure policy); the three certificate modes; the restricted pod; RBAC; values docs.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import helm_python
import kubernetes_validate
import pytest
import yaml
from cryptography import x509
from kubernetes_validate.utils import SchemaNotFoundError
from pydantic import ValidationError

from scripts import settings_schema
from tests.support.helm_support import (
    CHART,
    RBAC,
    ROOT,
    UNVALIDATABLE_KINDS,
    Obj,
    by_kind,
    documents,
    objects,
    one,
    render,
    settings_configmap,
    settings_of,
    validate_all,
)
from webhook.base.config import Settings
from webhook.kube.custom_workloads import BUILTIN
from webhook.kube.matching import compile_selector
from webhook.server.tls import CertPair, check_pair

CA_PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
CA_BUNDLE = base64.b64encode(CA_PEM).decode()

VALUE_SETS = [
    pytest.param({}, id="renders-defaults-with-self-signed-certificates"),
    pytest.param({"certificates": {"mode": "certManager"}}, id="renders-cert-manager-mode"),
    pytest.param(
        {
            "certificates": {
                "mode": "certManager",
                "certManager": {
                    "issuerRef": {
                        "name": "corp-ca",
                        "kind": "ClusterIssuer",
                        "group": "cert-manager.io",
                    }
                },
            }
        },
        id="renders-cert-manager-mode-with-an-existing-cluster-issuer",
    ),
    pytest.param(
        {
            "certificates": {
                "mode": "existingSecret",
                "existingSecret": {"name": "my-tls", "caBundle": CA_BUNDLE},
            }
        },
        id="renders-existing-secret-mode",
    ),
    pytest.param(
        {
            "failurePolicy": "Ignore",
            "timeoutSeconds": 10,
            "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}},
            "monitoring": {
                "grafanaDashboard": {"enabled": True},
                "prometheusRule": {"enabled": True, "labels": {"release": "prom"}},
            },
            "networkPolicy": {
                "enabled": True,
                "webhookFrom": [{"ipBlock": {"cidr": "172.16.0.0/28"}}],
            },
            "image": {"digest": "sha256:" + "ab" * 32},
            "settings": {"storage": {"cluster_location": "us-central1"}},
            "priorityClassName": "system-cluster-critical",
            "replicaCount": 3,
        },
        id="renders-monitoring-network-policy-and-ignore-policy",
    ),
]

MODE_VALUES: dict[str, dict[str, Any]] = {
    "selfSigned": {},
    "certManager": {"certificates": {"mode": "certManager"}},
    "existingSecret": {
        "certificates": {
            "mode": "existingSecret",
            "existingSecret": {"name": "my-tls", "caBundle": CA_BUNDLE},
        }
    },
}


@pytest.fixture(scope="module")
def defaults() -> list[Obj]:
    """The objects of a default install (release ``snapready`` in namespace ``snapready``)."""
    return objects(render())


def webhooks(objs: list[Obj]) -> list[tuple[str, Obj]]:
    """(configuration kind, webhook) for every webhook of both configurations."""
    return [
        (config["kind"], hook)
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for config in by_kind(objs, kind)
        for hook in config["webhooks"]
    ]


def container(objs: list[Obj]) -> Obj:
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    assert len(pod["containers"]) == 1
    found: Obj = pod["containers"][0]
    return found


# --- lint, schema, structure -----------------------------------------------------------------


@pytest.mark.parametrize("values", VALUE_SETS)
def test_lint_reports_no_warning(values: dict[str, Any]) -> None:
    report = helm_python.lint(CHART, values, strict=True, namespace="snapready")
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert problems == [] and report["errors"] == []


@pytest.mark.parametrize("values", VALUE_SETS)
def test_every_object_is_valid_kubernetes(values: dict[str, Any]) -> None:
    objs = objects(render(values))
    problems, skipped = validate_all(objs)
    assert problems == []
    assert skipped <= UNVALIDATABLE_KINDS


@pytest.mark.parametrize("kind", sorted(UNVALIDATABLE_KINDS))
def test_crd_kinds_really_have_no_schema(kind: str) -> None:
    """Keeps the list of unvalidated kinds honest: drop a kind once a schema exists."""
    values = {
        "certificates": {"mode": "certManager"},
        "metrics": {"serviceMonitor": {"enabled": True}},
        "monitoring": {"prometheusRule": {"enabled": True}},
    }
    obj = by_kind(objects(render(values)), kind)[0]
    with pytest.raises(SchemaNotFoundError):
        kubernetes_validate.validate(obj, "1.36.0", strict=True)


@pytest.mark.parametrize("values", VALUE_SETS)
def test_each_template_renders_at_most_one_object(values: dict[str, Any]) -> None:
    for path, text in render(values).items():
        if not path.endswith(".txt"):
            assert len(documents(text)) <= 1, path


@pytest.mark.parametrize("values", VALUE_SETS)
def test_namespaced_objects_live_in_the_release_namespace(values: dict[str, Any]) -> None:
    cluster_scoped = {
        "ClusterRole",
        "ClusterRoleBinding",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    }
    for obj in objects(render(values, name="prod", namespace="webhooks")):
        expected = None if obj["kind"] in cluster_scoped else "webhooks"
        assert obj["metadata"].get("namespace") == expected, obj["kind"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param({"failurePolicy": "Sometimes"}, "failurePolicy", id="rejects-unknown-policy"),
        pytest.param({"timeoutSeconds": 31}, "timeoutSeconds", id="rejects-timeout-above-30s"),
        pytest.param({"certificates": {"mode": "acme"}}, "mode", id="rejects-unknown-cert-mode"),
        pytest.param({"replicas": 2}, "replicas", id="rejects-misspelt-top-level-key"),
        pytest.param({"image": {"digest": "latest"}}, "digest", id="rejects-digest-not-sha256"),
    ],
)
def test_schema_rejects_bad_values(values: dict[str, Any], message: str) -> None:
    with helm_python.Chart.load(CHART) as chart, pytest.raises(helm_python.HelmError) as caught:
        chart.validate_schema(values)
    assert message in str(caught.value)


def test_the_settings_schema_is_generated_from_the_settings_models() -> None:
    assert settings_schema.main(["--check"]) == 0, "run make chart-schema"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        pytest.param({"lifecycle": {"unused_day": 3}}, "unused_day", id="a-typo-in-a-section"),
        pytest.param({"rules": {"gpu_driver": {"mode": "warn"}}}, "mode", id="two-levels-down"),
        pytest.param({"lifecycles": {}}, "lifecycles", id="an-unknown-section"),
        pytest.param({"workloads": {"extra": [{"group": "x", "kind": "Y", "resource": "ys",
                      "templates": ["spec.template"], "template": "x"}]}}, "template",
                     id="in-a-list-of-sections"),
        pytest.param({"rules": {"modes": {"machine-familly": "audit"}}}, "machine-familly",
                     id="a-rule-id-typo-in-modes"),
        pytest.param({"rules": {"disabled": ["gpu-driver", "gpu-migg"]}},
                     "/settings/rules/disabled/1", id="a-rule-id-typo-in-disabled"),
        pytest.param({"rules": {"modes": {"gpu-mig": "audti"}}}, "/settings/rules/modes/gpu-mig",
                     id="a-mode-typo-in-modes"),
    ],
)  # fmt: skip
def test_helm_refuses_a_settings_key_the_server_would_refuse(
    settings: dict[str, Any], message: str
) -> None:
    # The server refuses an unknown settings key at start (webhook.base.section); the chart's
    # schema refuses it at helm install/upgrade, before any pod restarts on it.
    with pytest.raises(ValidationError):
        Settings.model_validate(settings)
    with helm_python.Chart.load(CHART) as chart, pytest.raises(helm_python.HelmError) as caught:
        chart.validate_schema({"settings": settings})
    assert message in str(caught.value)


def test_helm_accepts_the_settings_the_server_accepts() -> None:
    settings = {
        "lifecycle": {"unused_days": 3, "prune": "on"},
        "rules": {"gpu_driver": {"pin": True}, "modes": {"gpu-mig": "warn"},
                  "disabled": ["gpu-driver"]},
        "workloads": {"extra": [{"group": "x", "kind": "Y", "resource": "ys",
                                 "templates": ["spec.template"]}]},
        "storage": {"cluster_location": "europe-west4"},
        "enforcement": "audit",
    }  # fmt: skip
    Settings.model_validate(settings)
    with helm_python.Chart.load(CHART) as chart:
        chart.validate_schema({"settings": settings})
    # (lifecycle and workloads are also chart values, merged over these: not asserted here)
    rendered = Settings.model_validate(settings_of(objects(render({"settings": settings}))))
    assert rendered.storage.cluster_location == "europe-west4"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param(
            {"certificates": {"mode": "existingSecret", "existingSecret": {"caBundle": "eA=="}}},
            "certificates.existingSecret.name is required",
            id="existing-secret-mode-needs-a-secret-name",
        ),
        pytest.param(
            {"certificates": {"mode": "existingSecret", "existingSecret": {"name": "x"}}},
            "certificates.existingSecret.caBundle is required",
            id="existing-secret-mode-needs-a-ca-bundle",
        ),
    ],
)
def test_incomplete_existing_secret_fails_with_a_clear_message(
    values: dict[str, Any], message: str
) -> None:
    with pytest.raises(helm_python.HelmError) as caught:
        render(values)
    assert message in str(caught.value)


# --- webhook configurations --------------------------------------------------------------------

EXPECTED_RULES = {
    "MutatingWebhookConfiguration": {
        ("", "pods", ("CREATE",)),
    },
    "ValidatingWebhookConfiguration": {
        # Pod UPDATEs are never re-judged (only added ephemeral containers), so not subscribed.
        ("", "pods", ("CREATE",)),
        # Issue 27: only through the ownership webhook's matchCondition (changes of
        # snapready's own annotations or label), never every pod update.
        ("", "pods", ("UPDATE",)),
        ("", "pods/status", ("UPDATE",)),  # its writers could change the metadata through it
        ("", "pods/binding", ("CREATE",)),  # a Binding's annotations are copied onto the pod
        ("", "bindings", ("CREATE",)),  # the older way to create one
        ("", "pods/ephemeralcontainers", ("UPDATE",)),
        # ReplicaSets only on request (values.validateReplicaSets): the Deployment is judged.
        *(
            ("apps", resource, ("CREATE", "UPDATE"))
            for resource in ("deployments", "statefulsets", "daemonsets")
        ),
        ("batch", "jobs", ("CREATE", "UPDATE")),
        ("batch", "cronjobs", ("CREATE", "UPDATE")),
        ("podsnapshot.gke.io", "podsnapshotpolicies", ("CREATE", "UPDATE")),
        ("podsnapshot.gke.io", "podsnapshotstorageconfigs", ("CREATE", "UPDATE")),
        # Issue 24: custom resources that embed pod templates.
        ("agents.x-k8s.io", "sandboxes", ("CREATE", "UPDATE")),
        ("extensions.agents.x-k8s.io", "sandboxtemplates", ("CREATE", "UPDATE")),
        ("extensions.agents.x-k8s.io", "sandboxwarmpools", ("CREATE", "UPDATE")),
        ("leaderworkerset.x-k8s.io", "leaderworkersets", ("CREATE", "UPDATE")),
        *(("ray.io", r, ("CREATE", "UPDATE")) for r in ("rayclusters", "rayservices", "rayjobs")),
        ("serving.kserve.io", "inferenceservices", ("CREATE", "UPDATE")),
        ("serving.kserve.io", "llminferenceservices", ("CREATE", "UPDATE")),
        ("jobset.x-k8s.io", "jobsets", ("CREATE", "UPDATE")),
        ("argoproj.io", "rollouts", ("CREATE", "UPDATE")),
        # issue 23: a trigger's target pod is checked when the trigger is created
        ("podsnapshot.gke.io", "podsnapshotmanualtriggers", ("CREATE",)),
    },
}
"""(group, resource, operations) per configuration, from the issues (not from the templates)."""


def test_webhook_rules_cover_pods_controllers_and_snapshot_crds(defaults: list[Obj]) -> None:
    for kind, expected in EXPECTED_RULES.items():
        found = {
            (group, resource, tuple(rule["operations"]))
            for _, hook in webhooks(defaults)
            if _ == kind
            for rule in hook["rules"]
            for group in rule["apiGroups"]
            for resource in rule["resources"]
        }
        assert found == expected, kind


@pytest.mark.parametrize("values", VALUE_SETS)
def test_every_webhook_field_is_explicit(values: dict[str, Any]) -> None:
    objs = objects(render(values))
    timeout = values.get("timeoutSeconds", 5)
    for kind, hook in webhooks(objs):
        assert hook["admissionReviewVersions"] == ["v1", "v1beta1"]
        assert hook["sideEffects"] == "None"
        assert hook["timeoutSeconds"] == timeout
        assert hook["matchPolicy"] == "Equivalent"
        assert hook["objectSelector"] == {}
        assert "namespaceSelector" in hook
        if kind == "MutatingWebhookConfiguration":
            assert hook["reinvocationPolicy"] == "IfNeeded"


@pytest.mark.parametrize("values", VALUE_SETS)
def test_webhooks_call_the_service_on_its_https_port(values: dict[str, Any]) -> None:
    objs = objects(render(values, name="prod", namespace="webhooks"))
    service = one(objs, "Service")
    ports = {port["port"]: port for port in service["spec"]["ports"]}
    (container_port,) = [p for p in container(objs)["ports"] if p["name"] == "https"]
    paths = {
        "MutatingWebhookConfiguration": "/mutate",
        "ValidatingWebhookConfiguration": "/validate",
    }
    for kind, hook in webhooks(objs):
        target = hook["clientConfig"]["service"]
        assert target["name"] == service["metadata"]["name"] == "prod-snapready"
        assert target["namespace"] == "webhooks"
        assert target["path"] == paths[kind]
        assert ports[target["port"]]["targetPort"] == container_port["name"]
    assert settings_of(objs)["server"]["port"] == container_port["containerPort"]


def test_service_port_443_reaches_container_port_10250_by_default(defaults: list[Obj]) -> None:
    service = one(defaults, "Service")
    (https,) = [p for p in service["spec"]["ports"] if p["name"] == "https"]
    (port,) = [p for p in container(defaults)["ports"] if p["name"] == https["targetPort"]]
    assert (https["port"], port["containerPort"]) == (443, 10250)


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
def test_failure_policy_is_the_same_in_webhooks_and_server_settings(policy: str) -> None:
    objs = objects(render({"failurePolicy": policy, "settings": {"failure_policy": "Fail"}}))
    assert {hook["failurePolicy"] for _, hook in webhooks(objs)} == {policy}
    assert settings_of(objs)["failure_policy"] == policy


@pytest.mark.parametrize(
    ("labels", "sent"),
    [
        pytest.param({"kubernetes.io/metadata.name": "team-a"}, True, id="sends-a-plain-namespace"),
        pytest.param(
            {"kubernetes.io/metadata.name": "kube-system"}, False, id="never-sends-kube-system"
        ),
        pytest.param(
            {"kubernetes.io/metadata.name": "webhooks"}, False, id="never-sends-its-own-namespace"
        ),
        pytest.param(
            {"kubernetes.io/metadata.name": "lab", "snapready.io/ignore": "true"},
            False,
            id="never-sends-a-namespace-labelled-ignore",
        ),
        pytest.param(
            {"kubernetes.io/metadata.name": "lab", "snapready.io/ignore": "false"},
            True,
            id="sends-a-namespace-labelled-ignore-false",
        ),
    ],
)
def test_namespace_selector(labels: dict[str, str], sent: bool) -> None:
    objs = objects(render(name="snapready", namespace="webhooks"))
    for _, hook in webhooks(objs):
        assert compile_selector(hook["namespaceSelector"]).matches(labels) is sent


def test_custom_prefix_moves_the_ignore_label() -> None:
    objs = objects(render({"prefix": "example.com/"}))
    labels = {"kubernetes.io/metadata.name": "lab", "example.com/ignore": "true"}
    for _, hook in webhooks(objs):
        assert compile_selector(hook["namespaceSelector"]).matches(labels) is False
    assert settings_of(objs)["prefix"] == "example.com/"


# --- certificates ------------------------------------------------------------------------------


def _b64(value: str) -> bytes:
    return base64.b64decode(value)


def test_self_signed_mode_generates_a_ca_and_a_matching_serving_pair() -> None:
    objs = objects(render(name="snapready", namespace="webhooks"))
    secrets = {s["metadata"]["name"]: s for s in by_kind(objs, "Secret")}
    serving, ca = secrets["snapready-tls"]["data"], secrets["snapready-ca"]["data"]
    bundles = {hook["clientConfig"]["caBundle"] for _, hook in webhooks(objs)}
    assert bundles == {ca["tls.crt"]} == {serving["ca.crt"]}, "both webhooks trust the CA"
    ca_cert = x509.load_pem_x509_certificate(_b64(ca["tls.crt"]))
    cert = x509.load_pem_x509_certificate(_b64(serving["tls.crt"]))
    cert.verify_directly_issued_by(ca_cert)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "snapready.webhooks.svc" in sans.get_values_for_type(x509.DNSName)
    check_pair(CertPair(_b64(serving["tls.crt"]), _b64(serving["tls.key"])))


def tls_secrets(objs: list[Obj]) -> list[Obj]:
    """The rendered Secrets (the TLS ones: the chart renders no other)."""
    return by_kind(objs, "Secret")


def test_self_signed_secret_is_the_one_the_pods_mount() -> None:
    objs = objects(render())
    volumes = one(objs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    (tls,) = [v for v in volumes if v["name"] == "tls"]
    mounted = tls["secret"]["secretName"]
    assert mounted in {s["metadata"]["name"] for s in by_kind(objs, "Secret")}
    assert "ca" not in mounted, "the CA key must not be mounted into the pods"


def test_cert_manager_mode_injects_the_ca_of_the_mounted_certificate() -> None:
    objs = objects(render(MODE_VALUES["certManager"], name="snapready", namespace="webhooks"))
    assert tls_secrets(objs) == []
    certificates = {c["metadata"]["name"]: c for c in by_kind(objs, "Certificate")}
    volumes = one(objs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    (tls,) = [v for v in volumes if v["name"] == "tls"]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        config = one(objs, kind)
        source = config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        namespace, name = source.split("/")
        assert namespace == "webhooks"
        assert certificates[name]["spec"]["secretName"] == tls["secret"]["secretName"]
        assert "snapready.webhooks.svc" in certificates[name]["spec"]["dnsNames"]
        assert all("caBundle" not in hook["clientConfig"] for hook in config["webhooks"])
    issuers = {i["metadata"]["name"]: i for i in by_kind(objs, "Issuer")}
    assert issuers[certificates[name]["spec"]["issuerRef"]["name"]]["spec"].get("ca")


def test_cert_manager_mode_can_use_an_existing_issuer() -> None:
    ref = {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    objs = objects(
        render({"certificates": {"mode": "certManager", "certManager": {"issuerRef": ref}}})
    )
    assert by_kind(objs, "Issuer") == []
    (certificate,) = by_kind(objs, "Certificate")
    assert certificate["spec"]["issuerRef"] == ref


def test_existing_secret_mode_mounts_it_and_uses_the_given_ca_bundle() -> None:
    objs = objects(render(MODE_VALUES["existingSecret"]))
    assert tls_secrets(objs) == [] and by_kind(objs, "Certificate") == []
    volumes = one(objs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert next(v["secret"] for v in volumes if v["name"] == "tls") == {
        "secretName": "my-tls",
        "defaultMode": 0o440,
    }
    assert {hook["clientConfig"]["caBundle"] for _, hook in webhooks(objs)} == {CA_BUNDLE}


# --- server settings, pod, disruption, RBAC ----------------------------------------------------


@pytest.mark.parametrize("values", VALUE_SETS)
def test_settings_file_is_accepted_by_the_server(values: dict[str, Any]) -> None:
    objs = objects(render(values))
    settings = Settings.model_validate(settings_of(objs))
    assert settings.source.kind == "kube"
    assert settings.server.host == "0.0.0.0"
    assert settings.server.generate_certs is False
    spec = one(objs, "Deployment")["spec"]["template"]["spec"]
    mounts = {m["name"]: m["mountPath"] for m in container(objs)["volumeMounts"]}
    assert settings.server.cert_file == Path(mounts["tls"]) / "tls.crt"
    assert settings.server.key_file == Path(mounts["tls"]) / "tls.key"
    env = {e["name"]: e["value"] for e in container(objs)["env"]}
    config_file = Path(env["SNAPREADY_CONFIG_FILE"])
    assert config_file.parent == Path(mounts["config"])
    (config_volume,) = [v for v in spec["volumes"] if v["name"] == "config"]
    assert config_volume["configMap"]["name"] == settings_configmap(objs)["metadata"]["name"]
    assert config_file.name in settings_configmap(objs)["data"]
    metrics = [p["containerPort"] for p in container(objs)["ports"] if p["name"] == "metrics"]
    assert metrics == [settings.server.metrics_port]


def test_extra_settings_are_merged_but_cannot_override_managed_keys() -> None:
    extra = {
        "storage": {"cluster_location": "europe-west4"},
        "server": {"port": 1, "max_concurrency": 64},
    }
    settings = Settings.model_validate(settings_of(objects(render({"settings": extra}))))
    assert settings.storage.cluster_location == "europe-west4"
    assert settings.server.max_concurrency == 64
    assert settings.server.port == 10250


def test_replicasets_are_validated_only_on_request() -> None:
    hooks = webhooks(objects(render({"validateReplicaSets": True})))
    resources = {
        resource
        for kind, hook in hooks
        if kind == "ValidatingWebhookConfiguration"
        for rule in hook["rules"]
        for resource in rule["resources"]
    }
    assert "replicasets" in resources


def _validating_rules(values: dict[str, Any]) -> list[Obj]:
    return [
        rule
        for kind, hook in webhooks(objects(render(values)))
        if kind == "ValidatingWebhookConfiguration"
        for rule in hook["rules"]
    ]


def test_custom_resource_rules_are_the_servers_table() -> None:
    # The chart lists the groups and resources by hand; the server dispatches on its own table.
    table = {(w.group, w.resource) for w in BUILTIN.values()}
    found = {
        (group, resource)
        for rule in _validating_rules({})
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        if group not in ("", "apps", "batch", "podsnapshot.gke.io")
    }
    assert found == table
    assert all(
        r["scope"] == "Namespaced"
        for r in _validating_rules({})
        if r["apiVersions"] == ["*"] and r["apiGroups"] != ["podsnapshot.gke.io"]
    )
    off = {g for r in _validating_rules({"customWorkloads": False}) for g in r["apiGroups"]}
    assert off == {"", "apps", "batch", "podsnapshot.gke.io"}


def test_extra_workloads_add_a_rule_and_the_server_setting() -> None:
    extra = [{"group": "example.com", "kind": "Pool", "resource": "pools", "templates": ["spec.t"]}]
    rules = _validating_rules({"extraWorkloads": extra})
    assert {
        "apiGroups": ["example.com"],
        "apiVersions": ["*"],
        "resources": ["pools"],
        "operations": ["CREATE", "UPDATE"],
        "scope": "Namespaced",
    } in rules
    settings = Settings.model_validate(settings_of(objects(render({"extraWorkloads": extra}))))
    assert [(e.group, e.kind, e.templates) for e in settings.workloads.extra] == [
        ("example.com", "Pool", ["spec.t"])
    ]
    with pytest.raises(helm_python.HelmError):
        render({"extraWorkloads": [{**extra[0], "templates": ["spec..t"]}]})


def test_injection_is_off_by_default_and_refuses_the_placeholder_digest() -> None:
    assert settings_of(objects(render()))["injection"]["enabled"] is False
    with pytest.raises(helm_python.HelmError) as caught:
        render({"injectHelpers": True})
    assert "helpersImage.digest" in str(caught.value)
    digest = "sha256:" + "ab" * 32
    values = {"injectHelpers": True, "helpersImage": {"digest": digest}}
    assert settings_of(objects(render(values)))["injection"]["enabled"] is True


def test_helpers_image_value_reaches_the_server_setting() -> None:
    digest = "sha256:" + "12" * 32
    values = {
        "helpersImage": {"repository": "registry.example/helpers", "tag": "1.2", "digest": digest}
    }
    settings = settings_of(objects(render(values)))
    assert settings["injection"]["helpers_image"] == f"registry.example/helpers:1.2@{digest}"


def test_pod_is_restricted_and_probed_over_https(defaults: list[Obj]) -> None:
    pod = one(defaults, "Deployment")["spec"]["template"]["spec"]
    main = container(defaults)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert main["securityContext"]["readOnlyRootFilesystem"] is True
    assert main["securityContext"]["allowPrivilegeEscalation"] is False
    assert main["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert main["livenessProbe"]["httpGet"] == {
        "path": "/healthz",
        "port": "https",
        "scheme": "HTTPS",
    }
    assert main["readinessProbe"]["httpGet"] == {
        "path": "/readyz",
        "port": "https",
        "scheme": "HTTPS",
    }
    assert main["resources"]["requests"] and main["resources"]["limits"]["memory"]
    assert "command" not in main and "args" not in main, "the image's ENTRYPOINT runs the server"


def test_two_replicas_spread_over_nodes_and_guarded_by_a_budget(defaults: list[Obj]) -> None:
    deployment = one(defaults, "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    spread = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    by_key = {c["topologyKey"]: c for c in spread}
    node = by_key["kubernetes.io/hostname"]
    assert node["whenUnsatisfiable"] == "DoNotSchedule"
    assert compile_selector(node["labelSelector"]).matches(pod_labels)
    budget = one(defaults, "PodDisruptionBudget")
    assert budget["spec"]["minAvailable"] == 1
    assert compile_selector(budget["spec"]["selector"]).matches(pod_labels)
    service_selector = {"matchLabels": one(defaults, "Service")["spec"]["selector"]}
    assert compile_selector(service_selector).matches(pod_labels)


def _rule_set(rules: list[Obj]) -> set[tuple[Any, ...]]:
    """Rules as comparable tuples, one per (group, resource or URL, verb)."""
    flat: set[tuple[Any, ...]] = set()
    for rule in rules:
        targets = [
            (group, resource)
            for group in rule.get("apiGroups", [None])
            for resource in rule.get("resources", [])
        ] + [(None, url) for url in rule.get("nonResourceURLs", [])]
        flat |= {(*target, verb) for target in targets for verb in rule["verbs"]}
    return flat


def server_role(objs: list[Obj]) -> Obj:
    """The ClusterRole bound to snapready's ServiceAccount (not the ``-records-view`` one the
    chart aggregates into ``view``)."""
    binding = one(objs, "ClusterRoleBinding")
    (role,) = [
        r
        for r in by_kind(objs, "ClusterRole")
        if r["metadata"]["name"] == binding["roleRef"]["name"]
    ]
    return role


def test_records_are_readable_through_view_and_writable_by_snapready_alone(
    defaults: list[Obj],
) -> None:
    """Issue 31: reading SnapshotRecords is aggregated to ``view`` (so ``edit`` and ``admin``),
    with reading GKE's snapshot objects unless ``tenantSnapshotRead`` is false (``snapready
    status``/``explain`` list them); no write verb is aggregated anywhere, and snapready's own
    role writes the records."""
    aggregated = [
        r
        for r in by_kind(defaults, "ClusterRole")
        if any(
            k.startswith("rbac.authorization.k8s.io/aggregate-to-")
            for k in r["metadata"].get("labels", {})
        )
    ]
    assert [
        r["metadata"]["labels"].get("rbac.authorization.k8s.io/aggregate-to-view")
        for r in aggregated
    ] == ["true"]
    records = {("snapready.io", "snapshotrecords", verb) for verb in ("get", "list", "watch")}
    gke = {
        ("podsnapshot.gke.io", resource, verb)
        for resource in ("podsnapshotpolicies", "podsnapshots", "podsnapshotmanualtriggers")
        for verb in ("get", "list", "watch")
    }
    assert _rule_set(aggregated[0]["rules"]) == records | gke  # tenantSnapshotRead: true
    off = [
        r
        for r in by_kind(objects(render({"tenantSnapshotRead": False})), "ClusterRole")
        if r["metadata"]["name"].endswith("-records-view")
    ]
    assert _rule_set(off[0]["rules"]) == records
    own = _rule_set(server_role(defaults)["rules"])
    assert {v for g, r, v in own if r == "snapshotrecords"} == {
        "get",
        "list",
        "watch",
        "create",
        "delete",
    }


def test_no_write_verb_on_podsnapshots_but_delete_when_pruning() -> None:
    """GKE refuses every create, update and patch of a PodSnapshot but its own
    (docs/gke-facts.md#section-10): the chart grants none of them, and delete only with
    lifecycle.prune=on."""
    for prune, allowed in (("off", set()), ("dry-run", set()), ("on", {"delete"})):
        rules = server_role(objects(render({"lifecycle": {"prune": prune}})))["rules"]
        verbs = {v for g, r, v in _rule_set(rules) if r == "podsnapshots"}
        assert verbs - {"get", "list", "watch"} == allowed, prune


def test_cluster_role_grants_exactly_what_the_cluster_source_needs(defaults: list[Obj]) -> None:
    """Same rules as manifests/rbac.yaml, the cluster source's own minimal ClusterRole (which
    names OpenReports as the report API, as install.yaml does: ``reports.api=openreports``)."""
    rules = server_role(objects(render({"reports": {"api": "openreports"}})))["rules"]
    expected = [d for d in yaml.safe_load_all(RBAC.read_text()) if d and d["kind"] == "ClusterRole"]
    assert len(expected) == 1, "manifests/rbac.yaml should hold one ClusterRole"
    assert _rule_set(rules) == _rule_set(expected[0]["rules"])
    binding = one(defaults, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == server_role(defaults)["metadata"]["name"]
    (subject,) = binding["subjects"]
    assert subject["name"] == one(defaults, "ServiceAccount")["metadata"]["name"]
    assert (
        subject["name"]
        == one(defaults, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"]
    )


def test_optional_objects_are_off_by_default(defaults: list[Obj]) -> None:
    kinds = {obj["kind"] for obj in defaults}
    optional = {"ServiceMonitor", "PrometheusRule", "NetworkPolicy", "Issuer", "Certificate"}
    assert not kinds & optional


def test_network_policy_admits_the_webhook_and_metrics_ports() -> None:
    objs = objects(render({"networkPolicy": {"enabled": True}}))
    ingress = one(objs, "NetworkPolicy")["spec"]["ingress"]
    ports = {p["port"] for rule in ingress for p in rule["ports"]}
    assert ports == {p["containerPort"] for p in container(objs)["ports"]}


def test_service_monitor_scrapes_the_metrics_port() -> None:
    objs = objects(render({"metrics": {"serviceMonitor": {"enabled": True}}}))
    (endpoint,) = one(objs, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in one(objs, "Service")["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"


# --- values documentation ----------------------------------------------------------------------


def _value_keys(values: Any, prefix: str = "") -> list[str]:
    keys: list[str] = []
    if isinstance(values, dict):
        for key, value in values.items():
            keys.append(prefix + key)
            keys += _value_keys(value, f"{prefix}{key}.")
    return keys


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _in_list_item(lines: list[str], index: int) -> bool:
    """Whether line ``index`` is a field of a list item (its parent line starts with ``- ``)."""
    for previous in reversed(lines[:index]):
        content = previous.strip()
        if content and not content.startswith("#") and _indent(previous) < _indent(lines[index]):
            return content.startswith("- ")
    return False


def test_every_values_key_has_a_comment() -> None:
    """Each key line of values.yaml directly follows a comment (fields of list items excepted)."""
    lines = (CHART / "values.yaml").read_text().splitlines()
    undocumented = [
        line.strip()
        for index, line in enumerate(lines)
        if line.strip()
        and not line.strip().startswith(("#", "- "))
        and ":" in line
        and not _in_list_item(lines, index)
        and not lines[index - 1].strip().startswith("#")
    ]
    assert undocumented == []


def test_schema_describes_every_values_key() -> None:
    with helm_python.Chart.load(CHART) as chart:
        schema = chart.schema
        values = chart.values
    assert schema is not None
    missing = []
    for key in _value_keys(values):
        node: Any = schema
        for part in key.split("."):
            props = node.get("properties", {}) if isinstance(node, dict) else {}
            if part not in props:
                if node.get("type") == "object" and "properties" not in node:
                    break  # free-form map (resources, settings, ...)
                missing.append(key)
                break
            node = props[part]
    assert missing == []


# ---------------------------------------------------------------------------------------------
# Webhook scope, leader election, autoscaling


@pytest.mark.parametrize("values", VALUE_SETS)
def test_chart_renders_no_match_conditions(values: dict[str, Any]) -> None:
    """The leader owns the ``snapready-scope`` matchCondition; a rendered one would make
    `helm upgrade` fight it. The only rendered one is the ownership webhook's own (issue 27),
    which the scope controller keeps (it replaces only its own entry, merge key ``name``)."""
    own = {
        "ownership.snapready.io": ["changes-snapready-metadata"],
        "binding-ownership.snapready.io": ["binds-snapready-metadata"],
        "scheduling.snapready.io": ["changes-gated-placement"],
    }
    for _, webhook in webhooks(objects(render(values))):
        names = [c["name"] for c in webhook.get("matchConditions", [])]
        assert names == own.get(webhook["name"], [])


@pytest.mark.parametrize("scope", ["dynamic", "static"])
def test_webhook_scope_and_lease_reach_the_server_settings(scope: str) -> None:
    objs = objects(render({"webhookScope": scope}, name="prod", namespace="platform"))
    settings = Settings.model_validate(settings_of(objs))
    mutating = one(objs, "MutatingWebhookConfiguration")["metadata"]["name"]
    validating = one(objs, "ValidatingWebhookConfiguration")["metadata"]["name"]
    assert settings.scope.mode == scope
    assert settings.scope.mutating_configuration == mutating
    assert settings.scope.validating_configuration == validating
    assert settings.leader.lease_namespace == "platform"
    assert settings.leader.lease_name == one(objs, "Role")["rules"][1]["resourceNames"][0]


def test_default_scope_is_dynamic() -> None:
    assert Settings.model_validate(settings_of(objects(render({})))).scope.mode == "dynamic"


def test_rbac_writes_only_records_pod_outcomes_and_the_two_own_webhook_configurations() -> None:
    """Writes: origin records (snapready's SnapshotRecords, never PodSnapshots), the outcome
    annotation and the readiness-gate condition (pods, pods/status: patch only), Events, the
    two own webhook configurations."""
    objs = objects(render({}, name="prod", namespace="platform"))
    rules = server_role(objs)["rules"]
    writes = [r for r in rules if set(r["verbs"]) - {"get", "list", "watch"}]
    names = {
        one(objs, "MutatingWebhookConfiguration")["metadata"]["name"],
        one(objs, "ValidatingWebhookConfiguration")["metadata"]["name"],
    }
    assert writes == [
        {
            "apiGroups": ["snapready.io"],
            "resources": ["snapshotrecords"],
            "verbs": ["get", "list", "watch", "create", "delete"],
        },
        {"apiGroups": [""], "resources": ["pods", "pods/status"], "verbs": ["patch"]},
        {
            "apiGroups": ["events.k8s.io"],
            "resources": ["events"],
            "verbs": ["create", "patch", "get"],
        },
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
            "resourceNames": sorted(names),
            "verbs": ["get", "patch"],
        },
    ]
    role, binding = one(objs, "Role"), one(objs, "RoleBinding")
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "platform"
    assert {g for r in role["rules"] for g in r["apiGroups"]} == {"coordination.k8s.io"}
    assert binding["subjects"][0]["name"] == one(objs, "ServiceAccount")["metadata"]["name"]


def test_autoscaling_is_opt_in_and_takes_over_replicas() -> None:
    plain = objects(render({}))
    assert by_kind(plain, "HorizontalPodAutoscaler") == []
    assert one(plain, "Deployment")["spec"]["replicas"] == 2
    scaled = objects(render({"autoscaling": {"enabled": True, "maxReplicas": 7}}))
    hpa = one(scaled, "HorizontalPodAutoscaler")
    assert "replicas" not in one(scaled, "Deployment")["spec"]
    assert hpa["spec"]["scaleTargetRef"]["name"] == one(scaled, "Deployment")["metadata"]["name"]
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 7)
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    assert validate_all(scaled)[0] == []


def test_schema_rejects_an_unknown_webhook_scope() -> None:
    with helm_python.Chart.load(CHART) as chart, pytest.raises(helm_python.HelmError) as caught:
        chart.render({"webhookScope": "everything"}, name="snapready", namespace="snapready")
    assert "webhookScope" in str(caught.value)


def test_the_ownership_webhook_sees_only_updates_of_snapreadys_metadata() -> None:
    """Issue 27: pod UPDATEs reach snapready only through the matchCondition that compares
    snapready's annotations and label in ``object`` and ``oldObject``; the server is told the
    same service account the chart runs it as."""
    from webhook.admission.guard import binding_condition, ownership_condition  # noqa: PLC0415

    objs = objects(render(name="snapready", namespace="webhooks"))
    hooks = {hook["name"]: hook for kind, hook in webhooks(objs) if kind.startswith("Validating")}
    hook = hooks["ownership.snapready.io"]
    assert [r["operations"] for r in hook["rules"]] == [["UPDATE"]]
    assert hook["rules"][0]["resources"] == ["pods", "pods/status"]
    owner = "system:serviceaccount:webhooks:snapready"
    [condition] = hook["matchConditions"]
    assert condition["expression"] == ownership_condition("snapready.io/", owner)
    assert settings_of(objs)["ownership"]["service_account"] == owner
    binding = hooks["binding-ownership.snapready.io"]
    assert [(r["resources"], r["operations"]) for r in binding["rules"]] == [
        (["pods/binding", "bindings"], ["CREATE"])
    ]
    [condition] = binding["matchConditions"]
    assert condition["expression"] == binding_condition("snapready.io/", owner)


def test_the_scheduling_webhook_sees_only_placement_changes_of_gated_pods() -> None:
    """A gated pod's nodeSelector, affinity and tolerations may change until it is ungated
    (KEP-3838): those UPDATEs, and only those, reach ``/validate`` (the same expression as
    ``gated.scheduling_condition``)."""
    from webhook.admission.gated import scheduling_condition  # noqa: PLC0415

    objs = objects(render(name="snapready", namespace="webhooks"))
    hooks = {hook["name"]: hook for kind, hook in webhooks(objs) if kind.startswith("Validating")}
    hook = hooks["scheduling.snapready.io"]
    assert [(r["resources"], r["operations"]) for r in hook["rules"]] == [(["pods"], ["UPDATE"])]
    assert hook["clientConfig"]["service"]["path"] == "/validate"
    [condition] = hook["matchConditions"]
    assert condition["expression"] == scheduling_condition()


def _lifecycle_grants(values: dict[str, Any]) -> set[tuple[Any, ...]]:
    rules = server_role(objects(render(values)))["rules"]
    flat = _rule_set(rules)
    return {
        entry
        for entry in flat
        if entry[1] in ("podsnapshotmanualtriggers", "deployments", "jobs")
        or (entry[1] == "podsnapshots" and entry[2] == "delete")
    }


@pytest.mark.parametrize(
    ("lifecycle", "expected"),
    [
        pytest.param(
            {},
            {("apps", "deployments", "list"), ("batch", "jobs", "list")},
            id="defaults-refresh-off-prune-dry-run-templates-only",
        ),
        pytest.param({"prune": "off"}, set(), id="prune-off-grants-nothing"),
        pytest.param(
            {"prune": "on"},
            {
                ("podsnapshot.gke.io", "podsnapshots", "delete"),
                ("apps", "deployments", "list"),
                ("batch", "jobs", "list"),
            },
            id="prune-on-grants-delete",
        ),
        pytest.param(
            {"refresh": "on", "prune": "off"},
            {
                ("podsnapshot.gke.io", "podsnapshotmanualtriggers", "create"),
                ("podsnapshot.gke.io", "podsnapshotmanualtriggers", "get"),
            },
            id="refresh-on-grants-trigger-create",
        ),
    ],
)
def test_lifecycle_rbac_follows_the_values(
    lifecycle: dict[str, Any], expected: set[tuple[Any, ...]]
) -> None:
    assert _lifecycle_grants({"lifecycle": lifecycle}) == expected


def test_lifecycle_values_reach_the_server_settings() -> None:
    values = {
        "lifecycle": {
            "refresh": "on",
            "prune": "on",
            "unusedDays": 3,
            "pruneGraceSeconds": 60,
            "prunePerMinute": 2,
            "pruneBurst": 1,
        }
    }
    settings = Settings.model_validate(settings_of(objects(render(values))))
    assert settings.lifecycle.refresh == "on"
    assert settings.lifecycle.prune == "on"
    assert settings.lifecycle.unused_days == 3
    assert settings.lifecycle.prune_grace_seconds == 60
    assert settings.lifecycle.prune_per_minute == 2
    assert settings.lifecycle.prune_burst == 1
    defaults = Settings.model_validate(settings_of(objects(render({}))))
    assert (defaults.lifecycle.refresh, defaults.lifecycle.prune) == ("off", "dry-run")


def test_schema_rejects_an_unknown_prune_mode() -> None:
    with pytest.raises(Exception, match="prune"):
        render({"lifecycle": {"prune": "yes"}})


# --- policy reports (issue 33) ------------------------------------------------------------------


def _report_grants(values: dict[str, Any]) -> set[tuple[Any, ...]]:
    flat = _rule_set(server_role(objects(render(values)))["rules"])
    return {e for e in flat if e[0] in ("openreports.io", "wgpolicyk8s.io")}


REPORT_VERBS = ("get", "list", "watch", "create", "patch", "delete")


@pytest.mark.parametrize(
    ("reports", "expected"),
    [
        pytest.param({}, set(), id="auto-without-a-served-report-api-grants-nothing"),
        pytest.param({"api": "off"}, set(), id="off-grants-nothing"),
        pytest.param(
            {"api": "openreports"},
            {("openreports.io", "reports", v) for v in REPORT_VERBS},
            id="openreports-grants-its-reports-only",
        ),
        pytest.param(
            {"api": "wgpolicyk8s"},
            {("wgpolicyk8s.io", "policyreports", v) for v in REPORT_VERBS},
            id="wgpolicyk8s-grants-its-policyreports-only",
        ),
        pytest.param(
            {"installCRDs": True},
            {("openreports.io", "reports", v) for v in REPORT_VERBS},
            id="installed-crds-mean-openreports",
        ),
    ],
)
def test_report_rbac_is_one_api_group(reports: dict[str, Any], expected: set[Any]) -> None:
    """The ClusterRole grants report verbs on the one group the chart resolved (value
    ``reports.api``; ``auto`` asks Helm's discovery, which knows no report CRD offline), no
    cluster-scoped report kind, no update, and the server is told the same API."""
    objs = objects(render({"reports": reports}))
    assert _report_grants({"reports": reports}) == expected
    api = {"openreports.io": "openreports", "wgpolicyk8s.io": "wgpolicyk8s"}
    granted = {api[group] for group, _, _ in expected} or {"off"}
    assert {Settings.model_validate(settings_of(objs)).reports.api} == granted


def test_report_values_reach_the_server_settings() -> None:
    values = {
        "reports": {
            "api": "wgpolicyk8s",
            "results": ["fail"],
            "writesPerSecond": 2,
            "writeBurst": 3,
            "auditObjectsPerSecond": 7,
            "auditPageSize": 40,
            "auditPeriodSeconds": 600,
            "templates": False,
        }
    }
    reports = Settings.model_validate(settings_of(objects(render(values)))).reports
    assert reports.model_dump() == {
        "api": "wgpolicyk8s",
        "results": ["fail"],
        "writes_per_second": 2,
        "write_burst": 3,
        "audit_objects_per_second": 7,
        "audit_page_size": 40,
        "audit_period_seconds": 600,
        "templates": False,
    }
    defaults = Settings.model_validate(settings_of(objects(render({})))).reports
    assert defaults.model_dump() == {**Settings().reports.model_dump(), "api": "off"}


def test_templates_are_listed_for_the_audit_even_without_pruning() -> None:
    """The audit lists workload templates (``reports.templates``), so their list grant
    follows reports as well as the lifecycle."""
    off = {"lifecycle": {"prune": "off"}}
    assert not any(
        e[1] == "deployments" for e in _rule_set(server_role(objects(render(off)))["rules"])
    )
    on = {**off, "reports": {"api": "openreports"}}
    assert ("apps", "deployments", "list") in _rule_set(server_role(objects(render(on)))["rules"])
    quiet = {**off, "reports": {"api": "openreports", "templates": False}}
    assert not any(
        e[1] == "deployments" for e in _rule_set(server_role(objects(render(quiet)))["rules"])
    )


def test_the_openreports_crds_come_with_the_release_only_when_asked() -> None:
    """``reports.installCRDs`` renders the chart's copy of OpenReports' own CRDs, identical to
    the test copies from openreports/reports-api (tests/data/reports/PROVENANCE.md), and
    aggregates reading them into ``view``; by default neither."""
    assert by_kind(objects(render({})), "CustomResourceDefinition") == []
    objs = objects(render({"reports": {"installCRDs": True}}))
    crds = {c["metadata"]["name"]: c for c in by_kind(objs, "CustomResourceDefinition")}
    source = ROOT / "tests" / "data" / "reports"
    for name, file in (
        ("reports.openreports.io", "openreports.io_reports.yaml"),
        ("clusterreports.openreports.io", "openreports.io_clusterreports.yaml"),
    ):
        assert crds[name] == yaml.safe_load((source / file).read_text())
        assert (CHART / "files" / "crds" / file).read_bytes() == (source / file).read_bytes()
    (view,) = [
        r for r in by_kind(objs, "ClusterRole") if r["metadata"]["name"].endswith("-reports-view")
    ]
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert _rule_set(view["rules"]) == {
        ("openreports.io", plural, verb)
        for plural in ("reports", "clusterreports")
        for verb in ("get", "list", "watch")
    }
    assert validate_all(objs)[0] == []


def test_schema_rejects_an_unknown_report_api_or_result() -> None:
    for values in ({"reports": {"api": "kyverno"}}, {"reports": {"results": ["fine"]}}):
        with pytest.raises(Exception, match="reports"):
            render(values)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param(
            {"leaderElection": {"enabled": False}},
            "leaderElection.enabled=false makes every replica write",
            id="no-leader-election-with-2-replicas",
        ),
        pytest.param(
            {
                "leaderElection": {"enabled": False},
                "replicaCount": 1,
                "autoscaling": {"enabled": True},
            },
            "run one replica",
            id="no-leader-election-with-the-hpa",
        ),
        pytest.param(
            {"timeoutSeconds": 1},
            "timeoutSeconds (1) must exceed the bucket check's "
            "settings.storage.timeout_seconds (2)",
            id="webhook-timeout-under-the-bucket-check",
        ),
        pytest.param(
            {"timeoutSeconds": 3, "settings": {"storage": {"timeout_seconds": 4}}},
            "timeoutSeconds (3) must exceed",
            id="webhook-timeout-under-a-raised-bucket-check",
        ),
    ],
)
def test_values_that_would_break_a_running_cluster_refuse_to_render(
    values: dict[str, Any], message: str
) -> None:
    """Found by a new-user trial (2026-12-07): each rendered silently. Without leader election
    every replica writes; an API server timeout shorter than the bucket check gives up on
    PodSnapshotStorageConfigs before snapready answers."""
    with pytest.raises(helm_python.HelmError) as caught:
        render(values)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    "values",
    [
        {"leaderElection": {"enabled": False}, "replicaCount": 1},
        {"timeoutSeconds": 3},
        {"timeoutSeconds": 1, "settings": {"storage": {"enabled": False}}},
    ],
)
def test_the_same_values_render_when_they_are_safe(values: dict[str, Any]) -> None:
    assert objects(render(values))


def test_a_readiness_gate_on_one_replica_is_warned_in_the_notes() -> None:
    notes = render({"readinessGate": True, "replicaCount": 1})["snapready/templates/NOTES.txt"]
    assert "WARNING: readinessGate is on with replicaCount 1" in notes
    assert "WARNING" not in render({"readinessGate": True})["snapready/templates/NOTES.txt"]
