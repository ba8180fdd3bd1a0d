"""Cluster mode against the real API server (the shared envtest control plane, v1.36.3).

Every cache is exercised the way a cluster feeds it: objects are created, updated and deleted
through the API, and the source's state (and the decisions an engine reading it makes) follow
within a deadline. ``SpyTransport`` (``tests/support/kube_real.py``) forwards every request to
the production ``KubeTransport`` and records what the server answered, for the protocol checks
(bookmarks, 410 Gone, RBAC). Tests that change the API surface itself (CRDs deleted, ComputeClasses
installed) run on a private control plane: ``test_real_apiserver_apis.py``.

Objects here are cluster-wide visible (Nodes, storage configs, namespaces): their names are unique
per test and they are deleted afterwards; assertions look only at the test's own objects.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.cluster.conftest import FAST, StartCluster, kube_settings
from tests.conftest import (
    ROOT,
    RunningServer,
    start_server,
    stop_server,
    wait_ready,
)
from tests.envtest.controlplane import ControlPlane
from tests.envtest.plugin import service_account_token, unique_name, wait_for
from tests.support.identity import IdentityFactory
from tests.support.kube_real import (
    ALL_CACHES,
    COMPUTE_CLASSES,
    DISRUPTION_BUDGETS,
    GKE_EVENTS,
    GROUP,
    NAMESPACES,
    NODES,
    POLICIES,
    RECORDS,
    SELECTED_PODS,
    SNAPSHOTS,
    STORAGE_CONFIGS,
    VERSION,
    create_policy,
    delete_quietly,
    etcd_compact,
    etcd_read_at,
    etcd_url,
    node,
    pod_review,
    policy,
    selected_by,
    storage_config,
    validate,
)
from webhook.admission.engine import Engine
from webhook.cluster.manager import start_cluster
from webhook.kube.gke import (
    ACCELERATOR,
    ACCELERATOR_COUNT,
    ARCHITECTURE,
    INSTANCE_TYPE,
    MACHINE_FAMILY,
    NODE_POOL,
)
from webhook.kube.matching import Policy
from webhook.server.app import AdmissionApp
from webhook.snapshots.state import ClusterState, NodeView

RBAC = ROOT / "manifests" / "rbac.yaml"
K8S_VERSION = "1.36.3"  # tests/envtest builds kube-apiserver v1.36.3: no "-gke.N" suffix


def find_policy(state: ClusterState, namespace: str, name: str) -> Policy | None:
    """The cached policy ``namespace/name``, if any."""
    return next(
        (p for p in state.policies.all() if (p.namespace, p.name) == (namespace, name)), None
    )


def version(event: dict[str, Any]) -> str:
    """The resourceVersion a watch event carries."""
    return str(event["object"]["metadata"]["resourceVersion"])


def rules_of(decision: Any) -> set[str]:
    """The rule ids of a decision's findings."""
    return {finding.rule for finding in decision.audit.get("findings") or []}


# --------------------------------------------------------------------------------------------
# list + watch of every cache


