"""webhook.pod.distill: pinned fingerprints, real captures, invariance, sensitivity, canonical
forms.

The sensitivity and invariance tables are written by hand from the documented field list (GKE's
"About Pod snapshots" page), not generated from the constants in ``webhook.pod.distill``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import re
from collections.abc import Callable
from typing import Any

import pytest
import rfc8785
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from tests.conftest import DATA, load_review, review_files
from webhook.kube.token_volume import is_service_account_volume
from webhook.pod.diff import changed_paths
from webhook.pod.distill import distill, fingerprint
from webhook.pod.fields import DIGEST_CHARS, field_digests

MANIFESTS = DATA / "manifests"
Pod = dict[str, Any]
Mutation = Callable[[Pod], Any]


def captured(name: str) -> Pod:
    """``request.object`` of a captured review (a fresh copy)."""
    obj: Pod = load_review(name)["request"]["object"]
    return obj


def last_applied(obj: Pod) -> Pod:
    """The user's manifest that kubectl stored on a captured object."""
    text = obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
    manifest: Pod = json.loads(text)
    return manifest


def manifest(name: str) -> list[Pod]:
    """Every document of a YAML file under tests/data/manifests/."""
    return [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d is not None]


def rich_pod() -> Pod:
    """The pod that sets every hashed field (tests/data/manifests/rich-pod.yaml)."""
    (pod,) = manifest("rich-pod.yaml")
    return pod


# ---------------------------------------------------------------------------------------------
# Pinned values. These change ONLY on purpose: an algorithm change needs a new "v2:" prefix or a
# reviewed update of these pins (the distilled JSON of each was checked by eye when pinned).
# ---------------------------------------------------------------------------------------------

PINNED = [
    pytest.param(
        lambda: captured("01"),
        "v1:sha256:78d8ee51e11b9a359bd6b0fcab094c0c896bb49eeab22838cdaf305e24744a35",
        id="review-01-plain-kubectl-run",
    ),
    pytest.param(
        lambda: captured("03"),
        "v1:sha256:265fc5e2205294fdab7856aa04e043dfc98d74d2e4771f675e414ff8e14276dc",
        id="review-03-gvisor-l4x4",
    ),
    pytest.param(
        lambda: captured("13")["spec"]["template"],
        "v1:sha256:575e5faa27529c83bfb287d24bea50c7ad131eb6c6e7b9ef3afb71fb6df47c58",
        id="review-13-deployment-template",
    ),
    pytest.param(
        lambda: captured("30"),
        "v1:sha256:902079a2c9839aebf9d05ab4af33ce88041ad82714f73f06c1e671e08bcd9fc2",
        id="review-30-twin",
    ),
    pytest.param(
        lambda: captured("40"),
        "v1:sha256:c9fe1168a27677b3f853b4310400e074135cce111a82e14d73a2dbf823d70673",
        id="review-40-replicaset-made-pod",
    ),
    pytest.param(
        rich_pod,
        "v1:sha256:c18acde3346501a7087d438c12b22b4c723f82f938b7a1a76eb642b6ae3c8402",
        id="rich-pod-every-hashed-field",
    ),
]


@pytest.mark.parametrize(("make", "pinned"), PINNED)
def test_pinned_fingerprints(make: Callable[[], Pod], pinned: str) -> None:
    assert fingerprint(make()) == pinned


def test_twin_distilled_spec_and_hash_recomputed_independently() -> None:
    # written by hand from review 30: only documented fields, defaults in, SA volume and mount out
    expected = (
        '{"spec":{"containers":[{"image":"vllm/vllm-openai:v0.6.3","name":"vllm",'
        '"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],'
        '"dnsPolicy":"ClusterFirst","runtimeClassName":"gvisor","securityContext":{}}}'
    )
    pod = captured("30")
    assert rfc8785.dumps(distill(pod)).decode() == expected
    assert fingerprint(pod) == "v1:sha256:" + hashlib.sha256(expected.encode()).hexdigest()


def test_empty_pod_is_only_the_pod_defaults() -> None:
    expected = b'{"spec":{"dnsPolicy":"ClusterFirst","securityContext":{}}}'
    assert fingerprint({}) == "v1:sha256:" + hashlib.sha256(expected).hexdigest()


# ---------------------------------------------------------------------------------------------
# Manifests vs the same pod as the API server handed it to a webhook
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make_manifest", "make_captured"),
    [
        pytest.param(
            lambda: last_applied(captured("03")),
            lambda: captured("03"),
            id="review-03-last-applied-manifest-equals-admitted-pod",
        ),
        pytest.param(
            lambda: last_applied(captured("13"))["spec"]["template"],
            lambda: captured("13")["spec"]["template"],
            id="review-13-last-applied-template-equals-defaulted-template",
        ),
        pytest.param(
            lambda: manifest("llm-l4x4.yaml")[0],
            lambda: captured("03"),
            id="yaml-manifest-equals-review-03",
        ),
        pytest.param(
            lambda: manifest("llm-server.yaml")[1]["spec"]["template"],
            lambda: captured("13")["spec"]["template"],
            id="yaml-deployment-template-equals-review-13",
        ),
        pytest.param(
            lambda: manifest("workloads.yaml")[0]["spec"]["template"],
            lambda: captured("30"),
            id="statefulset-template-equals-admitted-twin-pod",
        ),
        pytest.param(
            lambda: manifest("workloads.yaml")[4]["spec"]["jobTemplate"]["spec"]["template"],
            lambda: captured("31"),
            id="cronjob-template-equals-admitted-twin-pod",
        ),
    ],
)
def test_manifest_and_admitted_pod_agree(
    make_manifest: Callable[[], Pod], make_captured: Callable[[], Pod]
) -> None:
    on_disk, admitted = make_manifest(), make_captured()
    assert on_disk != admitted  # the capture really carries defaults and generated parts
    assert changed_paths(on_disk, admitted) == []
    assert fingerprint(on_disk) == fingerprint(admitted)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param("30", "31", id="twins-differ-in-name-and-sa-volume-suffix"),
        pytest.param("01", "02", id="mutating-and-validating-views-of-one-pod"),
        pytest.param("07", "08", id="generate-name-before-and-after-naming"),
    ],
)
def test_real_captures_that_differ_only_in_unhashed_parts(first: str, second: str) -> None:
    a, b = captured(first), captured(second)
    assert a != b
    assert fingerprint(a) == fingerprint(b)


def test_twins_really_have_different_sa_volume_names() -> None:
    names = {captured(n)["spec"]["volumes"][0]["name"] for n in ("30", "31")}
    assert len(names) == 2 and all(n.startswith("kube-api-access-") for n in names)


