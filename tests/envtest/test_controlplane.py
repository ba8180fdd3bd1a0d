"""Smoke tests of the envtest control plane: it is real, shared, and behaves like a cluster."""

from __future__ import annotations

import base64
import copy
import http.server
import json
import ssl
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.envtest.controlplane import GKE_CONTROLLER, ROOT, ControlPlane
from tests.envtest.plugin import (
    GUARD_MESSAGE,
    install_crds,
    service_account_token,
    snapready_writes,
    wait_for,
)
from tests.support.identity import IdentityFactory
from webhook.kube.token_volume import is_service_account_volume

K8S_VERSION = "v1.36.3"
GROUP, VERSION = "podsnapshot.gke.io", "v1"
EXAMPLES = ROOT / "manifests" / "examples" / "policies.yaml"

# A PodSnapshotPolicy as the CRD expects it: groupRetentionPolicy inside groupByLabelValue.
POLICY: dict[str, Any] = {
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "PodSnapshotPolicy",
    "metadata": {"name": "llm-policy"},
    "spec": {
        "selector": {"matchLabels": {"app": "llm"}},
        "storageConfigName": "snapshots-us-central1",
        "snapshotScope": "whole-pod",
        "triggerConfig": {"type": "workload"},
        "retentionConfig": {"lastAccessTimeout": "30d"},
        "snapshotGroupingRules": {
            "groupByLabelValue": {
                "labels": ["model"],
                "groupRetentionPolicy": {"maxSnapshotCountPerGroup": 3},
            }
        },
    },
}


def test_readyz_and_version(control_plane: ControlPlane) -> None:
    status, body = control_plane.get("/readyz")
    assert (status, body) == (200, "ok")
    status, body = control_plane.get("/version")
    assert status == 200
    assert json.loads(body)["gitVersion"] == K8S_VERSION
    assert control_plane.url.startswith("https://127.0.0.1:")


def test_anonymous_and_unknown_clients_are_not_admin(control_plane: ControlPlane) -> None:
    """The client CA really authenticates: no certificate means no access to namespaces."""
    context = ssl.create_default_context(cafile=str(control_plane.ca_file))
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(f"{control_plane.url}/api/v1/namespaces", context=context)
    assert caught.value.code in {401, 403}


def test_policy_crd_accepts_valid_and_strictly_rejects_misplaced_retention(
    podsnapshot_crds: list[str], kube_admin: client.ApiClient, namespace: str
) -> None:
    assert "podsnapshotpolicies.podsnapshot.gke.io" in podsnapshot_crds
    custom = client.CustomObjectsApi(kube_admin)
    created = cast(
        "dict[str, Any]",
        custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, "podsnapshotpolicies", POLICY, field_validation="Strict"
        ),
    )
    grouping = created["spec"]["snapshotGroupingRules"]["groupByLabelValue"]
    assert grouping["groupRetentionPolicy"] == {"maxSnapshotCountPerGroup": 3}
    assert created["spec"]["triggerConfig"]["postCheckpoint"] == "resume"  # CRD default applied

    misplaced = copy.deepcopy(POLICY)
    misplaced["metadata"]["name"] = "misplaced"
    rules = misplaced["spec"]["snapshotGroupingRules"]
    rules["groupRetentionPolicy"] = rules["groupByLabelValue"].pop("groupRetentionPolicy")
    with pytest.raises(ApiException) as caught:
        custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, "podsnapshotpolicies", misplaced, field_validation="Strict"
        )
    assert caught.value.status == 400
    message = json.loads(str(caught.value.body))["message"]
    assert "strict decoding error" in message
    assert 'unknown field "spec.snapshotGroupingRules.groupRetentionPolicy"' in message

    # Without strict validation the API server accepts it and silently prunes the field.
    pruned = cast(
        "dict[str, Any]",
        custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, "podsnapshotpolicies", misplaced, field_validation="Ignore"
        ),
    )
    assert "groupRetentionPolicy" not in pruned["spec"]["snapshotGroupingRules"]


