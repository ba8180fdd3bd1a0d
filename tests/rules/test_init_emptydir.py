"""``init-emptydir``: a run-to-completion init container that is the first to mount an emptyDir.

Under gVisor such a pod cannot be restored (``tests/gvisor/test_pod_sandbox.py`` shows runsc
refusing it; ``docs/rules/init-emptydir.md``). The rows put the first mount of an emptyDir in
each place the kubelet's start order can put it.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.conftest import make_settings
from tests.mutation.test_mutation import engine_for, make_review, run
from tests.rules.test_facts import engine_with, policy
from tests.rules.test_table import STRICT_RULES, cpu_pod, judge, lines, outcomes
from webhook.admission.engine import admit
from webhook.kube.review import AdmissionRequest
from webhook.mutation import as_admitted
from webhook.rules.sandbox import INIT_EMPTYDIR_RULE, _init_message
from webhook.server.runner import build_engine

Pod = dict[str, Any]
RULE = "init-emptydir"


def mount(volume: str = "cache", path: str = "/cache") -> dict[str, Any]:
    return {"name": volume, "mountPath": path}


def init(name: str = "fetch", *mounts: dict[str, Any], sidecar: bool = False) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": "registry.example/x", "command": ["true"]}
    container["volumeMounts"] = list(mounts)
    if sidecar:
        container["restartPolicy"] = "Always"
    return container


def pod_with(
    inits: list[dict[str, Any]], app_mounts: list[dict[str, Any]], volumes: list[Any]
) -> Pod:
    pod = cpu_pod()
    spec = pod["spec"]
    spec["initContainers"] = inits
    spec["containers"][0]["volumeMounts"] = app_mounts
    spec["volumes"] = volumes
    return pod


DISK = {"name": "cache", "emptyDir": {}}
MEMORY = {"name": "cache", "emptyDir": {"medium": "Memory"}}


@pytest.mark.parametrize(
    ("pod", "paths"),
    [
        pytest.param(
            pod_with([init("fetch", mount())], [mount()], [DISK]),
            ["spec.initContainers[0].volumeMounts[0]"],
            id="init-fills-a-cache-the-app-reads",
        ),
        pytest.param(
            pod_with([init("fetch", mount())], [], [MEMORY]),
            ["spec.initContainers[0].volumeMounts[0]"],
            id="memory-medium-and-no-app-mount-too",
        ),
        pytest.param(
            pod_with(
                [init("proxy", mount(), sidecar=True), init("fetch", mount())], [mount()], [DISK]
            ),
            [],
            id="a-native-sidecar-mounts-it-first",
        ),
        pytest.param(
            pod_with([init("setup")], [mount()], [DISK]),
            [],
            id="only-the-app-mounts-it",
        ),
        pytest.param(
            pod_with(
                [init("fetch", mount("config", "/etc/app"))],
                [],
                [{"name": "config", "configMap": {"name": "c"}}],
            ),
            [],
            id="not-an-emptydir",
        ),
        pytest.param(
            pod_with(
                [init("a", mount("one", "/1")), init("b", mount("one", "/1"), mount("two", "/2"))],
                [mount("two", "/2")],
                [{"name": "one", "emptyDir": {}}, {"name": "two", "emptyDir": {}}],
            ),
            ["spec.initContainers[0].volumeMounts[0]", "spec.initContainers[1].volumeMounts[1]"],
            id="each-volume-at-its-own-first-mount",
        ),
    ],
)
def test_the_first_mount_of_each_emptydir_decides(pod: Pod, paths: list[str]) -> None:
    decision = judge(pod)
    found = [path for rule, path, _ in lines(decision) if rule == RULE]
    assert found == paths
    assert decision.allowed  # a warning: GKE runs its own runsc build


@pytest.mark.parametrize(
    ("value", "warned"), [("true", False), ("True", False), ("1", False), ("no", True)]
)
def test_an_emptydir_forced_to_stay_a_host_bind_mount_is_not_in_the_sandbox(
    value: str, warned: bool
) -> None:
    """GKE's shim reads the annotation with Go's ``strconv.ParseBool`` (a trial: ``True``)."""
    pod = pod_with([init("fetch", mount())], [mount()], [DISK])
    pod["metadata"]["annotations"] = {"dev.gvisor.empty-dir.cache.force-shared": value}
    assert (RULE in outcomes(judge(pod))["warn"]) is warned


def test_a_users_own_container_named_snapready_helpers_gets_the_general_advice() -> None:
    """With injection off (or in offline ``check``) nothing refuses the reserved name; only our
    older command earns "remove it" (a trial: it told a user to delete their own volume)."""
    pod = pod_with([init("snapready-helpers", mount())], [mount()], [DISK])
    decision = judge(pod)
    ((_, _, message),) = [line for line in lines(decision) if line[0] == RULE]
    assert message.startswith("mount emptyDir 'cache' first in a native sidecar")


def test_a_pod_copied_from_one_an_earlier_version_admitted_is_ours_and_warned() -> None:
    """Earlier versions injected a run-to-completion init container; such a pod is no
    ``helper-collision`` (nothing is injected twice) but cannot be restored."""
    pod = pod_with([], [], [])
    admitted = as_admitted(copy.deepcopy(pod), make_settings())
    legacy = admitted["spec"]["initContainers"][0]
    del legacy["restartPolicy"]
    legacy["command"] = ["cp", "-R", "/opt/snapready/helpers/.", "/snapready/"]
    assert as_admitted(admitted, make_settings()) == admitted  # recognised: nothing added
    decision = judge(admitted)
    assert decision.allowed
    ((_, path, message),) = [line for line in lines(decision) if line[0] == RULE]
    assert path == "spec.initContainers[0].volumeMounts[0]"
    assert message.startswith("remove the 'snapready-helpers' init container and volume")


def test_the_older_command_made_a_sidecar_is_not_ours() -> None:
    """A ``cp`` that exits, made a sidecar, would be restarted for ever: a reserved-name
    collision, not our container (a new-user trial silenced the warning that way)."""
    admitted = as_admitted(pod_with([], [], []), make_settings())
    admitted["spec"]["initContainers"][0]["command"] = [
        "cp", "-R", "/opt/snapready/helpers/.", "/snapready/"
    ]  # fmt: skip
    assert as_admitted(admitted, make_settings()) is admitted  # a collision: nothing injected
    assert RULE not in outcomes(judge(admitted))["warn"]  # a sidecar mounts first
    decision = run(make_review(admitted), engine_for())
    assert not decision.allowed
    assert "spec.initContainers[0]: container name 'snapready-helpers'" in (decision.message or "")


def test_a_mount_name_of_another_type_is_skipped_not_a_crash() -> None:
    """Found by tests/server/test_hostile.py: a list as a mount's name (unhashable)."""
    pod = pod_with([init("fetch", {"name": ["cache"], "mountPath": "/c"}, mount())], [], [DISK])
    found = [path for rule, path, _ in lines(judge(pod)) if rule == RULE]
    assert found == ["spec.initContainers[0].volumeMounts[1]"]


