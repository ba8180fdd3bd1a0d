"""What snapready injects, in a whole pod under real gVisor, across a checkpoint and restore of
the pod's sandbox.

The other gVisor tests run one container per sandbox. A GKE pod is one sandbox: the pause
container, the injected ``snapready-helpers`` container, and the app containers, laid out as the
kubelet, containerd and GKE's runsc shim do (``tests/gvisor/pod.py``: order, an exited
container deleted, emptyDirs inside the sandbox). The pod is the injection's own output
(``webhook.mutation.as_admitted``), started from the helpers image as the Dockerfile builds it,
checkpointed, and restored as another pod of the same template whose env differs.

What it found: with the helpers copied by a run-to-completion init container (the injection up to
now), every injected pod's restore failed. runsc files a pod-shared emptyDir under the name of the
first container that mounted it, and a restore brings back only the containers that ran at the
checkpoint: the init container had exited, so its volume's memory file had no owner
(``test_an_init_container_first_to_mount_an_emptydir_leaves_it_unrestorable``, with gVisor's
message). The injected container is now a native sidecar, running at the checkpoint and restored
with the pod.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from tests.admission.test_mutate_findings import with_snapshot
from tests.conftest import make_settings
from tests.gvisor.conftest import PROGRAMS
from tests.gvisor.pod import EMPTY_DIR, Pod, image_factory
from tests.mutation.test_mutation import apply, engine_for, make_pod, make_review, run
from tests.support.gvisor import Runsc, crash_seen, parse_report
from tests.support.required import unavailable
from webhook.base.keys import HELPERS_NAME
from webhook.mutation import as_admitted

APP_IMAGE = "registry.example/llm:1"
REPORTED = ["WHO", "PLAIN"]
RUNNING = [HELPERS_NAME, "model", "proxy"]
"""The containers that run at the checkpoint (the pause container aside)."""


def manifest(name: str, tag: str) -> dict[str, Any]:
    """A pod of two app containers, each using one helper: ``model`` runs ``rehydrate watch``
    (``programs/rehydrate_watch.sh``), ``proxy`` Python's ``on_restore``
    (``programs/rehydrate_app.py``). ``WHO`` differs per container, ``PLAIN`` per pod."""

    def env(container: str) -> list[dict[str, str]]:
        return [{"name": "WHO", "value": f"{container}-{tag}"}, {"name": "PLAIN", "value": tag}]

    watch = ["/bin/sh", "/app/rehydrate_watch.sh", *REPORTED]
    python = ["/usr/bin/python3", "-u", "/app/rehydrate_app.py", "wait", *REPORTED]
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"app": "llm"}},
        "spec": {
            "containers": [
                {"name": "model", "image": APP_IMAGE, "command": watch, "env": env("model")},
                {"name": "proxy", "image": APP_IMAGE, "command": python, "env": env("proxy")},
            ]
        },
    }


@pytest.fixture
def images(tmp_path: Path) -> Any:
    busybox = shutil.which("busybox")
    if busybox is None:
        unavailable("runsc", "busybox is not installed (sudo make tools)")
    helpers_image = make_settings().injection.helpers_image
    return image_factory(tmp_path, {helpers_image: "helpers", APP_IMAGE: "debian"}, busybox)


def injected(name: str, tag: str) -> dict[str, Any]:
    pod = as_admitted(manifest(name, tag), make_settings())
    assert pod["spec"]["initContainers"][0]["name"] == HELPERS_NAME
    return pod


def running_pod(runsc: Runsc, pod: dict[str, Any], images: Any) -> Pod:
    """``pod`` started, once both apps wait on the checkpoint file."""
    started = Pod(runsc, pod, images, PROGRAMS).start()
    started.containers["model"].wait_for(r"^watching$", timeout=30)
    started.containers["proxy"].wait_for(r"^waiting 0$", timeout=30)
    return started


def test_an_injected_pod_restores_and_each_container_rehydrates_its_own_env(
    runsc: Runsc, images: Any, tmp_path: Path
) -> None:
    original = running_pod(runsc, injected("llm-a", "old"), images)
    original.checkpoint(tmp_path / "image")

    copy = Pod(runsc, injected("llm-b", "new"), images, PROGRAMS)
    copy.restore(tmp_path / "image", RUNNING)

    model = copy.containers["model"]
    model.wait_for(r"^done-new$", timeout=30)
    assert parse_report(model.output(), "hook-new") == {"WHO": b"model-new", "PLAIN": b"new"}
    proxy = copy.containers["proxy"]
    proxy.wait_for(r"^child1 ", timeout=30)
    assert parse_report(proxy.output(), "env1") == {"WHO": b"proxy-new", "PLAIN": b"new"}
    # The files came back with the snapshot: the new pod's emptyDir folder on the host holds
    # only gVisor's backing file, and nothing copied them again.
    folder = runsc.work / "kubelet" / "uid-llm-b" / "volumes" / EMPTY_DIR / HELPERS_NAME
    assert not (folder / "rehydrate").exists()
    assert [p.name for p in folder.iterdir()] == [f".gvisor.filestore.{copy.sandbox_id}"]


def test_a_workload_trigger_from_an_app_container_checkpoints_the_pod(
    runsc: Runsc, images: Any, tmp_path: Path
) -> None:
    """GKE's workload trigger with the pod's annotations: ``rehydrate checkpoint`` in one app
    container checkpoints the whole sandbox; both apps read ``resume`` and go on."""
    image = tmp_path / "image"
    image.mkdir()
    pod = injected("llm-a", "old")
    pod["metadata"]["annotations"] = {
        "dev.gvisor.internal.checkpoint.enable": "true",
        "dev.gvisor.internal.checkpoint.resume": "true",
        "dev.gvisor.internal.checkpoint.path": str(image),
    }
    original = running_pod(runsc, pod, images)

    runsc.call("exec", original.containers["model"].cid, "/snapready/rehydrate", "checkpoint")

    original.containers["proxy"].wait_for(r"^answer1 resume$", timeout=30)
    assert sorted(p.name for p in image.iterdir()) == [
        "checkpoint.img",
        "pages.img",
        "pages_meta.img",
    ]
    copy = Pod(runsc, injected("llm-b", "new"), images, PROGRAMS).restore(image, RUNNING)
    copy.containers["model"].wait_for(r"^done-new$", timeout=30)
    assert parse_report(copy.containers["model"].output(), "hook-new")["WHO"] == b"model-new"


def test_an_init_container_first_to_mount_an_emptydir_leaves_it_unrestorable(
    runsc: Runsc, images: Any, tmp_path: Path
) -> None:
    """The injection as it was: a run-to-completion init container copying the helpers. It
    exits and is deleted before the checkpoint; runsc then cannot restore the emptyDir it
    mounted first, whatever the restoring pod holds."""
    pod = injected("llm-a", "old")
    ours = pod["spec"]["initContainers"][0]
    del ours["restartPolicy"]
    ours["command"] = ["cp", "-R", "/opt/snapready/helpers/.", "/snapready/"]
    original = running_pod(runsc, pod, images)
    assert original.container_id(HELPERS_NAME) not in runsc.started  # exited, then deleted
    original.checkpoint(tmp_path / "image")

    copy = Pod(runsc, pod | {"metadata": {"name": "llm-b", "uid": "uid-llm-b"}}, images, PROGRAMS)
    with pytest.raises(AssertionError) as refused:
        copy.restore(tmp_path / "image", ["model", "proxy"])
    assert f'Memory file for "{HELPERS_NAME}:/snapready" not found' in str(refused.value)
    assert crash_seen(str(refused.value)), "the leader would not see this restore crash"


def user_pod(name: str, medium: str, first: str) -> dict[str, Any]:
    """A pod whose init container ``fetch`` writes a file into the emptyDir ``cache`` and exits;
    the app prints the file every 0.2 s. ``first``: ``init`` (``fetch`` mounts it first, the app
    too), ``init-only`` (no other container mounts it) or ``sidecar`` (a native sidecar that
    waits mounts it before ``fetch``)."""
    cache: dict[str, Any] = {"name": "cache", "mountPath": "/cache"}
    fetch: dict[str, Any] = {"name": "fetch", "image": APP_IMAGE, "volumeMounts": [cache]}
    fetch["command"] = ["/bin/sh", "-c", "echo weights > /cache/model"]
    show = "while :; do cat /cache/model 2>&1; sleep 0.2; done"
    app: dict[str, Any] = {"name": "app", "image": APP_IMAGE, "command": ["/bin/sh", "-c", show]}
    if first != "init-only":
        app["volumeMounts"] = [{**cache, "readOnly": True}]
    inits = [fetch]
    if first == "sidecar":
        hold: dict[str, Any] = {"name": "hold", "image": APP_IMAGE, "restartPolicy": "Always"}
        inits.insert(
            0, {**hold, "command": ["/usr/bin/sleep", "infinity"], "volumeMounts": [cache]}
        )
    empty = {"medium": "Memory"} if medium == "memory" else {}
    spec = {"initContainers": inits, "containers": [app]}
    return {
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": {**spec, "volumes": [{"name": "cache", "emptyDir": empty}]},
    }


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(("disk", "init", False), id="disk-init-first"),
        pytest.param(("memory", "init-only", False), id="memory-init-first-no-app-mount"),
        pytest.param(("disk", "sidecar", True), id="disk-sidecar-first"),
        pytest.param(("memory", "sidecar", True), id="memory-sidecar-first"),
    ],
)
def test_the_first_container_to_mount_an_emptydir_must_run_at_the_checkpoint(
    runsc: Runsc, images: Any, tmp_path: Path, case: tuple[str, str, bool]
) -> None:
    """What ``init-emptydir`` (docs/rules/init-emptydir.md) warns about, in a user's pod, and
    what admission predicts for a new pod of it once a snapshot of the same fingerprint is
    Ready: ``hit`` exactly when runsc restores it."""
    medium, first, restores = case
    outcome, warnings = predicted(user_pod("job-b", medium, first))
    assert outcome == ("hit" if restores else "miss"), warnings
    assert any(w.startswith("snapready: will fail to restore") for w in warnings) != restores
    original = Pod(runsc, user_pod("job-a", medium, first), images, PROGRAMS).start()
    original.containers["app"].wait_for(r"No such file" if first == "init-only" else r"^weights$")
    original.checkpoint(tmp_path / "image")

    copy = Pod(runsc, user_pod("job-b", medium, first), images, PROGRAMS)
    names = ["hold", "app"] if first == "sidecar" else ["app"]
    if restores:
        copy.restore(tmp_path / "image", names)
        before = copy.containers["app"].output().count("weights")
        deadline = time.monotonic() + 10
        while copy.containers["app"].output().count("weights") <= before:
            assert time.monotonic() < deadline, copy.containers["app"].output()
            time.sleep(0.1)
    else:
        with pytest.raises(AssertionError) as refused:
            copy.restore(tmp_path / "image", names)
        assert 'Memory file for "fetch:/cache" not found' in str(refused.value)
        assert crash_seen(str(refused.value)), "the leader would not see this restore crash"


def predicted(pod: dict[str, Any]) -> tuple[str, list[str]]:
    """snapready's ``/mutate`` answer for ``pod`` (selected by ``llm-policy``, helpers not
    injected, so that runsc runs the pod as predicted) when a Ready snapshot of its own
    fingerprint exists: the ``restore-prediction`` it stamps, and its warnings."""
    subject = make_pod(pod["spec"], annotations={"snapready.io/inject": "false"})
    subject["spec"]["runtimeClassName"] = "gvisor"
    first = apply(subject, run(make_review(subject), engine_for()))
    engine = with_snapshot(engine_for(), first["metadata"]["annotations"]["snapready.io/spec-hash"])
    decision = run(make_review(subject), engine)
    annotations = apply(subject, decision)["metadata"]["annotations"]
    return annotations["snapready.io/restore-prediction"], list(decision.warnings)