def test_example_policies_pass_strict_validation(
    podsnapshot_crds: list[str], kube_admin: client.ApiClient, namespace: str
) -> None:
    """manifests/examples/policies.yaml is what the CRDs accept, no unknown fields (dry run)."""
    custom = client.CustomObjectsApi(kube_admin)
    kinds: list[str] = []
    for document in yaml.safe_load_all(EXAMPLES.read_text()):
        if not document:
            continue
        group, version = document["apiVersion"].split("/")
        kind = document["kind"]
        kinds.append(kind)
        if kind == "PodSnapshotStorageConfig":  # cluster-scoped
            custom.create_cluster_custom_object(
                group,
                version,
                "podsnapshotstorageconfigs",
                document,
                dry_run="All",
                field_validation="Strict",
            )
        else:
            document["metadata"]["namespace"] = namespace
            custom.create_namespaced_custom_object(
                group,
                version,
                namespace,
                "podsnapshotpolicies",
                document,
                dry_run="All",
                field_validation="Strict",
            )
    assert sorted(kinds) == ["PodSnapshotPolicy", "PodSnapshotStorageConfig"]


def test_crd_install_is_idempotent(
    podsnapshot_crds: list[str], kube_admin: client.ApiClient
) -> None:
    assert install_crds(kube_admin) == podsnapshot_crds


def owned_by(obj: Any, owner_uid: str | None) -> bool:
    """``obj`` (a typed API object) has an ownerReference to ``owner_uid``."""
    metadata: client.V1ObjectMeta | None = obj.metadata
    references = (metadata.owner_references if metadata else None) or []
    return any(reference.uid == owner_uid for reference in references)


def test_deployment_gets_replicaset_and_pods_then_garbage_collected(
    kube_admin: client.ApiClient, namespace: str
) -> None:
    apps, core = client.AppsV1Api(kube_admin), client.CoreV1Api(kube_admin)
    labels = {"app": "smoke"}
    deployment = client.V1Deployment.model_validate(
        {
            "metadata": {"name": "smoke"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
                },
            },
        }
    )
    created = apps.create_namespaced_deployment(namespace, deployment)
    assert created.metadata is not None
    deployment_uid = created.metadata.uid

    def replica_sets() -> list[client.V1ReplicaSet]:
        items = apps.list_namespaced_replica_set(namespace).items
        return [rs for rs in items if owned_by(rs, deployment_uid)]

    (replica_set,) = wait_for("a ReplicaSet owned by the Deployment", replica_sets)
    assert replica_set.metadata is not None
    replica_set_uid = replica_set.metadata.uid

    def pods() -> list[client.V1Pod]:
        items = core.list_namespaced_pod(namespace, label_selector="app=smoke").items
        owned = [pod for pod in items if owned_by(pod, replica_set_uid)]
        return owned if len(owned) == 2 else []

    for pod in wait_for("2 Pods owned by the ReplicaSet", pods):
        wire = pod.to_dict(serialize=True)
        assert wire["status"]["phase"] == "Pending"  # no nodes: nothing schedules them
        assert wire["spec"]["serviceAccountName"] == "default"

    # The garbage collector removes the dependents of a foreground-deleted Deployment.
    apps.delete_namespaced_deployment("smoke", namespace, propagation_policy="Foreground")
    wait_for("the ReplicaSet to be garbage collected", lambda: not replica_sets(), timeout=60)