def test_replicaset_pod_differs_from_deployment_template_only_in_image() -> None:
    # review 40 was made from a later revision of the Deployment in review 13
    assert changed_paths(captured("13")["spec"]["template"], captured("40")) == [
        ("spec.containers[0].image", "vllm/vllm-openai:v0.6.3", "vllm/vllm-openai:v0.6.4")
    ]


# ---------------------------------------------------------------------------------------------
# Invariance: changes to fields outside the documented list keep the fingerprint
# ---------------------------------------------------------------------------------------------


def _rename_sa_volume(pod: Pod, name: str) -> None:
    old = pod["spec"]["volumes"][-1]["name"]
    pod["spec"]["volumes"][-1]["name"] = name
    for mount in pod["spec"]["containers"][0]["volumeMounts"]:
        if mount["name"] == old:
            mount["name"] = name


def _drop_sa_volume(pod: Pod) -> None:
    old = pod["spec"]["volumes"].pop()["name"]
    mounts = pod["spec"]["containers"][0]["volumeMounts"]
    pod["spec"]["containers"][0]["volumeMounts"] = [m for m in mounts if m["name"] != old]


def _reverse_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reverse_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reverse_keys(v) for v in value]
    return value


def _c0(pod: Pod) -> Pod:
    container: Pod = pod["spec"]["containers"][0]
    return container


INVARIANT: list[Any] = [
    pytest.param(lambda p: _c0(p)["env"].append({"name": "X", "value": "1"}), id="env-added"),
    pytest.param(lambda p: _c0(p)["env"][1].update(value="DEBUG"), id="env-value-changed"),
    pytest.param(lambda p: _c0(p).update(envFrom=[{"secretRef": {"name": "s"}}]), id="envfrom"),
    pytest.param(lambda p: _c0(p)["resources"]["limits"].update(cpu="8"), id="resources"),
    pytest.param(lambda p: p["spec"]["nodeSelector"].clear(), id="node-selector-cleared"),
    pytest.param(
        lambda p: p["spec"].update(affinity={"nodeAffinity": {"x": 1}}), id="affinity-added"
    ),
    pytest.param(lambda p: p["spec"]["tolerations"].pop(), id="toleration-removed"),
    pytest.param(lambda p: p["metadata"]["labels"].update(model="other"), id="other-label"),
    pytest.param(
        lambda p: p["metadata"].update(annotations={"snapready.io/spec-hash": "v1:sha256:00"}),
        id="other-annotation-incl-our-own-hash",
    ),
    pytest.param(lambda p: p["metadata"].update(name="renamed"), id="name"),
    pytest.param(lambda p: p["metadata"].update(generateName="llm-"), id="generate-name"),
    pytest.param(lambda p: p["metadata"].update(namespace="other"), id="namespace"),
    pytest.param(lambda p: _rename_sa_volume(p, "kube-api-access-zzzzz"), id="sa-volume-suffix"),
    pytest.param(
        lambda p: p["spec"]["volumes"][-1]["projected"]["sources"].pop(),
        id="sa-volume-without-openshift-service-ca-source",
    ),
    pytest.param(_drop_sa_volume, id="sa-volume-and-mount-absent-like-a-template"),
    pytest.param(lambda p: _c0(p)["readinessProbe"].update(periodSeconds=5), id="probe"),
    pytest.param(lambda p: _c0(p).update(imagePullPolicy="Always"), id="image-pull-policy"),
    pytest.param(lambda p: _c0(p)["ports"][0].update(hostPort=8000), id="host-port"),
    pytest.param(lambda p: p["spec"].update(serviceAccountName="llm"), id="service-account"),
    pytest.param(lambda p: p["spec"].update(restartPolicy="Never"), id="restart-policy"),
    pytest.param(lambda p: p["spec"].update(terminationGracePeriodSeconds=5), id="grace-period"),
    pytest.param(lambda p: p["spec"].update(priority=1000), id="priority"),
    pytest.param(lambda p: p["spec"].update(enableServiceLinks=False), id="service-links"),
    pytest.param(lambda p: p["spec"].update(nodeName="gke-node-1"), id="node-name"),
    pytest.param(lambda p: p.update(status={"phase": "Running"}), id="status"),
    pytest.param(lambda p: p["metadata"].pop("managedFields"), id="managed-fields"),
]


@pytest.mark.parametrize("mutate", INVARIANT)
def test_unhashed_changes_keep_the_fingerprint(mutate: Mutation) -> None:
    pod = captured("03")
    before = fingerprint(pod)
    mutate(pod)
    assert fingerprint(pod) == before
    assert changed_paths(captured("03"), pod) == []


def test_key_order_of_a_real_pod_does_not_matter() -> None:
    pod = captured("03")
    assert fingerprint(_reverse_keys(pod)) == fingerprint(pod)


# ---------------------------------------------------------------------------------------------
# Sensitivity: each documented field, changed alone, changes the fingerprint (hand-written rows)
# ---------------------------------------------------------------------------------------------

