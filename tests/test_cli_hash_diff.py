"""``snapready hash`` and ``snapready diff``: output, exit codes, stdin, errors.

Expected fingerprints come from the captured AdmissionReviews (what the webhook sees), not from
the manifests the commands read, so each check crosses the manifest/defaulting boundary.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATA, REVIEWS, load_review
from webhook.cli import main
from webhook.distill import fingerprint

MANIFESTS = DATA / "manifests"
LLM_POD = str(MANIFESTS / "llm-l4x4.yaml")
LLM_SERVER = str(MANIFESTS / "llm-server.yaml")
WORKLOADS = str(MANIFESTS / "workloads.yaml")
REVIEW_03 = str(REVIEWS / "03-pod-create-gvisor-l4x4-gpu4.json")
REVIEW_13 = str(REVIEWS / "13-deployment-create.json")
REVIEW_40 = str(REVIEWS / "40-pod-create-by-replicaset-controller.json")


def admitted(name: str) -> str:
    """Fingerprint of the object in a captured review (as the webhook computes it)."""
    return fingerprint(load_review(name)["request"]["object"])


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
    assert out == f"Pod/snap/llm-l4x4  {admitted('03')}\n"


def test_hash_of_a_deployment_equals_the_api_server_defaulted_template(
    capsys: pytest.CaptureFixture[str],
) -> None:
    template = load_review("13")["request"]["object"]["spec"]["template"]
    code, out, err = run(capsys, "hash", LLM_SERVER)
    assert code == 0
    assert out == f"Deployment/snap/llm-server  {fingerprint(template)}\n"
    assert "skipped Service/snap/llm-server" in err  # the Service in the same file


def test_hash_of_every_controller_kind_equals_the_admitted_twin_pod(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "hash", WORKLOADS)
    twin = admitted("30")
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
    notes = [line for line in err.splitlines() if line.startswith("snapready: note:")]
    assert len(notes) == 2  # the Indexed Job and the Indexed CronJob
    assert "Job/snap/llm-job is an Indexed Job" in notes[0]
    assert "batch.kubernetes.io/job-completion-index" in notes[0]
    assert "CronJob/snap/llm-cron" in notes[1]


def test_indexed_job_pods_really_hash_differently_per_index() -> None:
    job = json.loads(json.dumps(load_review("30")["request"]["object"]))
    hashes = set()
    for index in ("0", "1"):
        job["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] = index
        hashes.add(fingerprint(job))
    assert len(hashes | {admitted("30")}) == 3


def test_hash_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "hash", "--json", LLM_POD, WORKLOADS)
    entries: list[dict[str, Any]] = json.loads(out)
    assert code == 0
    assert [e["ref"] for e in entries][:2] == ["Pod/snap/llm-l4x4", "StatefulSet/snap/llm-sts"]
    first, job = entries[0], entries[4]
    assert first["fingerprint"] == admitted("03")
    assert (first["source"], first["specPath"], first["namespace"]) == (
        f"{LLM_POD}#0",
        "spec",
        "snap",
    )
    assert job["kind"] == "Job" and job["specPath"] == "spec.template.spec"
    assert len(job["notes"]) == 1
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
    assert (code, out) == (0, f"Pod/snap/llm-l4x4  {admitted('03')}\n")


def test_hash_accepts_captured_reviews_and_kubectl_lists(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "hash", REVIEW_03, str(MANIFESTS / "pods-list.json"))
    lines = out.splitlines()
    assert code == 0
    assert lines[0] == f"Pod/snap/llm-l4x4  {admitted('03')}"
    assert [line.split()[0] for line in lines[1:]] == ["Pod/snap/a", "Pod/snap/b"]
    assert lines[1].split()[1] == admitted("30")  # same spec as the twin pod


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
        f"A  Pod/snap/llm-l4x4  {admitted('03')}",
        f"B  Pod/snap/llm-l4x4  {admitted('03')}",
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
    assert result["b"]["fingerprint"] == admitted("40")
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


# ------------------------------------------------------------------------- real entry point


def test_snapready_hash_as_a_subprocess_reading_stdin() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "webhook", "hash", "-"],
        input=Path(LLM_SERVER).read_bytes(),
        capture_output=True,
        timeout=60,
        check=False,
    )
    template = load_review("13")["request"]["object"]["spec"]["template"]
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() == f"Deployment/snap/llm-server  {fingerprint(template)}\n"