def test_policies_and_storage_configs_follow_create_update_delete(
    kube_admin: client.ApiClient,
    podsnapshot_crds: list[str],
    namespace: str,
    start_cluster: StartCluster,
) -> None:
    custom = client.CustomObjectsApi(kube_admin)
    config_name = unique_name("storage")
    create_policy(kube_admin, policy("batch", namespace, {"app": "batch"}, trigger="manual"))
    custom.create_cluster_custom_object(
        GROUP, "v1", "podsnapshotstorageconfigs", storage_config(config_name, "bucket-a")
    )
    try:
        cluster = start_cluster()
        # Listed: what existed before the source started.
        listed = find_policy(cluster.state(), namespace, "batch")
        assert listed is not None
        assert (listed.trigger_type, listed.storage_config_name) == (
            "manual",
            "snapshots-us-central1",
        )
        assert cluster.state().storage_configs[config_name].bucket == "bucket-a"
        batch_pod = pod_review({"app": "batch"}, namespace)
        decision = validate(cluster.engine, batch_pod)
        assert (decision.allowed, selected_by(decision)) == (False, "batch")

        # Watched: created, updated.
        create_policy(kube_admin, policy("web", namespace, {"app": "web"}))
        wait_for("the new policy", lambda: find_policy(cluster.state(), namespace, "web"))
        custom.patch_namespaced_custom_object(
            GROUP,
            "v1",
            namespace,
            "podsnapshotpolicies",
            "batch",
            {"spec": {"triggerConfig": {"type": "workload"}}},
        )
        wait_for(
            "the updated trigger",
            lambda: (
                getattr(find_policy(cluster.state(), namespace, "batch"), "trigger_type", "")
                == "workload"
            ),
        )
        custom.patch_cluster_custom_object(
            GROUP,
            "v1",
            "podsnapshotstorageconfigs",
            config_name,
            {"spec": {"snapshotStorageConfig": {"gcs": {"bucket": "bucket-b"}}}},
        )
        wait_for(
            "the updated bucket",
            lambda: cluster.state().storage_configs[config_name].bucket == "bucket-b",
        )

        # A policy the API accepts (the CRD leaves operators free) but snapready cannot read.
        reflector = cluster.source.reflectors["podsnapshotpolicies"]
        broken = {"matchExpressions": [{"key": "app", "operator": "Sometimes"}]}
        create_policy(kube_admin, policy("broken", namespace, {}, selector=broken))
        wait_for("the invalid policy counted", lambda: f"{namespace}/broken" in reflector.invalid)
        assert find_policy(cluster.state(), namespace, "broken") is None
        assert "invalid" in cluster.status("podsnapshotpolicies")

        # Deleted.
        for name in ("batch", "broken"):
            custom.delete_namespaced_custom_object(
                GROUP, "v1", namespace, "podsnapshotpolicies", name
            )
        custom.delete_cluster_custom_object(GROUP, "v1", "podsnapshotstorageconfigs", config_name)
        wait_for(
            "the deletions",
            lambda: (
                find_policy(cluster.state(), namespace, "batch") is None
                and config_name not in cluster.state().storage_configs
                and f"{namespace}/broken" not in reflector.invalid
            ),
        )
        decision = validate(cluster.engine, batch_pod)
        assert (decision.allowed, selected_by(decision)) == (True, None)
        assert find_policy(cluster.state(), namespace, "web") is not None
    finally:
        delete_quietly(
            custom.delete_cluster_custom_object,
            GROUP,
            "v1",
            "podsnapshotstorageconfigs",
            config_name,
        )


def test_namespaces_keep_only_snapready_labels_and_change_decisions(
    kube_admin: client.ApiClient, podsnapshot_crds: list[str], start_cluster: StartCluster
) -> None:
    core = client.CoreV1Api(kube_admin)
    name = unique_name("labels")
    labels = {"snapready.io/enforcement": "warn", "team": "ml", "snapready.test/envtest": "1"}
    core.create_namespace(
        client.V1Namespace.model_validate({"metadata": {"name": name, "labels": labels}})
    )
    try:
        create_policy(kube_admin, policy("llm", name, {"app": "llm"}))
        cluster = start_cluster()

        def kept() -> dict[str, str] | None:
            found = cluster.state().namespace_labels.get(name)
            return None if found is None else dict(found)

        wait_for("the listed policy", lambda: find_policy(cluster.state(), name, "llm"))
        assert kept() == {"snapready.io/enforcement": "warn"}, "only snapready.io/ labels"
        assert "default" not in cluster.state().namespace_labels, "no snapready.io/ label"
        llm_pod = pod_review({"app": "llm"}, name)
        decision = validate(cluster.engine, llm_pod)
        assert decision.allowed, "warn mode from the namespace label"
        assert any("[test-selected]" in line for line in decision.warnings)

        patch = {"snapready.io/enforcement": None, "snapready.io/ignore": "true"}
        core.patch_namespace(name, {"metadata": {"labels": patch}})
        wait_for("the ignore label", lambda: kept() == {"snapready.io/ignore": "true"})
        decision = validate(cluster.engine, llm_pod)
        assert (decision.allowed, decision.warnings, selected_by(decision)) == (True, (), None)

        core.patch_namespace(name, {"metadata": {"labels": {"snapready.io/ignore": None}}})
        wait_for("no snapready label left: not kept", lambda: kept() is None)
        decision = validate(cluster.engine, llm_pod)
        assert (decision.allowed, selected_by(decision)) == (False, "llm")  # enforce

        core.patch_namespace(name, {"metadata": {"labels": {"snapready.io/ignore": "true"}}})
        wait_for("the label back", lambda: kept() == {"snapready.io/ignore": "true"})
        core.delete_namespace(name)
        wait_for("the namespace deleted", lambda: kept() is None, timeout=45)
    finally:
        delete_quietly(core.delete_namespace, name)