def test_the_warning_names_the_container_the_volume_and_the_fix() -> None:
    decision = judge(pod_with([init("fetch", mount())], [mount()], [DISK]))
    ((_, _, message),) = [line for line in lines(decision) if line[0] == RULE]
    assert "'fetch'" in message and "'cache'" in message
    assert message.startswith("mount emptyDir 'cache' first in a native sidecar that keeps")


@pytest.mark.parametrize(
    "path_prefix",
    ["spec", "spec.template.spec", "spec.jobTemplate.spec.template.spec"],
)
def test_the_warning_fits_the_api_servers_256_characters(path_prefix: str) -> None:
    """k8s.io/apiserver cuts a warning at 256 characters: the fix must survive, even for long
    names under a CronJob."""
    path = f"{path_prefix}.initContainers[0].volumeMounts[0]"
    container = {"name": "fetch-weights-from-gcs"}
    message = _init_message(INIT_EMPTYDIR_RULE, path, container, "hf-model-cache")
    assert len(f"[{INIT_EMPTYDIR_RULE}] {path}: {message}") <= 256
    assert message.startswith("mount emptyDir 'hf-model-cache' first in a native sidecar")
    long_name = {"name": "f" * 63}
    shortest = _init_message(INIT_EMPTYDIR_RULE, path, long_name, "v" * 63)
    assert len(f"[{INIT_EMPTYDIR_RULE}] {path}: {shortest}") <= 256
    assert shortest.startswith("mount this emptyDir first")


def test_a_deployment_template_is_judged_at_its_template_path() -> None:
    template = pod_with([init("fetch", mount())], [mount()], [DISK])
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llm", "namespace": "snap"},
        "spec": {
            "selector": {"matchLabels": {"app": "llm"}},
            "template": {"metadata": template["metadata"], "spec": template["spec"]},
        },
    }
    request = AdmissionRequest.model_validate(
        {
            "uid": "u-2",
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "namespace": "snap",
            "operation": "CREATE",
            "object": deployment,
        }
    )
    engine = build_engine(make_settings(rules=STRICT_RULES))
    engine.offline = True
    found = [path for rule, path, _ in lines(admit(request, "validate", engine)) if rule == RULE]
    assert found == ["spec.template.spec.initContainers[0].volumeMounts[0]"]


def test_rootfs_only_policies_restore_no_memory_and_are_not_warned() -> None:
    pod = pod_with([init("fetch", mount())], [mount()], [DISK])
    engine = engine_with(policies=(policy(scope="rootfs-only"),))
    assert RULE not in outcomes(judge(pod, engine))["warn"]


def test_snapreadys_own_injection_does_not_trip_it() -> None:
    """The injected ``snapready-helpers`` sidecar is the first to mount its emptyDir, before a
    user init container that also comes first in the pod as written."""
    pod = pod_with([init("setup")], [], [])
    admitted = as_admitted(copy.deepcopy(pod), make_settings())
    assert admitted["spec"]["initContainers"][0]["name"] == "snapready-helpers"
    assert RULE not in outcomes(judge(admitted))["warn"]
