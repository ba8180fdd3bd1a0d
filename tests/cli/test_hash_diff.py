"""``snapready hash`` and ``snapready diff``: output, exit codes, stdin, errors, injection.

Expected fingerprints come from the webhook itself: the ``spec-hash`` annotation in the patch that
``webhook.admission.engine.admit`` returns for a captured AdmissionReview under the example policies
(``webhook_hash``), not from the manifests the commands read, so each check crosses the
manifest/defaulting/injection boundary. ``--no-inject`` values are compared with the distilled
fingerprint of the object as captured, and two values are pinned from the user report.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonpatch
import orjson
import pytest

from tests.conftest import DATA, REVIEWS, load_review, make_settings
from webhook.admission.engine import admit
from webhook.base.types import RawObject
from webhook.cli import main
from webhook.kube.review import parse_review
from webhook.pod.distill import fingerprint
from webhook.server.runner import build_engine

MANIFESTS = DATA / "manifests"
LLM_POD = str(MANIFESTS / "llm-l4x4.yaml")
LLM_SERVER = str(MANIFESTS / "llm-server.yaml")
WORKLOADS = str(MANIFESTS / "workloads.yaml")
REVIEW_03 = str(REVIEWS / "03-pod-create-gvisor-l4x4-gpu4.json")
REVIEW_13 = str(REVIEWS / "13-deployment-create.json")
REVIEW_40 = str(REVIEWS / "40-pod-create-by-replicaset-controller.json")


HASH_KEY = "snapready.io/spec-hash"
# From the user report: review 40's pod as written, and the spec-hash the webhook wrote on it
# (1ce2ef4e...). The injected container became a native sidecar since (a GKE restore needs it
# running at the checkpoint: webhook/mutation/helpers.py), which changes the injected pod's
# value, as every change to the injection does; the pod as written keeps its value.
REPORTED_RAW_40 = "v1:sha256:c9fe1168a27677b3f853b4310400e074135cce111a82e14d73a2dbf823d70673"
REPORTED_WEBHOOK_40 = "v1:sha256:fe8ff38c7be7f2d3817e0e14759ecb039afe09de4743a8f4991ca617356f71ba"


@pytest.fixture(autouse=True)
def _an_injecting_webhook(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests compare the CLI with a webhook that injects its helpers (the server settings'
    default, a chart installed with injectHelpers=true): the env says so, as a user would with
    SNAPREADY_INJECTION__ENABLED. The chart-default tests (``chart_default`` marker) do not."""
    if "chart_default" not in request.keywords:
        monkeypatch.setenv("SNAPREADY_INJECTION__ENABLED", "true")
    else:
        monkeypatch.delenv("SNAPREADY_INJECTION__ENABLED", raising=False)


def webhook_patch(review: RawObject, **settings: Any) -> list[RawObject]:
    """The JSON Patch the mutating webhook returns for ``review`` (example policies)."""
    engine = build_engine(make_settings(**settings))
    decision = admit(parse_review(orjson.dumps(review)).request, "mutate", engine)
    assert decision.allowed, decision
    return list(decision.patch)


def webhook_hash(name: str | RawObject, **settings: Any) -> str:
    """The ``spec-hash`` the webhook writes on the pod of review ``name`` (or a review dict)."""
    review = load_review(name) if isinstance(name, str) else name
    patched = jsonpatch.apply_patch(review["request"]["object"], webhook_patch(review, **settings))
    value = patched["metadata"]["annotations"][HASH_KEY]
    assert isinstance(value, str)
    return value


def live_pod(name: str) -> RawObject:
    """The pod of review ``name`` after the webhook's patch (what ``kubectl get pod`` shows)."""
    review = load_review(name)
    pod: RawObject = jsonpatch.apply_patch(review["request"]["object"], webhook_patch(review))
    return pod


def raw(name: str) -> str:
    """Distilled fingerprint of the object in review ``name`` as captured (no injection)."""
    return fingerprint(load_review(name)["request"]["object"])