def test_nodes_become_pool_facts(kube_admin: client.ApiClient, start_cluster: StartCluster) -> None:
    core = client.CoreV1Api(kube_admin)
    pool = unique_name("pool")
    first, second, plain = (f"{pool}-{suffix}" for suffix in ("a", "b", "plain"))
    l4 = {
        NODE_POOL: pool,
        MACHINE_FAMILY: "g2",
        INSTANCE_TYPE: "g2-standard-48",
        ACCELERATOR: "nvidia-l4",
        ACCELERATOR_COUNT: "4",
        ARCHITECTURE: "amd64",
        "kubernetes.io/hostname": first,
        "topology.kubernetes.io/zone": "us-central1-a",
    }
    created = [first]
    core.create_node(node(first, l4))
    try:
        cluster = start_cluster()
        kept = {key: l4[key] for key in (ARCHITECTURE, MACHINE_FAMILY, ACCELERATOR, INSTANCE_TYPE)}
        kept[ACCELERATOR_COUNT] = "4"
        assert cluster.state().nodes[first] == NodeView(pool, tuple(sorted(kept.items()))), (
            "only the GKE fact labels are kept"
        )
        # Watched: a node without the family label (derived from its instance type), and one
        # outside any GKE pool (not kept).
        created += [second, plain]
        core.create_node(
            node(second, {NODE_POOL: pool, INSTANCE_TYPE: "g2-standard-96", ACCELERATOR_COUNT: "8"})
        )
        core.create_node(node(plain, {INSTANCE_TYPE: "n2-standard-8"}))

        def facts() -> Any:
            return cluster.state().node_pools.get(pool)

        wait_for("the second node", lambda: getattr(facts(), "node_count", 0) == 2)
        assert facts().instance_types == {"g2-standard-48", "g2-standard-96"}
        assert facts().machine_families == {"g2"}
        assert facts().accelerator_counts == {"4", "8"}
        assert facts().accelerators == {"nvidia-l4"}
        assert facts().architectures == {"amd64"}
        assert plain not in cluster.state().nodes

        core.patch_node(second, {"metadata": {"labels": {INSTANCE_TYPE: "e2-standard-8"}}})
        wait_for("the relabelled node", lambda: facts().machine_families == {"g2", "e2"})
        core.delete_node(first)
        wait_for("one node left", lambda: getattr(facts(), "node_count", 0) == 1)
        assert facts().accelerators == frozenset()
        assert first not in cluster.state().nodes
        core.delete_node(second)
        wait_for("an empty pool is unknown, not kept", lambda: facts() is None)
    finally:
        for name in created:
            delete_quietly(core.delete_node, name)


# --------------------------------------------------------------------------------------------
# the watch protocol: bookmarks and 410 Gone