# (mutation of the container, expected first changed path; {c} is the container's path and
# {list} the list's path). Base: the "server" container of rich-pod.yaml.
CONTAINER_ROWS: list[Any] = [
    pytest.param(lambda c: c.update(name="renamed"), "{list}[*].name", id="name"),
    pytest.param(lambda c: c.update(image="vllm/vllm-openai:v0.6.4"), "{c}.image", id="image"),
    pytest.param(lambda c: c["command"].append("--x"), "{c}.command", id="command"),
    pytest.param(lambda c: c.update(args=["--model=/m"]), "{c}.args", id="args"),
    pytest.param(lambda c: c.update(workingDir="/app"), "{c}.workingDir", id="working-dir"),
    pytest.param(lambda c: c["ports"][0].update(name="web"), "{c}.ports[0].name", id="port-name"),
    pytest.param(
        lambda c: c["ports"][0].update(containerPort=8080),
        "{c}.ports[0].containerPort",
        id="port-number",
    ),
    pytest.param(
        lambda c: c["ports"][0].update(protocol="UDP"), "{c}.ports[0].protocol", id="port-protocol"
    ),
    pytest.param(
        lambda c: c["ports"].append({"containerPort": 7000}), "{c}.ports", id="port-added"
    ),
    pytest.param(lambda c: c["ports"].reverse(), "{c}.ports[0].name", id="ports-reordered"),
    pytest.param(
        lambda c: c["volumeMounts"][0].update(name="tls"),
        "{c}.volumeMounts[0].name",
        id="mount-name",
    ),
    pytest.param(
        lambda c: c["volumeMounts"][0].update(readOnly=False),
        "{c}.volumeMounts[0].readOnly",
        id="mount-read-only",
    ),
    pytest.param(
        lambda c: c["volumeMounts"][0].update(recursiveReadOnly="IfPossible"),
        "{c}.volumeMounts[0].recursiveReadOnly",
        id="mount-recursive-read-only",
    ),
    pytest.param(
        lambda c: c["volumeMounts"][0].update(mountPath="/weights"),
        "{c}.volumeMounts[0].mountPath",
        id="mount-path",
    ),
    pytest.param(
        lambda c: c["volumeMounts"][1].update(subPath="other.yaml"),
        "{c}.volumeMounts[1].subPath",
        id="mount-sub-path",
    ),
    pytest.param(
        lambda c: c["volumeMounts"][2].update(mountPropagation="Bidirectional"),
        "{c}.volumeMounts[2].mountPropagation",
        id="mount-propagation",
    ),
    pytest.param(
        lambda c: c["volumeMounts"][2].update(subPathExpr="$(POD_UID)"),
        "{c}.volumeMounts[2].subPathExpr",
        id="mount-sub-path-expr",
    ),
    pytest.param(
        lambda c: c["volumeMounts"].reverse(), "{c}.volumeMounts[0].name", id="mounts-reordered"
    ),
    pytest.param(
        lambda c: c["volumeDevices"][0].update(name="models"),
        "{c}.volumeDevices[0].name",
        id="volume-device-name",
    ),
    pytest.param(
        lambda c: c["lifecycle"]["postStart"]["exec"].update(command=["true"]),
        "{c}.lifecycle.postStart.exec.command",
        id="lifecycle-post-start",
    ),
    pytest.param(
        lambda c: c["lifecycle"]["preStop"]["httpGet"].update(path="/stop"),
        "{c}.lifecycle.preStop.httpGet.path",
        id="lifecycle-pre-stop",
    ),
    pytest.param(
        lambda c: c.update(terminationMessagePath="/dev/termination-log"),
        "{c}.terminationMessagePath",
        id="termination-message-path",
    ),
    pytest.param(
        lambda c: c.update(terminationMessagePolicy="File"),
        "{c}.terminationMessagePolicy",
        id="termination-message-policy",
    ),
    pytest.param(
        lambda c: c["securityContext"].update(allowPrivilegeEscalation=True),
        "{c}.securityContext.allowPrivilegeEscalation",
        id="security-context-privilege-escalation",
    ),
    pytest.param(
        lambda c: c["securityContext"]["capabilities"].update(add=["NET_ADMIN"]),
        "{c}.securityContext.capabilities.add",
        id="security-context-capabilities",
    ),
    pytest.param(
        lambda c: c["securityContext"].update(runAsUser=0),
        "{c}.securityContext.runAsUser",
        id="security-context-run-as-root",
    ),
    pytest.param(lambda c: c.update(stdin=False), "{c}.stdin", id="stdin"),
    pytest.param(lambda c: c.update(stdinOnce=False), "{c}.stdinOnce", id="stdin-once"),
    pytest.param(lambda c: c.update(tty=False), "{c}.tty", id="tty"),
]


@pytest.mark.parametrize("container_list", ["containers", "initContainers"])
@pytest.mark.parametrize(("mutate", "expected"), CONTAINER_ROWS)
def test_each_container_field_changes_the_fingerprint(
    container_list: str, mutate: Mutation, expected: str
) -> None:
    base = rich_pod()
    if container_list == "initContainers":  # put the full container first in the init list
        init = copy.deepcopy(base["spec"]["containers"][0]) | {"name": "server-init"}
        base["spec"]["initContainers"][0] = init
    changed = copy.deepcopy(base)
    mutate(changed["spec"][container_list][0])
    path = expected.format(c=f"spec.{container_list}[0]", list=f"spec.{container_list}")
    assert fingerprint(changed) != fingerprint(base)
    assert changed_paths(base, changed)[0][0] == path


def _vol(pod: Pod, index: int) -> Pod:
    volume: Pod = pod["spec"]["volumes"][index]
    return volume