def write_json(path: Path, obj: RawObject) -> str:
    path.write_text(json.dumps(obj))
    return str(path)


def deployment_pod_review() -> RawObject:
    """Review 40 (a pod of the llm-server ReplicaSet) with the Deployment's image of review 13.

    Reviews 13 and 40 differ only in that image (the rollout that created review 40's ReplicaSet
    changed it), so this is the pod review 13's Deployment itself would create.
    """
    review = load_review("40")
    review["request"]["object"]["spec"]["containers"][0]["image"] = "vllm/vllm-openai:v0.6.3"
    return review


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ----------------------------------------------------------------------------------- hash


def test_hash_prints_kind_namespace_name_and_the_admission_time_value(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "hash", LLM_POD)
    assert code == 0
    assert out == f"Pod/snap/llm-l4x4  {webhook_hash('03')}\n"


def test_hash_of_a_deployment_equals_the_api_server_defaulted_template(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "hash", LLM_SERVER)
    assert code == 0
    assert out == f"Deployment/snap/llm-server  {webhook_hash(deployment_pod_review())}\n"
    assert "skipped Service/snap/llm-server" in err  # the Service in the same file


def test_hash_of_every_controller_kind_equals_the_admitted_twin_pod(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "hash", WORKLOADS)
    twin = webhook_hash("30")
    assert code == 0
    assert out.splitlines() == [
        f"StatefulSet/snap/llm-sts  {twin}",
        f"DaemonSet/snap/llm-ds  {twin}",
        f"ReplicaSet/snap/llm-rs  {twin}",
        f"Job/snap/llm-job  {twin}",
        f"CronJob/snap/llm-cron  {twin}",
    ]


def test_hash_notes_that_indexed_job_pods_also_hash_the_completion_index(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, _, err = run(capsys, "hash", WORKLOADS)
    notes = [line for line in err.splitlines() if "Indexed Job" in line]
    assert len(notes) == 2  # the Indexed Job and the Indexed CronJob
    assert "Job/snap/llm-job is an Indexed Job" in notes[0]
    assert "batch.kubernetes.io/job-completion-index" in notes[0]
    assert "CronJob/snap/llm-cron" in notes[1]


def test_hash_says_which_injection_it_assumed(capsys: pytest.CaptureFixture[str]) -> None:
    _, _, err = run(capsys, "hash", LLM_POD)
    assert "helpers the webhook injects" in err
    assert "injectHelpers=true" in err
    _, _, quiet = run(capsys, "hash", "--no-inject", LLM_POD)
    assert "helpers the webhook injects" not in quiet


def test_indexed_job_pods_really_hash_differently_per_index() -> None:
    job = json.loads(json.dumps(load_review("30")["request"]["object"]))
    hashes = set()
    for index in ("0", "1"):
        job["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] = index
        hashes.add(fingerprint(job))
    assert len(hashes | {raw("30")}) == 3


def test_hash_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "hash", "--json", LLM_POD, WORKLOADS)
    entries: list[dict[str, Any]] = json.loads(out)
    assert code == 0
    assert [e["ref"] for e in entries][:2] == ["Pod/snap/llm-l4x4", "StatefulSet/snap/llm-sts"]
    first, job = entries[0], entries[4]
    assert first["fingerprint"] == webhook_hash("03")
    assert (first["source"], first["specPath"], first["namespace"]) == (
        f"{LLM_POD}#0",
        "spec",
        "snap",
    )
    assert job["kind"] == "Job" and job["specPath"] == "spec.template.spec"
    assert len(job["notes"]) == 1
    assert first["injected"] is True
    assert "distilled" not in first


def test_hash_distilled_shows_exactly_what_is_hashed(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "hash", "--distilled", LLM_POD)
    (entry,) = json.loads(out)
    container = entry["distilled"]["spec"]["containers"][0]
    assert code == 0
    assert "env" not in container and "resources" not in container
    assert container["ports"] == [{"containerPort": 8000, "name": "http", "protocol": "TCP"}]


def test_hash_reads_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = Path(LLM_POD).read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    code, out, _ = run(capsys, "hash", "-")
    assert (code, out) == (0, f"Pod/snap/llm-l4x4  {webhook_hash('03')}\n")


def test_hash_accepts_captured_reviews_and_kubectl_lists(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "hash", REVIEW_03, str(MANIFESTS / "pods-list.json"))
    lines = out.splitlines()
    assert code == 0
    assert lines[0] == f"Pod/snap/llm-l4x4  {webhook_hash('03')}"
    assert [line.split()[0] for line in lines[1:]] == ["Pod/snap/a", "Pod/snap/b"]
    assert lines[1].split()[1] == webhook_hash("30")  # same spec as the twin pod


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["missing.yaml"], "missing.yaml: cannot read", id="missing-file"),
        pytest.param([str(MANIFESTS / "broken.yaml")], "invalid YAML at line 5", id="broken-yaml"),
        pytest.param(
            [str(MANIFESTS / "not-an-object.yaml")], "not a Kubernetes object", id="not-an-object"
        ),
        pytest.param(
            [str(REVIEWS / "34-podsnapshotpolicy-create-llm.json")],
            "no Pod or pod template",
            id="no-pod-spec-in-input",
        ),
    ],
)
def test_hash_bad_input_exits_2_with_a_message(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, "hash", *argv)
    assert (code, out) == (2, "")
    assert err.startswith("snapready: ") and message in err