def test_pod_gets_service_account_volume_and_root_ca(
    control_plane: ControlPlane, kube_admin: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(kube_admin)
    pod = client.V1Pod.model_validate(
        {
            "metadata": {"name": "sa"},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
        }
    )
    spec = core.create_namespaced_pod(namespace, pod).to_dict(serialize=True)["spec"]
    volumes = [v for v in spec["volumes"] if v["name"].startswith("kube-api-access-")]
    assert len(volumes) == 1, spec["volumes"]
    sources = volumes[0]["projected"]["sources"]
    assert sources[0]["serviceAccountToken"]["path"] == "token"
    assert sources[1]["configMap"]["name"] == "kube-root-ca.crt"
    # The volume the fingerprint leaves out is exactly what this kube-apiserver writes: were it
    # not, every replica would hash its random name and no restore would ever be predicted.
    assert is_service_account_volume(volumes[0]), volumes[0]
    mounts = spec["containers"][0]["volumeMounts"]
    assert [m["mountPath"] for m in mounts] == ["/var/run/secrets/kubernetes.io/serviceaccount"]

    def root_ca() -> str:
        try:
            config_map = core.read_namespaced_config_map("kube-root-ca.crt", namespace)
        except ApiException as error:
            if error.status == 404:
                return ""
            raise
        return (config_map.data or {}).get("ca.crt", "")

    assert wait_for("kube-root-ca.crt", root_ca) == control_plane.ca_file.read_text()


def test_rbac_is_enforced_for_service_account_tokens(
    control_plane: ControlPlane, kube_admin: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    """A ServiceAccount bound to a ClusterRole in its namespace lists pods there, not elsewhere."""
    rbac = client.RbacAuthorizationV1Api(kube_admin)
    role_name = f"{namespace}-pod-reader"
    rbac.create_cluster_role(
        client.V1ClusterRole.model_validate(
            {
                "metadata": {"name": role_name},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
            }
        )
    )
    try:
        binding = {
            "metadata": {"name": "reader"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role_name,
            },
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
        }
        rbac.create_namespaced_role_binding(namespace, client.V1RoleBinding.model_validate(binding))
        token = service_account_token(kube_admin, namespace, "reader")
        kubeconfig = control_plane.token_kubeconfig(
            tmp_path / "kubeconfig", token, namespace=namespace
        )
        reader = ControlPlane.client_from_kubeconfig(kubeconfig)
        try:
            core = client.CoreV1Api(reader)

            def allowed() -> bool:  # the authorizer's RBAC informers may lag a moment
                try:
                    core.list_namespaced_pod(namespace)
                except ApiException as error:
                    if error.status == 403:
                        return False
                    raise
                return True

            wait_for("the RoleBinding to take effect", allowed, timeout=10)
            with pytest.raises(ApiException) as caught:
                core.list_namespaced_pod("kube-system")
            assert caught.value.status == 403
            pod = client.V1Pod.model_validate(
                {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
            )
            with pytest.raises(ApiException) as caught:
                core.create_namespaced_pod(namespace, pod)
            assert caught.value.status == 403
        finally:
            reader.close()  # type: ignore[no-untyped-call]
    finally:
        rbac.delete_cluster_role(role_name)


class _DenyLabelled(http.server.BaseHTTPRequestHandler):
    """A validating admission webhook: denies Pods labelled ``deny=yes``, allows the rest."""

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        request = review["request"]
        labels = request["object"]["metadata"].get("labels") or {}
        allowed = labels.get("deny") != "yes"
        response: dict[str, Any] = {"uid": request["uid"], "allowed": allowed}
        if not allowed:
            response["status"] = {"code": 403, "message": "denied by the envtest webhook"}
        body = json.dumps({**review, "response": response}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: no request log on stderr."""


def test_apiserver_calls_admission_webhooks_on_loopback(
    control_plane: ControlPlane, kube_admin: client.ApiClient, namespace: str
) -> None:
    """The apiserver reaches an HTTPS webhook on 127.0.0.1 (what snapready tests will need)."""
    pki = control_plane.directory / "pki"  # the apiserver's serving cert is valid for 127.0.0.1
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _DenyLabelled)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki / "apiserver.crt", pki / "apiserver.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    admission = client.AdmissionregistrationV1Api(kube_admin)
    name = f"{namespace}-deny"
    webhook = {
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "deny.envtest.snapready.test",
                "clientConfig": {
                    "url": f"https://127.0.0.1:{server.server_address[1]}/validate",
                    "caBundle": base64.b64encode(control_plane.ca_file.read_bytes()).decode(),
                },
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                    }
                ],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 5,
            }
        ],
    }
    admission.create_validating_webhook_configuration(
        client.V1ValidatingWebhookConfiguration.model_validate(webhook)
    )
    core = client.CoreV1Api(kube_admin)

    def pod(name: str, labels: dict[str, str]) -> client.V1Pod:
        return client.V1Pod.model_validate(
            {
                "metadata": {"name": name, "labels": labels},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
            }
        )

    def denied() -> str:  # the webhook configuration reaches the admission chain shortly
        try:
            core.create_namespaced_pod(namespace, pod("probe", {"deny": "yes"}), dry_run="All")
        except ApiException as error:
            if error.status == 403:
                return str(json.loads(str(error.body))["message"])
            raise
        return ""

    try:
        assert "denied by the envtest webhook" in wait_for("the webhook to deny", denied)
        created = core.create_namespaced_pod(namespace, pod("allowed", {"deny": "no"}))
        assert created.metadata is not None
        assert created.metadata.name == "allowed"
    finally:
        admission.delete_validating_webhook_configuration(name)
        server.shutdown()
        server.server_close()


# --------------------------------------------------------------------------------------------
# GKE's guard on PodSnapshots, GKE's identity and the audit log


def snapshot_body(name: str) -> dict[str, Any]:
    """A PodSnapshot as GKE's controller creates it."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodSnapshot",
        "metadata": {"name": name, "annotations": {"podsnapshot.gke.io/origin-pod": "origin"}},
        "spec": {"policyName": "llm-policy"},
    }


def refusal(call: Any, *args: Any, **kwargs: Any) -> tuple[int, str]:
    """(status, message) of an API call expected to be refused."""
    with pytest.raises(ApiException) as caught:
        call(*args, **kwargs)
    return caught.value.status, str(json.loads(str(caught.value.body))["message"])


def chart_grants_patch_on_podsnapshots(rendered: list[dict[str, Any]]) -> bool:
    """Whether the chart's ClusterRole (as rendered now) grants patch on podsnapshots."""
    return any(
        GROUP in rule.get("apiGroups", [])
        and "podsnapshots" in rule.get("resources", [])
        and "patch" in rule.get("verbs", [])
        for role in rendered
        if role["kind"] == "ClusterRole"
        for rule in role["rules"]
    )


def test_gke_guard_lets_only_gke_write_podsnapshots(
    podsnapshot_crds: list[str],
    kube_admin: client.ApiClient,
    kube_gke: client.ApiClient,
    namespace: str,
    snapready_identity: IdentityFactory,
) -> None:
    """GKE's ValidatingAdmissionPolicy: create, update, patch (metadata or status) of a
    PodSnapshot are refused to everyone but GKE's controller, admin included; DELETE is not
    guarded. snapready's ServiceAccount with the chart's RBAC is refused too: by RBAC when the
    chart does not grant patch, else by the guard."""
    admin = client.CustomObjectsApi(kube_admin)
    gke = client.CustomObjectsApi(kube_gke)
    status, message = refusal(
        admin.create_namespaced_custom_object,
        GROUP, VERSION, namespace, "podsnapshots", snapshot_body("by-admin"),
    )  # fmt: skip
    assert status == 422 and GUARD_MESSAGE in message
    assert "gke-pod-snapshot-validating-admission-policy" in message

    gke.create_namespaced_custom_object(
        GROUP, VERSION, namespace, "podsnapshots", snapshot_body("snap")
    )
    ready = {"type": "Ready", "status": "True", "reason": "AllSnapshotsAvailable"}
    ready |= {"lastTransitionTime": "2026-12-01T10:00:00Z", "message": ""}
    gke.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, "podsnapshots", "snap", {"status": {"conditions": [ready]}}
    )
    finalizer = {"metadata": {"finalizers": ["podsnapshot.gke.io/cleanup"]}}
    gke.patch_namespaced_custom_object(GROUP, VERSION, namespace, "podsnapshots", "snap", finalizer)

    annotation = {"metadata": {"annotations": {"snapready.io/origin": "{}"}}}
    for call, body in (
        (admin.patch_namespaced_custom_object, annotation),
        (admin.patch_namespaced_custom_object_status, {"status": {"conditions": []}}),
        (admin.patch_namespaced_custom_object, {"metadata": {"finalizers": []}}),
    ):
        status, message = refusal(call, GROUP, VERSION, namespace, "podsnapshots", "snap", body)
        assert status == 422 and GUARD_MESSAGE in message

    identity = snapready_identity(namespace, release=f"guard-probe-{namespace[-6:]}")
    probe = ControlPlane.client_from_kubeconfig(identity.kubeconfig)
    try:
        as_snapready = client.CustomObjectsApi(probe)
        expected = 422 if chart_grants_patch_on_podsnapshots(identity.rendered) else 403
        status, message = refusal(
            as_snapready.patch_namespaced_custom_object,
            GROUP, VERSION, namespace, "podsnapshots", "snap", annotation,
        )  # fmt: skip
        assert status == expected, message
        assert (GUARD_MESSAGE in message) == (expected == 422)
        listed = cast(
            "dict[str, Any]",
            as_snapready.list_namespaced_custom_object(GROUP, VERSION, namespace, "podsnapshots"),
        )
        assert [item["metadata"]["name"] for item in listed["items"]] == ["snap"]
    finally:
        probe.close()  # type: ignore[no-untyped-call]

    obj = cast(
        "dict[str, Any]",
        gke.get_namespaced_custom_object(GROUP, VERSION, namespace, "podsnapshots", "snap"),
    )
    assert "snapready.io/origin" not in (obj["metadata"].get("annotations") or {})
    assert obj["metadata"]["finalizers"] == ["podsnapshot.gke.io/cleanup"]
    # DELETE is not guarded (GKE's cleanup advice deletes as a user); GKE releases the finalizer.
    admin.delete_namespaced_custom_object(GROUP, VERSION, namespace, "podsnapshots", "snap")
    gke.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, "podsnapshots", "snap", {"metadata": {"finalizers": None}}
    )


def test_audit_log_records_podsnapshot_writes_and_flags_snapready(
    control_plane: ControlPlane,
    podsnapshot_crds: list[str],
    kube_admin: client.ApiClient,
    kube_gke: client.ApiClient,
    namespace: str,
) -> None:
    """Every write to a PodSnapshot is in the audit log with its user and answer; the
    end-of-run check flags only snapready's test ServiceAccounts' create/update/patch."""
    gke = client.CustomObjectsApi(kube_gke)
    gke.create_namespaced_custom_object(
        GROUP, VERSION, namespace, "podsnapshots", snapshot_body("audited")
    )
    with pytest.raises(ApiException):
        client.CustomObjectsApi(kube_admin).patch_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            "podsnapshots",
            "audited",
            {"metadata": {"labels": {"a": "b"}}},
        )

    def mine() -> list[dict[str, Any]]:
        return [
            e
            for e in control_plane.audit_events()
            if (e.get("objectRef") or {}).get("namespace") == namespace
        ]

    events = wait_for("both writes audited", lambda: mine() if len(mine()) >= 2 else [])
    seen = {(e["user"]["username"], e["verb"], e["responseStatus"]["code"]) for e in events}
    assert (GKE_CONTROLLER, "create", 201) in seen
    assert ("admin", "patch", 422) in seen
    assert snapready_writes(events) == []

    flagged = [
        {**events[0], "user": {"username": f"system:serviceaccount:{namespace}:snapready-abc"}},
        {**events[0], "user": {"username": f"system:serviceaccount:{namespace}:tenant"}},
        {**events[0], "user": {"username": f"system:serviceaccount:{namespace}:snapready-abc"}}
        | {"verb": "delete"},
    ]
    assert snapready_writes(flagged) == flagged[:1]