def test_watch_resumes_from_the_servers_bookmark(
    kube_admin: client.ApiClient,
    podsnapshot_crds: list[str],
    namespace: str,
    start_cluster: StartCluster,
) -> None:
    """The server ends each watch after timeoutSeconds (3-6 s here) and sends BOOKMARKs; the
    reflector records their resourceVersion and resumes there, without relisting."""
    cluster = start_cluster(resync_seconds=3)
    reflector = cluster.source.reflectors["podsnapshotstorageconfigs"]
    (listed,) = cluster.spy.lists_of(STORAGE_CONFIGS)
    # Move the cluster's resourceVersion on without touching storage configs, and read them
    # consistently: the server's next bookmarks carry a version no storage config event has.
    core = client.CoreV1Api(kube_admin)
    core.create_namespaced_config_map(
        namespace, client.V1ConfigMap.model_validate({"metadata": {"name": "bump"}})
    )
    client.CustomObjectsApi(kube_admin).list_cluster_custom_object(
        GROUP, "v1", "podsnapshotstorageconfigs"
    )

    def resumed_from_bookmark() -> list[str]:
        calls = cluster.spy.watches_of(STORAGE_CONFIGS)
        events = [event for call in calls for event in list(call.events)]
        bookmarks = {version(e) for e in events if e["type"] == "BOOKMARK"}
        objects = {version(e) for e in events if e["type"] != "BOOKMARK"}
        only_bookmarks = bookmarks - objects - {listed}
        return [call.resource_version for call in calls if call.resource_version in only_bookmarks]

    # A bookmark carries the watch cache's version, which learns of the bump only from etcd's
    # progress notifications: every 2 s with the control plane's etcd flag (~3 s here; without
    # it 16 s quiet and over 60 s once in CI): a generous bound, the assertion is what is
    # resumed, not how fast.
    resumed = wait_for("a watch resumed from a bookmark", resumed_from_bookmark, timeout=60)
    assert int(resumed[0]) > int(listed)
    assert int(str(reflector.resource_version)) >= int(resumed[0])
    assert cluster.spy.lists_of(STORAGE_CONFIGS) == [listed], "resumed, never relisted"
    assert cluster.status("podsnapshotstorageconfigs") == "synced"


def test_too_old_resource_version_gets_410_and_relists(
    control_plane: ControlPlane,
    kube_admin: client.ApiClient,
    podsnapshot_crds: list[str],
    namespace: str,
    start_cluster: StartCluster,
) -> None:
    """Disconnected while the cluster changed and etcd compacted, the reflector comes back with a
    resourceVersion the server no longer has: the server answers 410 Gone, the reflector lists
    again and its state is the cluster's, not the one it had before the disconnection."""
    custom = client.CustomObjectsApi(kube_admin)
    create_policy(kube_admin, policy("before", namespace, {"app": "a"}))
    cluster = start_cluster()
    assert find_policy(cluster.state(), namespace, "before") is not None
    spy = cluster.spy
    spy.hold(POLICIES)
    spy.drop(POLICIES)
    assert spy.wait_held(POLICIES), "the reflector did not try to watch again"
    watches = len(spy.watches_of(POLICIES))

    create_policy(kube_admin, policy("after", namespace, {"app": "b"}))
    custom.delete_namespaced_custom_object(GROUP, "v1", namespace, "podsnapshotpolicies", "before")
    etcd = etcd_url(control_plane)
    compacted = etcd_compact(etcd)
    assert etcd_read_at(etcd, 1) == (400, "etcdserver: mvcc: required revision has been compacted")
    # Meanwhile admission keeps the last state, and readiness holds.
    assert find_policy(cluster.state(), namespace, "before") is not None
    assert AdmissionApp(cluster.engine).ready()[0]

    spy.release(POLICIES, from_version="1")
    wait_for(
        "the relisted state",
        lambda: (
            find_policy(cluster.state(), namespace, "after") is not None
            and find_policy(cluster.state(), namespace, "before") is None
        ),
    )
    gone = spy.watches_of(POLICIES)[watches]
    assert gone.resource_version == "1"
    assert [(e["type"], e["object"].get("code")) for e in gone.events] == [("ERROR", 410)]
    assert "too old resource version" in gone.events[0]["object"]["message"]
    first_list, relist = spy.lists_of(POLICIES)
    assert int(relist) >= compacted > int(first_list)
    wait_for(
        "the watch from the new list",
        lambda: any(w.resource_version == relist for w in spy.watches_of(POLICIES)[watches:]),
    )
    assert cluster.status("podsnapshotpolicies") == "synced"


# --------------------------------------------------------------------------------------------
# RBAC, /version, shutdown