def test_hash_of_a_value_json_cannot_hold_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "nan.yaml"
    bad.write_text(
        "kind: Pod\nmetadata: {name: n}\nspec:\n  containers: [{name: c, args: [.nan]}]\n"
    )
    code, _, err = run(capsys, "hash", str(bad))
    assert code == 2
    assert f"{bad}#0: cannot fingerprint Pod/n" in err


def test_hash_without_files_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["hash"])
    assert exited.value.code == 2


# ----------------------------------------------------------------------------------- diff


def test_diff_of_manifest_and_admitted_pod_is_equal(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "diff", LLM_POD, REVIEW_03)
    assert code == 0
    assert out.splitlines() == [
        f"A  Pod/snap/llm-l4x4  {webhook_hash('03')}",
        f"B  Pod/snap/llm-l4x4  {webhook_hash('03')}",
        "fingerprints are equal",
    ]


def test_diff_explains_why_a_replicaset_pod_would_not_match(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "diff", LLM_SERVER, REVIEW_40)
    assert code == 1
    assert out.splitlines()[2:] == [
        "1 fingerprinted field(s) differ:",
        "  spec.containers[0].image",
        '    A: "vllm/vllm-openai:v0.6.3"',
        '    B: "vllm/vllm-openai:v0.6.4"',
    ]


def test_diff_shows_absent_values(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pod = load_review("03")["request"]["object"]
    pod["metadata"]["annotations"] = {"dev.gvisor.internal.nvproxy": "true"}
    changed = tmp_path / "annotated.json"
    changed.write_text(json.dumps(pod))
    code, out, _ = run(capsys, "diff", LLM_POD, str(changed))
    assert code == 1
    assert '  metadata.annotations["dev.gvisor.internal.nvproxy"]\n    A: (absent)\n' in out
    assert '    B: "true"\n' in out


def test_diff_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "diff", "--json", REVIEW_13, REVIEW_40)
    result = json.loads(out)
    assert code == 1
    assert result["equal"] is False
    assert result["a"]["ref"] == "Deployment/snap/llm-server"
    assert result["b"]["fingerprint"] == webhook_hash("40")
    assert result["changes"] == [
        {
            "path": "spec.containers[0].image",
            "a": "vllm/vllm-openai:v0.6.3",
            "b": "vllm/vllm-openai:v0.6.4",
        }
    ]