# Base: rich-pod.yaml; volumes 0 models (PVC), 1 config (configMap), 2 tls (secret), 3 work
# (emptyDir), 4 host-cache (hostPath), 5 vault-token (projected), 6 raw (ephemeral),
# 7 podinfo (downwardAPI), 8 scratch (no source: emptyDir).
POD_ROWS: list[Any] = [
    pytest.param(
        lambda p: _vol(p, 0).update(name="weights"), "spec.volumes[*].name", id="vol-name"
    ),
    pytest.param(
        lambda p: _vol(p, 0)["persistentVolumeClaim"].update(claimName="other"),
        "spec.volumes[0].persistentVolumeClaim.claimName",
        id="pvc-claim",
    ),
    pytest.param(
        lambda p: _vol(p, 0)["persistentVolumeClaim"].update(readOnly=False),
        "spec.volumes[0].persistentVolumeClaim.readOnly",
        id="pvc-read-only",
    ),
    pytest.param(
        lambda p: _vol(p, 1)["configMap"].update(name="other"),
        "spec.volumes[1].configMap.name",
        id="config-map-name",
    ),
    pytest.param(
        lambda p: _vol(p, 1)["configMap"].update(defaultMode=0o400),
        "spec.volumes[1].configMap.defaultMode",
        id="config-map-mode",
    ),
    pytest.param(
        lambda p: _vol(p, 1)["configMap"]["items"][0].update(path="c.yaml"),
        "spec.volumes[1].configMap.items[0].path",
        id="config-map-items",
    ),
    pytest.param(
        lambda p: _vol(p, 2)["secret"].update(secretName="other"),
        "spec.volumes[2].secret.secretName",
        id="secret-name",
    ),
    pytest.param(
        lambda p: _vol(p, 3)["emptyDir"].pop("medium"),
        "spec.volumes[3].emptyDir.medium",
        id="empty-dir-medium",
    ),
    pytest.param(
        lambda p: _vol(p, 4)["hostPath"].update(path="/tmp"),
        "spec.volumes[4].hostPath.path",
        id="host-path",
    ),
    pytest.param(
        lambda p: _vol(p, 4)["hostPath"].update(type="Directory"),
        "spec.volumes[4].hostPath.type",
        id="host-path-type",
    ),
    pytest.param(
        lambda p: _vol(p, 5)["projected"]["sources"][0]["serviceAccountToken"].update(audience="x"),
        "spec.volumes[5].projected.sources[0].serviceAccountToken.audience",
        id="user-projected-token-is-hashed",
    ),
    pytest.param(
        lambda p: _vol(p, 6)["ephemeral"]["volumeClaimTemplate"]["spec"]["resources"].update(
            requests={"storage": "20Gi"}
        ),
        "spec.volumes[6].ephemeral.volumeClaimTemplate.spec.resources.requests.storage",
        id="ephemeral-claim",
    ),
    pytest.param(
        lambda p: _vol(p, 7)["downwardAPI"]["items"][0]["fieldRef"].update(fieldPath="x"),
        "spec.volumes[7].downwardAPI.items[0].fieldRef.fieldPath",
        id="downward-api",
    ),
    pytest.param(
        lambda p: p["spec"]["volumes"].__setitem__(
            8, {"name": "scratch", "hostPath": {"path": "/"}}
        ),
        "spec.volumes[8].emptyDir",
        id="volume-source-type",
    ),
    pytest.param(lambda p: p["spec"]["volumes"].reverse(), "spec.volumes[*].name", id="vol-order"),
    pytest.param(
        lambda p: p["spec"]["volumes"].append({"name": "kube-api-access-x", "configMap": {}}),
        "spec.volumes[*].name",
        id="kube-api-access-named-volume-without-token-is-hashed",
    ),
    pytest.param(
        lambda p: p["spec"]["containers"].reverse(), "spec.containers[*].name", id="order"
    ),
    pytest.param(
        lambda p: p["spec"]["initContainers"].pop(), "spec.initContainers[*].name", id="init-gone"
    ),
    pytest.param(lambda p: p["spec"].update(dnsPolicy="Default"), "spec.dnsPolicy", id="dns"),
    pytest.param(
        lambda p: p["spec"].update(automountServiceAccountToken=True),
        "spec.automountServiceAccountToken",
        id="automount-true",
    ),
    pytest.param(
        lambda p: p["spec"].pop("automountServiceAccountToken"),
        "spec.automountServiceAccountToken",
        id="automount-false-is-not-absent",
    ),
    pytest.param(lambda p: p["spec"].update(hostNetwork=True), "spec.hostNetwork", id="host-net"),
    pytest.param(lambda p: p["spec"].update(hostPID=True), "spec.hostPID", id="host-pid"),
    pytest.param(lambda p: p["spec"].update(hostIPC=True), "spec.hostIPC", id="host-ipc"),
    pytest.param(
        lambda p: p["spec"].update(shareProcessNamespace=False),
        "spec.shareProcessNamespace",
        id="share-process-namespace",
    ),
    pytest.param(
        lambda p: p["spec"]["securityContext"].update(runAsUser=0),
        "spec.securityContext.runAsUser",
        id="pod-security-context",
    ),
    pytest.param(
        lambda p: p["spec"]["dnsConfig"]["nameservers"].append("1.1.1.1"),
        "spec.dnsConfig.nameservers",
        id="dns-config",
    ),
    pytest.param(
        lambda p: p["spec"].update(runtimeClassName="runc"),
        "spec.runtimeClassName",
        id="runtime-class",
    ),
    pytest.param(lambda p: p["spec"]["os"].update(name="windows"), "spec.os.name", id="os"),
    pytest.param(lambda p: p["spec"].update(hostUsers=True), "spec.hostUsers", id="host-users"),
    pytest.param(
        lambda p: p["metadata"]["annotations"].update({"dev.gvisor.internal.nvproxy": "false"}),
        'metadata.annotations["dev.gvisor.internal.nvproxy"]',
        id="gvisor-annotation-value",
    ),
    pytest.param(
        lambda p: p["metadata"]["annotations"].update({"dev.gvisor.platform": "kvm"}),
        'metadata.annotations["dev.gvisor.platform"]',
        id="gvisor-annotation-added",
    ),
    pytest.param(
        lambda p: p["metadata"]["labels"].update({"batch.kubernetes.io/job-completion-index": "4"}),
        'metadata.labels["batch.kubernetes.io/job-completion-index"]',
        id="job-completion-index",
    ),
]


@pytest.mark.parametrize(("mutate", "expected"), POD_ROWS)
def test_each_pod_volume_and_metadata_field_changes_the_fingerprint(
    mutate: Mutation, expected: str
) -> None:
    base, changed = rich_pod(), rich_pod()
    mutate(changed)
    assert fingerprint(changed) != fingerprint(base)
    assert changed_paths(base, changed)[0][0] == expected


def _token_volume(pod: Pod) -> Pod:
    volume: Pod = next(v for v in pod["spec"]["volumes"] if v["name"].startswith("kube-api-"))
    return volume


def _sources(pod: Pod) -> list[Pod]:
    sources: list[Pod] = _token_volume(pod)["projected"]["sources"]
    return sources


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda p: _sources(p).append({"secret": {"name": "db-creds"}}), id="secret"),
        pytest.param(
            lambda p: _sources(p)[0]["serviceAccountToken"].update(audience="vault"),
            id="token-for-another-audience",
        ),
        pytest.param(
            lambda p: _sources(p)[0]["serviceAccountToken"].update(path="db"), id="token-path"
        ),
        pytest.param(
            lambda p: _sources(p)[1]["configMap"].update(name="app-config"), id="other-configmap"
        ),
        pytest.param(
            lambda p: _sources(p)[2]["downwardAPI"]["items"][0]["fieldRef"].update(
                fieldPath="metadata.labels"
            ),
            id="other-downward-field",
        ),
        pytest.param(lambda p: _token_volume(p).pop("projected"), id="no-projected-source"),
        pytest.param(
            lambda p: _sources(p)[3]["configMap"]["items"].append({"key": "x", "path": "x"}),
            id="openshift-configmap-other-key",
        ),
        pytest.param(
            lambda p: _token_volume(p).update(secret={"secretName": "db"}), id="second-source"
        ),
    ],
)
def test_a_volume_named_like_the_token_volume_with_other_content_is_hashed(
    tamper: Mutation,
) -> None:
    """Only the volume the ServiceAccount admission plugin writes (``TokenVolumeSource``: a
    token for the API server at ``token``, ``kube-root-ca.crt``, the namespace) is left out: a
    pod that mounts other content under its name must not keep its fingerprint (a hostile
    trial: a Secret added to the projection changed nothing)."""
    base, changed = captured("03"), captured("03")
    # upstream's three sources, then OpenShift's service-CA configMap (every captured review
    # has it; the derived manifests below have upstream's shape alone)
    kinds = [next(iter(source)) for source in _sources(base)]
    assert kinds[:3] == ["serviceAccountToken", "configMap", "downwardAPI"]
    tamper(changed)
    assert not is_service_account_volume(_token_volume(changed))
    assert fingerprint(changed) != fingerprint(base)