def manifest_role(name: str, *, without: tuple[str, ...] = ()) -> dict[str, Any]:
    """``manifests/rbac.yaml``'s ClusterRole renamed ``name``, minus the resources ``without``.

    (Its namespaced Role is for the leader election Lease, which these tests turn off.)
    """
    documents = [doc for doc in yaml.safe_load_all(RBAC.read_text()) if doc]
    (role,) = [cast("dict[str, Any]", doc) for doc in documents if doc["kind"] == "ClusterRole"]
    role["metadata"]["name"] = name
    for rule in role["rules"]:
        if "resources" in rule:
            rule["resources"] = [r for r in rule["resources"] if r not in without]
    return role


def bind_role(
    kube_admin: client.ApiClient, role: dict[str, Any], namespace: str, account: str
) -> None:
    """Create ``role`` and a ClusterRoleBinding of it (same name) to ``namespace/account``."""
    rbac = client.RbacAuthorizationV1Api(kube_admin)
    rbac.create_cluster_role(client.V1ClusterRole.model_validate(role))
    binding = {
        "metadata": {"name": role["metadata"]["name"]},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": role["metadata"]["name"],
        },
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }
    rbac.create_cluster_role_binding(client.V1ClusterRoleBinding.model_validate(binding))


@pytest.fixture
def service_account(
    control_plane: ControlPlane, kube_admin: client.ApiClient, namespace: str, tmp_path: Path
) -> Iterator[tuple[Path, str]]:
    """A ServiceAccount's token kubeconfig and a role name (``bind_role``), cleaned up after."""
    token = service_account_token(kube_admin, namespace, "snapready")
    kubeconfig = control_plane.token_kubeconfig(tmp_path / "sa.kubeconfig", token)
    name = unique_name(namespace, prefix="snapready")
    yield kubeconfig, name
    rbac = client.RbacAuthorizationV1Api(kube_admin)
    delete_quietly(rbac.delete_cluster_role_binding, name)
    delete_quietly(rbac.delete_cluster_role, name)


def wait_until_allowed(kubeconfig: Path, resource: str) -> None:
    """Wait until the kubeconfig's user may list ``nodes`` or ``namespaces`` (a new binding
    reaches the API server's authorizer a moment later)."""
    api = ControlPlane.client_from_kubeconfig(kubeconfig)
    core = client.CoreV1Api(api)
    listing = core.list_node if resource == "nodes" else core.list_namespace

    def allowed() -> bool:
        try:
            listing(limit=1)
        except ApiException as error:
            if error.status == 403:
                return False
            raise
        return True

    try:
        wait_for(f"RBAC to allow listing {resource}", allowed, timeout=15)
    finally:
        api.close()  # type: ignore[no-untyped-call]


def grants(path: str, verb: str, rules: list[dict[str, Any]]) -> bool:
    """Whether ``rules`` allow ``verb`` on an API path (``/api/v1/nodes``, ``/version``); a
    label-selector query does not change what is asked for."""
    parts = path.split("?", 1)[0].strip("/").split("/")
    if parts[0] == "api" and len(parts) == 3:
        group, resource = "", parts[2]
    elif parts[0] == "apis" and len(parts) == 4:
        group, resource = parts[1], parts[3]
    else:
        return any(path in r.get("nonResourceURLs", []) and verb in r["verbs"] for r in rules)
    return any(
        group in r.get("apiGroups", [])
        and resource in r.get("resources", [])
        and verb in r["verbs"]
        for r in rules
    )