def test_diff_reads_one_side_from_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(Path(REVIEW_03).read_bytes())))
    code, out, _ = run(capsys, "diff", LLM_POD, "-")
    assert code == 0 and out.endswith("fingerprints are equal\n")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param([WORKLOADS, LLM_POD], "found 5", id="several-pod-specs-in-one-input"),
        pytest.param(
            [str(REVIEWS / "34-podsnapshotpolicy-create-llm.json"), LLM_POD],
            "found 0",
            id="no-pod-spec-in-one-input",
        ),
        pytest.param(["-", "-"], "only one of A and B can be -", id="stdin-twice"),
        pytest.param([LLM_POD, "missing.yaml"], "missing.yaml: cannot read", id="missing-file"),
    ],
)
def test_diff_bad_input_exits_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, "diff", *argv)
    assert (code, out) == (2, "")
    assert message in err


# ------------------------------------------------------------------------ helper injection


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("03", id="gvisor-l4-pod-hashes-like-its-webhook-spec-hash"),
        pytest.param("40", id="replicaset-pod-hashes-like-its-webhook-spec-hash"),
    ],
)
def test_hash_equals_the_spec_hash_the_webhook_writes(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    path = str(next(REVIEWS.glob(f"{name}-*.json")))
    code, out, _ = run(capsys, "hash", path)
    assert code == 0
    assert out.split()[1] == webhook_hash(name)
    assert webhook_hash(name) != raw(name)  # the helpers really are part of the value


def test_the_reported_review_40_values(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "hash", REVIEW_40)[1].split()[1] == REPORTED_WEBHOOK_40
    assert run(capsys, "hash", "--no-inject", REVIEW_40)[1].split()[1] == REPORTED_RAW_40


@pytest.mark.parametrize(
    "name",
    [pytest.param("03", id="live-gvisor-pod"), pytest.param("40", id="live-replicaset-pod")],
)
def test_hash_of_a_live_pod_that_has_the_helpers_is_its_own_annotation(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    pod = live_pod(name)
    code, out, _ = run(capsys, "hash", write_json(tmp_path / "live.json", pod))
    assert code == 0
    assert out.split()[1] == pod["metadata"]["annotations"]["snapready.io/spec-hash"]


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(REVIEW_13, id="deployment-in-a-captured-review"),
        pytest.param(LLM_SERVER, id="deployment-manifest"),
    ],
)
def test_deployment_template_hashes_like_the_pods_it_creates(
    capsys: pytest.CaptureFixture[str], source: str
) -> None:
    code, out, _ = run(capsys, "hash", source)
    assert code == 0
    assert out == f"Deployment/snap/llm-server  {webhook_hash(deployment_pod_review())}\n"


HOLD = "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"
COPY = (
    "set -e; for f in /opt/snapready/helpers/*; do n=${f##*/}; "
    'cp "$f" "/snapready/.$n.new"; mv -f "/snapready/.$n.new" "/snapready/$n"; done'
)


def test_deployment_template_with_hand_added_helpers(capsys: pytest.CaptureFixture[str]) -> None:
    template = load_review("13")["request"]["object"]["spec"]["template"]
    image = "ghcr.io/snapready/helpers:0.1.0@sha256:" + "0" * 64
    spec = template["spec"]
    spec["volumes"] = [*spec.get("volumes", []), {"name": "snapready-helpers", "emptyDir": {}}]
    spec["initContainers"] = [
        {
            "name": "snapready-helpers",
            "image": image,
            "restartPolicy": "Always",
            "command": ["/bin/sh", "-c", f"{COPY}; set +e; {HOLD}"],
            "volumeMounts": [{"name": "snapready-helpers", "mountPath": "/snapready"}],
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
                "readOnlyRootFilesystem": True,
                "runAsGroup": 65532,
                "runAsNonRoot": True,
                "runAsUser": 65532,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
        }
    ]
    for app in spec["containers"]:
        mount = {"name": "snapready-helpers", "mountPath": "/snapready", "readOnly": True}
        app["volumeMounts"] = [*app.get("volumeMounts", []), mount]
    _, out, _ = run(capsys, "hash", REVIEW_13)
    assert out.split()[1] == fingerprint(template)