def test_every_token_volume_the_api_server_wrote_is_left_out() -> None:
    """Every ``kube-api-access-*`` volume of the captured reviews (upstream's sources plus
    OpenShift's service-CA configMap) and of the derived replica manifests (upstream's shape,
    ``TokenVolumeSource``) counts as the token volume; two such replicas hash alike."""
    found = 0
    for path in review_files():
        request = json.loads(path.read_text())["request"]
        for key in ("object", "oldObject"):
            spec = (request.get(key) or {}).get("spec") or {}
            for volume in spec.get("volumes") or []:
                if volume["name"].startswith("kube-api-access-"):
                    found += 1
                    assert is_service_account_volume(volume), (path.name, volume)
    assert found >= 10
    replicas = [
        yaml.safe_load((DATA / "real-manifests" / "derived" / name).read_text())
        for name in (
            "k-e-samples__vllm-2b-it__replica-p8m4t.yaml",
            "k-e-samples__vllm-2b-it__replica-x2kq9.yaml",
        )
    ]
    names = [_token_volume(pod)["name"] for pod in replicas]
    assert names == ["kube-api-access-p8m4t", "kube-api-access-x2kq9"]
    assert all(is_service_account_volume(_token_volume(pod)) for pod in replicas)
    assert fingerprint(replicas[0]) == fingerprint(replicas[1])


def test_a_token_volume_written_with_nulls_is_still_the_token_volume() -> None:
    """A manifest may spell absent fields out as ``null`` (the module docstring: null is
    absent); the token volume so written is still left out, and its mounts with it."""
    base, spelled = captured("03"), captured("03")
    volume = _token_volume(spelled)
    volume["secret"] = None
    sources = volume["projected"]["sources"]
    sources[0]["secret"] = None
    sources[2]["downwardAPI"]["items"][0]["resourceFieldRef"] = None
    assert is_service_account_volume(volume)
    assert fingerprint(spelled) == fingerprint(base)


def test_the_mounts_of_a_volume_now_hashed_are_hashed_too() -> None:
    """A ``kube-api-access-*`` volume projecting a Secret is the author's: where it is
    mounted is part of the fingerprint like any other mount."""
    pods = [captured("03"), captured("03")]
    for pod, path in zip(pods, ("/etc/db", "/etc/other"), strict=True):
        _sources(pod).append({"secret": {"name": "db-creds"}})
        mount = {"name": _token_volume(pod)["name"], "mountPath": path}
        pod["spec"]["containers"][0].setdefault("volumeMounts", []).append(mount)
    assert fingerprint(pods[0]) != fingerprint(pods[1])


# ---------------------------------------------------------------------------------------------
# Absent, null and empty values (module docstring of webhook.pod.distill, step 2)
# ---------------------------------------------------------------------------------------------


def _pod(container: Pod | None = None, volume: Pod | None = None, **spec: Any) -> dict[str, Any]:
    """A small pod: one container ``c`` (plus ``container`` fields), optional volume ``v``."""
    body: Pod = {"containers": [{"name": "c", "image": "i", **(container or {})}], **spec}
    if volume is not None:
        body["volumes"] = [{"name": "v", **volume}]
    return {"metadata": spec.pop("metadata", {}), "spec": body}


SAME: list[Any] = [
    pytest.param(_pod(), _pod({"command": []}), id="command-empty-list-is-absent"),
    pytest.param(_pod(), _pod({"command": None}), id="command-null-is-absent"),
    pytest.param(_pod(), _pod({"args": []}), id="args-empty-list-is-absent"),
    pytest.param(_pod(), _pod({"workingDir": ""}), id="empty-string-is-absent"),
    pytest.param(_pod(), _pod({"securityContext": {}}), id="container-security-context-empty"),
    pytest.param(_pod(), _pod(securityContext=None), id="pod-security-context-null"),
    pytest.param(_pod(), _pod({"lifecycle": {}}), id="lifecycle-empty"),
    pytest.param(_pod(), _pod({"volumeMounts": []}), id="volume-mounts-empty"),
    pytest.param(_pod(), _pod({"stdin": False, "stdinOnce": False, "tty": False}), id="tty-false"),
    pytest.param(_pod(), _pod(hostNetwork=False, hostPID=False, hostIPC=False), id="host-false"),
    pytest.param(_pod(), _pod(dnsConfig={}), id="dns-config-empty"),
    pytest.param(_pod(), _pod(metadata={"annotations": None, "labels": {}}), id="null-metadata"),
    pytest.param(
        _pod({"volumeMounts": [{"name": "v", "mountPath": "/v"}]}),
        _pod({"volumeMounts": [{"name": "v", "mountPath": "/v", "readOnly": False}]}),
        id="mount-read-only-false-is-absent",
    ),
    pytest.param(
        _pod(volume={"configMap": {"name": "x"}}),
        _pod(volume={"configMap": {"name": "x", "optional": False}}),
        id="config-map-optional-false-is-absent",
    ),
    pytest.param(
        _pod({"ports": [{"containerPort": 8000}]}),
        _pod({"ports": [{"containerPort": 8000.0}]}),
        id="integral-float-is-an-int",
    ),
    pytest.param(_pod(volume={}), _pod(volume={"emptyDir": {}}), id="volume-without-source"),
    pytest.param(_pod(volume={"emptyDir": None}), _pod(volume={"emptyDir": {}}), id="null-source"),
]


@pytest.mark.parametrize(("a", "b"), SAME)
def test_absent_equivalent_values_hash_the_same(a: Pod, b: Pod) -> None:
    assert fingerprint(a) == fingerprint(b)


DIFFERENT: list[Any] = [
    pytest.param(_pod(), _pod(automountServiceAccountToken=False), id="automount-false-kept"),
    pytest.param(_pod(), _pod(hostUsers=False), id="host-users-false-kept"),
    pytest.param(_pod(), _pod(shareProcessNamespace=False), id="share-process-namespace-false"),
    pytest.param(
        _pod(),
        _pod({"securityContext": {"allowPrivilegeEscalation": False}}),
        id="allow-privilege-escalation-false-kept",
    ),
    pytest.param(_pod(), _pod(securityContext={"runAsUser": 0}), id="run-as-user-zero-kept"),
    pytest.param(_pod(), _pod({"args": [""]}), id="empty-string-inside-a-list-kept"),
    pytest.param(
        _pod(),
        _pod(metadata={"annotations": {"dev.gvisor.x": ""}}),
        id="empty-gvisor-annotation-value-kept",
    ),
    pytest.param(
        _pod(volume={"csi": {"driver": "d", "volumeAttributes": {}}}),
        _pod(volume={"csi": {"driver": "d", "volumeAttributes": {"k": ""}}}),
        id="empty-value-in-a-string-map-kept",
    ),
    pytest.param(_pod(volume={}), _pod(volume={"hostPath": {"path": "/"}}), id="source-type"),
    pytest.param(_pod({"stdin": True}), _pod({"stdin": 1}), id="true-is-not-one"),
    pytest.param(
        _pod(securityContext={"runAsUser": 2**60}),
        _pod(securityContext={"runAsUser": 2**60 + 1}),
        id="int64-beyond-double-precision-kept-exact",
    ),
]


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_values_that_mean_something_else_hash_differently(a: Pod, b: Pod) -> None:
    assert fingerprint(a) != fingerprint(b)
    assert changed_paths(a, b) != []