def test_manifest_rbac_is_enough_for_every_cache(
    kube_admin: client.ApiClient,
    namespace: str,
    service_account: tuple[Path, str],
    start_cluster: StartCluster,
    podsnapshot_crds: list[str],
) -> None:
    """As a ServiceAccount bound to exactly ``manifests/rbac.yaml``: every cache syncs, no request
    is refused, and every request the caches make is one the role grants, read-only but for the
    records the leader creates (and deletes when left over) in its own SnapshotRecords, and the
    patches of the outcome annotation and readiness-gate condition on pods; nothing writes a
    PodSnapshot (GKE's guard refuses it)."""
    kubeconfig, name = service_account
    role = manifest_role(name)
    bind_role(kube_admin, role, namespace, "snapready")
    wait_until_allowed(kubeconfig, "nodes")
    cluster = start_cluster(kubeconfig=kubeconfig)
    state = cluster.state()
    assert {cache: state.details[cache] for cache in ALL_CACHES} == {
        "podsnapshotpolicies": "synced",
        "podsnapshotstorageconfigs": "synced",
        "namespaces": "synced",
        "nodes": "synced",
        "computeclasses": "not served",  # 404 only because the role grants it (else 403)
        "version": "synced",
        "podsnapshots": "synced",
        "snapshotrecords": "synced",
        "pods": "synced",
        "gkeevents": "synced",
    }
    assert state.gke_version == K8S_VERSION
    errors = list(cluster.spy.errors)
    assert errors and all(
        path == COMPUTE_CLASSES and text.startswith("NotServed") for path, text in errors
    ), errors
    requested = cluster.spy.requested()
    assert requested == {
        POLICIES,
        STORAGE_CONFIGS,
        NAMESPACES,
        NODES,
        SNAPSHOTS,
        RECORDS,
        SELECTED_PODS,
        GKE_EVENTS,
        COMPUTE_CLASSES,
        DISRUPTION_BUDGETS,  # issue 23: checkpoint-window
        VERSION,
    }
    rules = role["rules"]
    for path in requested - {VERSION}:
        assert grants(path, "list", rules)
        assert grants(path, "watch", rules)
    assert grants(VERSION, "get", rules)
    cached = {
        ("" if path.startswith("/api/") else path.split("/")[2], path.split("?")[0].rsplit("/")[-1])
        for path in requested - {VERSION}
    }
    cache_rules = [
        r
        for r in rules
        if any((g, res) in cached for g in r.get("apiGroups", []) for res in r.get("resources", []))
    ]
    # Read-only, except snapready's own SnapshotRecords (create, delete) and the outcome
    # annotation and readiness-gate condition on pods (patches).
    for rule in cache_rules:
        writes = set(rule["verbs"]) - {"get", "list", "watch"}
        patched = set(rule["resources"]) <= {"pods", "pods/status"} and writes == {"patch"}
        records = set(rule["resources"]) == {"snapshotrecords"} and writes == {"create", "delete"}
        assert not writes or patched or records, rule
        assert "podsnapshots" not in rule["resources"] or not writes, rule


def test_version_poller_reads_the_real_version(
    control_plane: ControlPlane,
    kube_admin: client.ApiClient,
    podsnapshot_crds: list[str],
    namespace: str,
    start_cluster: StartCluster,
) -> None:
    """v1.36.3 has no ``-gke.N`` suffix: kept as ``1.36.3``, which version-gated rules read as
    1.36.3-gke.0, i.e. after the ``gpu-whole-node`` gate (a subset of the GPUs is allowed)."""
    status, body = control_plane.get("/version")
    assert (status, yaml.safe_load(body)["gitVersion"]) == (200, f"v{K8S_VERSION}")
    create_policy(kube_admin, policy("llm", namespace, {"app": "llm"}))
    cluster = start_cluster()
    wait_for("the policy", lambda: find_policy(cluster.state(), namespace, "llm"))
    state = cluster.state()
    assert (state.gke_version, state.details["gkeVersion"]) == (K8S_VERSION, K8S_VERSION)

    review = pod_review({"app": "llm"}, namespace)
    container = review["request"]["object"]["spec"]["containers"][0]
    container["resources"]["requests"]["nvidia.com/gpu"] = "2"  # 2 of g2-standard-48's 4
    container["resources"]["limits"]["nvidia.com/gpu"] = "2"
    settings = cluster.engine.settings
    real_rules = Engine(settings=settings, state=cluster.source.state)
    assert "gpu-whole-node" not in rules_of(validate(real_rules, review))
    older = settings.model_copy(
        update={"rules": settings.rules.model_copy(update={"gke_version": "1.35.0-gke.1"})}
    )
    before_gate = Engine(settings=older, state=cluster.source.state)
    assert "gpu-whole-node" in rules_of(validate(before_gate, review)), "the control case"