def test_no_inject_hashes_the_manifest_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "hash", "--no-inject", "--json", REVIEW_03, REVIEW_13)
    pod, deployment = json.loads(out)
    template = load_review("13")["request"]["object"]["spec"]["template"]
    assert code == 0
    assert (pod["fingerprint"], pod["injected"]) == (raw("03"), False)
    assert deployment["fingerprint"] == fingerprint(template)


def test_opted_out_pod_hashes_without_helpers(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    review = load_review("03")
    review["request"]["object"]["metadata"]["annotations"]["snapready.io/inject"] = "false"
    path = write_json(tmp_path / "opted-out.json", review)
    code, out, _ = run(capsys, "hash", path)
    assert code == 0
    assert out.split()[1] == raw("03") == webhook_hash(review)


def test_pod_with_a_colliding_volume_hashes_as_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pod = load_review("03")["request"]["object"]
    pod["spec"]["volumes"].append({"name": "snapready-helpers", "configMap": {"name": "mine"}})
    code, out, _ = run(capsys, "hash", write_json(tmp_path / "collides.json", pod))
    assert code == 0
    assert out.split()[1] == fingerprint(pod)


OTHER_IMAGE = "registry.example/helpers:0.2.0@sha256:" + "4" * 64


def test_helpers_image_from_env_is_hashed_like_the_webhook_with_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SNAPREADY_INJECTION__HELPERS_IMAGE", OTHER_IMAGE)
    _, out, _ = run(capsys, "hash", REVIEW_40)
    expected = webhook_hash("40", injection={"helpers_image": OTHER_IMAGE})
    assert out.split()[1] == expected != REPORTED_WEBHOOK_40


def test_helpers_image_from_a_config_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text(f"injection:\n  helpers_image: {OTHER_IMAGE}\n")
    _, out, _ = run(capsys, "hash", "--config", str(config), REVIEW_40)
    assert out.split()[1] == webhook_hash("40", injection={"helpers_image": OTHER_IMAGE})


def test_injection_disabled_in_env_hashes_as_written(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SNAPREADY_INJECTION__ENABLED", "false")
    _, out, _ = run(capsys, "hash", REVIEW_40)
    assert out.split()[1] == REPORTED_RAW_40 == webhook_hash("40", injection={"enabled": False})


@pytest.mark.parametrize(
    "command", [pytest.param("hash", id="hash"), pytest.param("diff", id="diff")]
)
def test_invalid_injection_settings_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.setenv("SNAPREADY_INJECTION__HELPERS_IMAGE", "busybox:latest")
    argv = [REVIEW_40] if command == "hash" else [REVIEW_13, REVIEW_40]
    code, out, err = run(capsys, command, *argv)
    assert (code, out) == (2, "")
    assert "not pinned by digest" in err


def test_diff_of_deployment_and_live_pod_reports_only_the_image(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    live = write_json(tmp_path / "live.json", live_pod("40"))
    code, out, _ = run(capsys, "diff", REVIEW_13, live)
    assert code == 1
    assert out.splitlines() == [
        f"A  Deployment/snap/llm-server  {webhook_hash(deployment_pod_review())}",
        f"B  Pod/snap/llm-server-b867fccc6-*  {REPORTED_WEBHOOK_40}",
        "1 fingerprinted field(s) differ:",
        "  spec.containers[0].image",
        '    A: "vllm/vllm-openai:v0.6.3"',
        '    B: "vllm/vllm-openai:v0.6.4"',
    ]


def test_diff_of_manifest_and_its_live_pod_is_equal(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    live = write_json(tmp_path / "live.json", live_pod("03"))
    code, out, _ = run(capsys, "diff", LLM_POD, live)
    assert code == 0 and out.endswith("fingerprints are equal\n")


def test_diff_no_inject_shows_the_helpers_of_a_live_pod(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    live = write_json(tmp_path / "live.json", live_pod("03"))
    code, out, _ = run(capsys, "diff", "--no-inject", "--json", LLM_POD, live)
    paths = [change["path"] for change in json.loads(out)["changes"]]
    assert code == 1
    assert paths == [  # fields only B has come after A's
        "spec.volumes[*].name",
        "spec.containers[0].volumeMounts",
        "spec.initContainers[*].name",
    ]


# ------------------------------------------------------------------------- real entry point


def test_snapready_hash_as_a_subprocess_reading_stdin() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "webhook", "hash", "-"],
        input=Path(LLM_SERVER).read_bytes(),
        capture_output=True,
        timeout=60,
        check=False,
    )
    expected = webhook_hash(deployment_pod_review())
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() == f"Deployment/snap/llm-server  {expected}\n"


# ---------------------------------------------------------------- one default with the chart


@pytest.mark.chart_default
def test_hash_by_default_equals_the_stamp_of_the_installed_chart(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The chart installs with injectHelpers: false (tests/deploy renders it so); a webhook with
    # those settings stamps the pod as written. No flag, no env: the CLI agrees with it.
    chart_webhook = webhook_hash("03", injection={"enabled": False})
    code, out, err = run(capsys, "hash", LLM_POD)
    assert (code, out) == (0, f"Pod/snap/llm-l4x4  {chart_webhook}\n")
    assert "helpers the webhook injects" not in err
    assert chart_webhook != webhook_hash("03", injection={"enabled": True})
    code, out, _ = run(capsys, "hash", "--inject", LLM_POD)
    assert out == f"Pod/snap/llm-l4x4  {webhook_hash('03', injection={'enabled': True})}\n"


@pytest.mark.chart_default
def test_hash_follows_the_settings_file_when_one_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("injection:\n  enabled: true\n")
    _, out, _ = run(capsys, "hash", "--config", str(config), LLM_POD)
    assert out.split()[1] == webhook_hash("03", injection={"enabled": True})
    config.write_text("injection:\n  enabled: false\n")
    _, out, _ = run(capsys, "hash", "--config", str(config), LLM_POD)
    assert out.split()[1] == webhook_hash("03", injection={"enabled": False})


def test_a_missing_config_file_stops_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    # It used to be skipped: the command then ran on the defaults.
    code, _, err = run(capsys, "hash", "--config", "/nonexistent/ci.yml", LLM_POD)
    assert code == 2 and err == "snapready: settings file /nonexistent/ci.yml: not found\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("lifecycle: {unused_day: 3}\n",
                     "invalid settings: lifecycle.unused_day: Extra inputs are not permitted",
                     id="a-typo"),
        pytest.param("a: [\n", "while parsing a flow node expected the node content",
                     id="not-yaml"),
    ],
)  # fmt: skip
def test_a_bad_settings_file_is_one_line_naming_what_is_wrong(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, message: str
) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text(text)
    code, _, err = run(capsys, "hash", "--config", str(config), LLM_POD)
    assert code == 2 and err.count("\n") == 1 and message in err, err
    code, _, err = run(capsys, "hash", "--config", str(tmp_path), LLM_POD)
    assert code == 2 and err.endswith(": a directory, not a file\n")


@pytest.mark.parametrize("value", ["gpu-mig", '["gpu-mig"', "gpu-mig,gvisor-runtime"])
def test_a_list_variable_that_is_not_json_is_named_with_how_to_write_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    # The message used to say only that a section variable holds a JSON object, though the
    # user had set one field, as the docs say to.
    monkeypatch.setenv("SNAPREADY_RULES__DISABLED", value)
    code, _, err = run(capsys, "hash", LLM_POD)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("snapready: invalid settings: SNAPREADY_RULES__DISABLED: not the JSON")
    assert """SNAPREADY_RULES__DISABLED='["gpu-mig"]'""" in err
    assert value not in err.replace("""'["gpu-mig"]'""", ""), "values are never shown"