# ---------------------------------------------------------------------------------------------
# Kubernetes defaulting (webhook.kube.defaults): without == with the default != another value
# ---------------------------------------------------------------------------------------------

DEFAULTS: list[Any] = [
    pytest.param(
        _pod(),
        _pod({"terminationMessagePath": "/dev/termination-log"}),
        _pod({"terminationMessagePath": "/tmp/t"}),
        id="termination-message-path",
    ),
    pytest.param(
        _pod(),
        _pod({"terminationMessagePolicy": "File"}),
        _pod({"terminationMessagePolicy": "FallbackToLogsOnError"}),
        id="termination-message-policy",
    ),
    pytest.param(
        _pod({"ports": [{"containerPort": 80}]}),
        _pod({"ports": [{"containerPort": 80, "protocol": "TCP"}]}),
        _pod({"ports": [{"containerPort": 80, "protocol": "SCTP"}]}),
        id="port-protocol",
    ),
    pytest.param(
        _pod(), _pod(dnsPolicy="ClusterFirst"), _pod(dnsPolicy="Default"), id="dns-policy"
    ),
    pytest.param(
        _pod(),
        _pod(securityContext={}),
        _pod(securityContext={"runAsNonRoot": True}),
        id="pod-security-context",
    ),
    pytest.param(
        _pod(volume={"configMap": {"name": "x"}}),
        _pod(volume={"configMap": {"name": "x", "defaultMode": 420}}),
        _pod(volume={"configMap": {"name": "x", "defaultMode": 384}}),
        id="config-map-default-mode",
    ),
    pytest.param(
        _pod(volume={"secret": {"secretName": "x"}}),
        _pod(volume={"secret": {"secretName": "x", "defaultMode": 420}}),
        _pod(volume={"secret": {"secretName": "x", "defaultMode": 256}}),
        id="secret-default-mode",
    ),
    pytest.param(
        _pod(volume={"downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "f"}}]}}),
        _pod(
            volume={
                "downwardAPI": {
                    "defaultMode": 420,
                    "items": [{"path": "n", "fieldRef": {"fieldPath": "f", "apiVersion": "v1"}}],
                }
            }
        ),
        _pod(volume={"downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "g"}}]}}),
        id="downward-api-mode-and-field-ref-api-version",
    ),
    pytest.param(
        _pod(volume={"projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}),
        _pod(
            volume={
                "projected": {
                    "defaultMode": 420,
                    "sources": [{"serviceAccountToken": {"path": "t", "expirationSeconds": 3600}}],
                }
            }
        ),
        _pod(
            volume={
                "projected": {
                    "sources": [{"serviceAccountToken": {"path": "t", "expirationSeconds": 7200}}]
                }
            }
        ),
        id="projected-mode-and-token-expiry",
    ),
    pytest.param(
        _pod(
            volume={
                "projected": {
                    "sources": [
                        {"downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "f"}}]}}
                    ]
                }
            }
        ),
        _pod(
            volume={
                "projected": {
                    "sources": [
                        {
                            "downwardAPI": {
                                "items": [
                                    {
                                        "path": "n",
                                        "fieldRef": {"fieldPath": "f", "apiVersion": "v1"},
                                    }
                                ]
                            }
                        }
                    ]
                }
            }
        ),
        _pod(
            volume={
                "projected": {
                    "sources": [
                        {
                            "downwardAPI": {
                                "items": [
                                    {
                                        "path": "n",
                                        "fieldRef": {"fieldPath": "f", "apiVersion": "v2"},
                                    }
                                ]
                            }
                        }
                    ]
                }
            }
        ),
        id="projected-downward-api-field-ref",
    ),
    pytest.param(
        _pod(volume={"hostPath": {"path": "/d"}}),
        _pod(volume={"hostPath": {"path": "/d", "type": ""}}),
        _pod(volume={"hostPath": {"path": "/d", "type": "Directory"}}),
        id="host-path-type",
    ),
    pytest.param(
        _pod(volume={}),
        _pod(volume={"emptyDir": {}}),
        _pod(volume={"emptyDir": {"medium": "Memory"}}),
        id="volume-source-empty-dir",
    ),
    pytest.param(
        _pod({"lifecycle": {"preStop": {"httpGet": {"port": 80}}}}),
        _pod({"lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}}}}),
        _pod({"lifecycle": {"preStop": {"httpGet": {"port": 80, "scheme": "HTTPS"}}}}),
        id="lifecycle-http-get",
    ),
    pytest.param(
        _pod(initContainers=[{"name": "i", "image": "i"}]),
        _pod(
            initContainers=[
                {
                    "name": "i",
                    "image": "i",
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                }
            ]
        ),
        _pod(initContainers=[{"name": "i", "image": "i", "terminationMessagePath": "/x"}]),
        id="init-container-defaults",
    ),
    pytest.param(
        _pod(volume={"iscsi": {"targetPortal": "p", "iqn": "q", "lun": 0}}),
        _pod(
            volume={
                "iscsi": {"targetPortal": "p", "iqn": "q", "lun": 0, "iscsiInterface": "default"}
            }
        ),
        _pod(volume={"iscsi": {"targetPortal": "p", "iqn": "q", "lun": 0, "iscsiInterface": "x"}}),
        id="iscsi-interface",
    ),
    pytest.param(
        _pod(volume={"rbd": {"monitors": ["m"], "image": "i"}}),
        _pod(
            volume={
                "rbd": {
                    "monitors": ["m"],
                    "image": "i",
                    "pool": "rbd",
                    "user": "admin",
                    "keyring": "/etc/ceph/keyring",
                }
            }
        ),
        _pod(volume={"rbd": {"monitors": ["m"], "image": "i", "pool": "other"}}),
        id="rbd-pool-user-keyring",
    ),
    pytest.param(
        _pod(volume={"azureDisk": {"diskName": "d", "diskURI": "u"}}),
        _pod(
            volume={
                "azureDisk": {
                    "diskName": "d",
                    "diskURI": "u",
                    "cachingMode": "ReadWrite",
                    "fsType": "ext4",
                    "readOnly": False,
                    "kind": "Shared",
                }
            }
        ),
        _pod(volume={"azureDisk": {"diskName": "d", "diskURI": "u", "kind": "Managed"}}),
        id="azure-disk",
    ),
    pytest.param(
        _pod(volume={"scaleIO": {"gateway": "g", "system": "s", "secretRef": {"name": "n"}}}),
        _pod(
            volume={
                "scaleIO": {
                    "gateway": "g",
                    "system": "s",
                    "secretRef": {"name": "n"},
                    "storageMode": "ThinProvisioned",
                    "fsType": "xfs",
                }
            }
        ),
        _pod(
            volume={
                "scaleIO": {
                    "gateway": "g",
                    "system": "s",
                    "secretRef": {"name": "n"},
                    "fsType": "ext4",
                }
            }
        ),
        id="scale-io",
    ),
    pytest.param(
        _pod(
            volume={
                "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}
            }
        ),
        _pod(
            volume={
                "ephemeral": {
                    "volumeClaimTemplate": {
                        "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"}
                    }
                }
            }
        ),
        _pod(
            volume={
                "ephemeral": {
                    "volumeClaimTemplate": {
                        "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Block"}
                    }
                }
            }
        ),
        id="ephemeral-volume-mode",
    ),
]


@pytest.mark.parametrize(("without", "explicit", "other"), DEFAULTS)
def test_kubernetes_defaults_are_applied_before_hashing(
    without: Pod, explicit: Pod, other: Pod
) -> None:
    assert fingerprint(without) == fingerprint(explicit)
    assert fingerprint(other) != fingerprint(explicit)


def test_distill_neither_mutates_nor_shares_the_input() -> None:
    pod = captured("03")
    before = copy.deepcopy(pod)
    distilled = distill(pod)
    distilled["spec"]["containers"][0]["command"].append("--changed")
    distilled["spec"]["volumes"][1]["emptyDir"]["medium"] = "Disk"
    assert pod == before


@pytest.mark.parametrize(
    "odd",
    [
        pytest.param({"metadata": "x", "spec": []}, id="metadata-and-spec-of-the-wrong-type"),
        pytest.param({"spec": {"containers": "x", "volumes": {}}}, id="lists-of-the-wrong-type"),
        pytest.param({"spec": {"containers": [1, None, {"ports": "x"}]}}, id="odd-items"),
        pytest.param(
            {"spec": {"containers": [{"volumeMounts": [{"name": ["x"]}, "m"], "ports": [7]}]}},
            id="unhashable-mount-name-and-odd-list-items",
        ),
        pytest.param(
            {"metadata": {"annotations": {1: "x"}, "labels": []}, "spec": {"volumes": [{}, 3]}},
            id="non-string-annotation-key-and-odd-volumes",
        ),
    ],
)
def test_odd_shapes_do_not_crash(odd: Pod) -> None:
    assert re.fullmatch(r"v1:sha256:[0-9a-f]{64}", fingerprint(odd))


def test_values_json_cannot_represent_raise_value_error() -> None:
    with pytest.raises(ValueError):
        fingerprint(_pod({"args": [float("nan")]}))


# ---------------------------------------------------------------------------------------------
# Properties (hypothesis)
# ---------------------------------------------------------------------------------------------

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
NAMES = st.text("abcxyz-", min_size=1, max_size=6)
CONTAINERS = st.fixed_dictionaries(
    {"name": NAMES},
    optional={
        "image": st.text(max_size=10),
        "command": st.lists(st.text(max_size=5), max_size=3),
        "env": st.lists(st.fixed_dictionaries({"name": NAMES, "value": st.text(max_size=4)})),
        "ports": st.lists(
            st.fixed_dictionaries(
                {"containerPort": st.integers(1, 65535)},
                optional={"protocol": st.sampled_from(["TCP", "UDP"]), "name": NAMES},
            ),
            max_size=2,
        ),
        "securityContext": st.dictionaries(st.text(max_size=6), JSON, max_size=3),
        "stdin": st.booleans(),
        "volumeMounts": st.lists(
            st.fixed_dictionaries({"name": NAMES, "mountPath": st.text(max_size=5)}), max_size=2
        ),
    },
)
VOLUMES = st.fixed_dictionaries(
    {"name": NAMES},
    optional={
        "emptyDir": st.dictionaries(st.sampled_from(["medium", "sizeLimit"]), st.text(max_size=4)),
        "configMap": st.dictionaries(st.sampled_from(["name", "defaultMode"]), JSON_SCALARS),
    },
)
PODS = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries(
            {},
            optional={
                "name": NAMES,
                "labels": st.dictionaries(st.text(max_size=12), st.text(max_size=3), max_size=3),
                "annotations": st.dictionaries(
                    st.sampled_from(["dev.gvisor.a", "dev.gvisor.b", "other", "x/y"]),
                    st.text(max_size=3),
                ),
            },
        ),
        "spec": st.fixed_dictionaries(
            {"containers": st.lists(CONTAINERS, min_size=1, max_size=3)},
            optional={
                "initContainers": st.lists(CONTAINERS, max_size=2),
                "volumes": st.lists(VOLUMES, max_size=3),
                "securityContext": st.dictionaries(st.text(max_size=6), JSON, max_size=3),
                "hostNetwork": st.booleans(),
                "dnsPolicy": st.sampled_from(["ClusterFirst", "Default", ""]),
                "nodeSelector": st.dictionaries(st.text(max_size=5), st.text(max_size=5)),
            },
        ),
    }
)


def _shuffle_keys(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: _shuffle_keys(value[k], rng) for k in keys}
    if isinstance(value, list):
        return [_shuffle_keys(v, rng) for v in value]
    return value


@given(pod=PODS, rng=st.randoms(use_true_random=False))
def test_property_key_order_never_changes_the_fingerprint(pod: Pod, rng: random.Random) -> None:
    assert fingerprint(_shuffle_keys(pod, rng)) == fingerprint(pod)


@given(pod=PODS)
def test_property_fingerprint_is_deterministic_pure_and_idempotent(pod: Pod) -> None:
    before = copy.deepcopy(pod)
    first = fingerprint(pod)
    assert re.fullmatch(r"v1:sha256:[0-9a-f]{64}", first)
    assert fingerprint(pod) == first
    assert fingerprint(copy.deepcopy(pod)) == first
    assert pod == before  # the input is never modified
    assert fingerprint(distill(pod)) == first  # distilling a distilled pod changes nothing


# ---------------------------------------------------------------------------------------------
# changed_paths: the report behind ``snapready diff`` and the hash-drift rule
# ---------------------------------------------------------------------------------------------

TWO = [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        pytest.param(
            _pod(),
            _pod(initContainers=[{"name": "i", "image": "i"}]),
            [("spec.initContainers[*].name", [], ["i"])],
            id="init-container-added-to-a-pod-without-any",
        ),
        pytest.param(
            _pod(),
            _pod(metadata={"annotations": {"dev.gvisor.x": "1"}}),
            [('metadata.annotations["dev.gvisor.x"]', None, "1")],
            id="gvisor-annotation-on-a-pod-without-metadata",
        ),
        pytest.param(
            _pod(containers=TWO),
            _pod(containers=TWO[::-1]),
            [("spec.containers[*].name", ["a", "b"], ["b", "a"])],
            id="swapped-containers-report-only-the-order",
        ),
        pytest.param(
            _pod(containers=TWO),
            _pod(containers=[TWO[0], {"name": "b", "image": "z"}]),
            [("spec.containers[1].image", "y", "z")],
            id="second-container-image",
        ),
        pytest.param(
            _pod(containers=TWO),
            _pod(containers=[{"name": "c", "image": "x"}, {"name": "b", "image": "z"}]),
            [
                ("spec.containers[*].name", ["a", "b"], ["c", "b"]),
                ("spec.containers[1].image", "y", "z"),
            ],
            id="renamed-container-and-a-change-in-a-common-one",
        ),
        pytest.param(
            _pod({"ports": [{"containerPort": 1}]}),
            _pod({"ports": [{"containerPort": 1}, {"containerPort": 2}]}),
            [
                (
                    "spec.containers[0].ports",
                    [{"containerPort": 1, "protocol": "TCP"}],
                    [
                        {"containerPort": 1, "protocol": "TCP"},
                        {"containerPort": 2, "protocol": "TCP"},
                    ],
                )
            ],
            id="port-added-reports-the-whole-list",
        ),
        pytest.param(
            _pod(volume={"emptyDir": {}}),
            _pod(volume={"emptyDir": {"medium": "Memory"}}),
            [("spec.volumes[0].emptyDir.medium", None, "Memory")],
            id="empty-dir-medium-set",
        ),
    ],
)
def test_changed_paths_report(a: Pod, b: Pod, expected: list[tuple[str, Any, Any]]) -> None:
    assert changed_paths(a, b) == expected
    assert changed_paths(b, a) == [(path, y, x) for path, x, y in expected]


FIELD_NAMES = st.sampled_from(
    [
        "name",
        "image",
        "ports",
        "volumeMounts",
        "volumeDevices",
        "lifecycle",
        "securityContext",
        "stdin",
        "readOnly",
        "labels",
        "annotations",
        "volumes",
        "containers",
        "initContainers",
        "projected",
        "sources",
        "serviceAccountToken",
        "emptyDir",
        "httpGet",
        "postStart",
        "volumeAttributes",
        "dev.gvisor.x",
        "batch.kubernetes.io/job-completion-index",
    ]
) | st.text(max_size=4)
ODD_JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(FIELD_NAMES, inner, max_size=4),
    max_leaves=25,
)


@given(metadata=ODD_JSON, spec=st.dictionaries(FIELD_NAMES, ODD_JSON, max_size=5))
def test_property_any_json_shaped_pod_gets_a_fingerprint(metadata: Any, spec: Pod) -> None:
    # what the API server can send is JSON with string keys and finite numbers: never an error
    value = fingerprint({"metadata": metadata, "spec": spec})
    assert re.fullmatch(r"v1:sha256:[0-9a-f]{64}", value)
    assert changed_paths({"metadata": metadata, "spec": spec}, {}) is not None


ANY_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and infinities included: JCS refuses them
    | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(
    security=st.dictionaries(st.text(max_size=4), ANY_JSON, max_size=3),
    args=st.lists(ANY_JSON, max_size=3),
    annotation=ANY_JSON,
)
def test_property_fingerprint_is_sha256_of_the_rfc8785_bytes(
    security: dict[str, Any], args: list[Any], annotation: Any
) -> None:
    """The fingerprint's orjson fast path writes exactly what ``rfc8785`` writes, or defers to
    it: floats, NaN, big integers and non-ASCII keys anywhere in the hashed fields."""
    pod = {
        "metadata": {"annotations": {"dev.gvisor.x": annotation}},
        "spec": {"securityContext": security, "containers": [{"name": "a", "args": args}]},
    }
    try:
        expected = rfc8785.dumps(distill(pod))
    except ValueError:
        with pytest.raises(ValueError):
            fingerprint(pod)
        return
    assert fingerprint(pod) == "v1:sha256:" + hashlib.sha256(expected).hexdigest()


@given(
    security=st.dictionaries(st.text(max_size=4), ANY_JSON, max_size=3),
    args=st.lists(ANY_JSON, max_size=3),
    annotation=ANY_JSON,
)
# keys orjson and JCS sort apart (code points vs UTF-16 units), a float, a big integer
@example(security={"\ue000": 1, "\U00010000": 2}, args=[], annotation=None)
@example(security={"a": 0.5}, args=[2**60], annotation=1.5)
def test_property_field_digests_are_of_the_rfc8785_bytes(
    security: dict[str, Any], args: list[Any], annotation: Any
) -> None:
    """Each field digest is the SHA-256 of its value's ``rfc8785`` bytes, written through the
    orjson fast path or not (``distill.jcs_bytes``): an origin record's digests must not depend
    on which path wrote them."""
    pod = {
        "metadata": {"annotations": {"dev.gvisor.x": annotation}},
        "spec": {"securityContext": security, "containers": [{"name": "a", "args": args}]},
    }
    distilled = distill(pod)

    def reference(value: Any) -> str:
        return hashlib.sha256(rfc8785.dumps(value)).hexdigest()[:DIGEST_CHARS]

    try:
        expected = {
            'metadata.annotations["dev.gvisor.x"]': reference(
                distilled["metadata"]["annotations"]["dev.gvisor.x"]
            )
            if "metadata" in distilled
            else None,
            "spec.securityContext": reference(distilled["spec"]["securityContext"]),
            "spec.containers[0].args": reference(distilled["spec"]["containers"][0]["args"])
            if "args" in distilled["spec"]["containers"][0]
            else None,
        }
    except ValueError:
        with pytest.raises(ValueError):
            field_digests(pod)
        return
    digests = field_digests(pod)
    for path, value in expected.items():
        assert digests.get(path) == value, path