def test_stop_ends_every_cache_thread_with_watches_open(
    namespace: str, snapready_identity: IdentityFactory
) -> None:
    # The production wiring (start_cluster), with 5-10 min watches.
    source = start_cluster(kube_settings(snapready_identity(namespace).kubeconfig))
    try:
        wait_for("every cache synced", source.synced, timeout=20)
        time.sleep(0.2)  # let every reflector open its watch after the list
    finally:
        began = time.monotonic()
        ended = source.stop(timeout=5.0)
    assert ended, "every thread ended although its watch was open"
    assert time.monotonic() - began < 3.0


# --------------------------------------------------------------------------------------------
# snapready serve --source kube


def first_readyz(server: RunningServer, timeout: float = 20.0) -> httpx.Response:
    """The first ``/readyz`` answer once the server accepts connections."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise AssertionError(f"server exited:\n{server.log()}")
        try:
            with server.client() as http:
                return http.get("/readyz")
        except httpx.TransportError:
            time.sleep(0.05)
    raise AssertionError(f"server not up after {timeout}s:\n{server.log()}")


@pytest.mark.e2e
def test_serve_readyz_waits_for_every_cache_then_validates_from_the_cluster(
    kube_admin: client.ApiClient,
    podsnapshot_crds: list[str],
    namespace: str,
    service_account: tuple[Path, str],
    tmp_path: Path,
) -> None:
    """``snapready serve --kubeconfig`` as a ServiceAccount whose role lacks nodes: /readyz is 503
    with the 403 in the nodes status; once the role is completed it turns 200, and /validate
    answers from the cluster's policies (two policies only the cluster has overlap)."""
    kubeconfig, name = service_account
    bind_role(kube_admin, manifest_role(name, without=("nodes",)), namespace, "snapready")
    wait_until_allowed(kubeconfig, "namespaces")
    for policy_name in ("llm-a", "llm-b"):
        create_policy(kube_admin, policy(policy_name, namespace, {"app": "llm"}))
    env = {
        **{f"SNAPREADY_SOURCE__{key.upper()}": str(value) for key, value in FAST.items()},
        "SNAPREADY_LEADER__ENABLED": "false",  # the caches are what this test is about
    }
    server = start_server(tmp_path, "--kubeconfig", str(kubeconfig), env=env, wait=False)
    try:
        wait_for(
            "the caches that may sync",
            lambda: first_readyz(server).json()["namespaces"] == "synced",
        )
        before = first_readyz(server)
        assert before.status_code == 503
        body = before.json()
        assert body["ready"] is False
        assert body["nodes"].startswith("syncing, error: HTTP 403 Forbidden"), body
        assert body["source"] == "kube"
        for cache in ("podsnapshotpolicies", "podsnapshotstorageconfigs", "version"):
            assert body[cache] == "synced", body

        client.RbacAuthorizationV1Api(kube_admin).replace_cluster_role(
            name, client.V1ClusterRole.model_validate(manifest_role(name))
        )
        wait_ready(server, timeout=30)
        review = json.dumps(pod_review({"app": "llm"}, namespace))
        with server.client() as http:
            after = http.get("/readyz")
            answer = http.post(
                "/validate", content=review, headers={"Content-Type": "application/json"}
            )
    finally:
        stop_server(server)
    assert after.status_code == 200
    body = after.json()
    assert body["ready"] is True
    assert {cache: body[cache] for cache in ALL_CACHES} == {
        "podsnapshotpolicies": "synced",
        "podsnapshotstorageconfigs": "synced",
        "namespaces": "synced",
        "nodes": "synced",
        "computeclasses": "not served",
        "version": "synced",
        "podsnapshots": "synced",
        "snapshotrecords": "synced",
        "pods": "synced",
        "gkeevents": "synced",
    }
    assert body["gkeVersion"] == K8S_VERSION
    overlap = [w for w in answer.json()["response"].get("warnings", []) if "[policy-overlap]" in w]
    assert len(overlap) == 1, answer.json()
    assert "llm-a, llm-b" in overlap[0]
    assert server.process.returncode == 0, server.log()
