"""``snapready check``: offline admission of manifests, exit codes, text and JSON output."""

from __future__ import annotations

import copy
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import webhook.cli.check
from tests.conftest import EXAMPLES, ROOT, load_review
from tests.rules.test_table import GPU, ready_pod
from webhook.admission.engine import Engine, admit
from webhook.cli import main
from webhook.kube.responses import Decision
from webhook.kube.review import AdmissionRequest

RESULT_KEYS = {
    "decision",
    "findings",
    "kind",
    "message",
    "mode",
    "name",
    "namespace",
    "policies",
    "source",
    "warnings",
    "file",
    "document",
    "line",
}
PLACE_KEYS = {"file", "document", "line"}
"""Where each result's object (and so each of its findings) is in the input (issue 36)."""
FINDING_KEYS = {"message", "outcome", "path", "rule", "severity"} | PLACE_KEYS


def mig_pod() -> dict[str, Any]:
    pod: dict[str, Any] = load_review("04")["request"]["object"]
    return pod


def ready_deployment(name: str = "ready", namespace: str | None = "snap") -> dict[str, Any]:
    pod = ready_pod()
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "selector": {"matchLabels": {"app": "llm"}},
            "template": {"metadata": {"labels": {"app": "llm"}}, "spec": pod["spec"]},
        },
    }


def bad_cronjob() -> dict[str, Any]:
    pod = ready_pod()
    pod["spec"]["runtimeClassName"] = "runc"
    template = {"metadata": {"labels": {"app": "llm"}}, "spec": pod["spec"]}
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "snap"},
        "spec": {"schedule": "@daily", "jobTemplate": {"spec": {"template": template}}},
    }


CONFIGMAP = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "cfg", "namespace": "snap"},
}


def write(path: Path, *documents: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return path


def run_check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["check", *args, "--policies", str(EXAMPLES)])
    out, err = capsys.readouterr()
    return code, out, err


def check_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = run_check(capsys, *args, "--format", "json")
    report: dict[str, Any] = json.loads(out)
    return code, report


def test_directory_with_a_denied_pod_exits_1_and_reports_every_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "apps" / "deploy.yaml", ready_deployment(), CONFIGMAP)
    write(tmp_path / "pods" / "mig.yml", mig_pod())
    (tmp_path / "README.md").write_text("not a manifest")
    code, report = check_json(capsys, str(tmp_path))
    assert code == 1
    assert report["version"] == 1
    assert report["summary"] == {
        "objects": 3,
        "denied": 1,
        "warned": 1,
        "allowed": 1,
        "errors": 0,
        "unreadable": 0,
    }
    assert report["errors"] == []
    by_kind = {r["kind"]: r for r in report["results"]}
    assert [r["kind"] for r in report["results"]] == ["Deployment", "ConfigMap", "Pod"]
    # No PodDisruptionBudget in the input holds the Deployment's pods (checkpoint-window).
    assert by_kind["Deployment"]["decision"] == "warn"
    assert {f["rule"] for f in by_kind["Deployment"]["findings"]} == {"checkpoint-window"}
    assert by_kind["Deployment"]["policies"] == ["snap/llm-policy"]
    assert by_kind["ConfigMap"] == by_kind["ConfigMap"] | {
        "decision": "allow",
        "policies": [],
        "mode": None,
        "findings": [],
    }
    pod = by_kind["Pod"]
    assert (pod["namespace"], pod["name"], pod["decision"], pod["mode"]) == (
        "snap",
        "mig-a100-1g5gb",
        "deny",
        "enforce",
    )
    assert pod["source"].endswith("mig.yml#0")
    assert {(f["rule"], f["outcome"]) for f in pod["findings"]} == {
        ("gpu-mig", "deny"),
        ("image-digest", "warn"),
        ("gpu-driver", "warn"),  # review 04 pins no GPU driver branch
    }


def test_json_shape_is_stable_with_sorted_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = write(tmp_path / "all.yaml", mig_pod(), bad_cronjob(), ready_deployment())
    code, out, _ = run_check(capsys, str(manifest), "--format", "json")
    assert code == 1
    key_orders: list[list[str]] = []

    def record(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        key_orders.append([key for key, _ in pairs])
        return dict(pairs)

    report = json.loads(out, object_pairs_hook=record)
    assert all(keys == sorted(keys) for keys in key_orders)
    assert set(report) == {"errors", "results", "summary", "version"}
    for result in report["results"]:
        assert set(result) == RESULT_KEYS
        assert isinstance(result["warnings"], list)
        for finding in result["findings"]:
            assert set(finding) == FINDING_KEYS
            assert finding["severity"] in ("deny", "warn")
            assert finding["outcome"] in ("deny", "warn", "audit")


def test_cronjob_findings_point_into_the_job_template(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = check_json(capsys, str(write(tmp_path / "cron.yaml", bad_cronjob())))
    assert code == 1
    [result] = report["results"]
    assert [(f["rule"], f["path"]) for f in result["findings"]] == [
        ("gvisor-runtime", "spec.jobTemplate.spec.template.spec.runtimeClassName")
    ]
    assert "gvisor-runtime" in result["message"]


def test_all_good_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = check_json(capsys, str(write(tmp_path / "d.yaml", ready_deployment())))
    assert code == 0
    assert report["summary"]["denied"] == 0


def test_warnings_alone_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deployment = ready_deployment()
    deployment["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.27"
    code, report = check_json(capsys, str(write(tmp_path / "d.yaml", deployment)))
    assert code == 0
    assert report["results"][0]["decision"] == "warn"
    assert report["summary"]["warned"] == 1


@pytest.mark.parametrize(
    ("flags", "selected"),
    [
        pytest.param([], False, id="default-namespace-has-no-policy"),
        pytest.param(
            ["--namespace", "snap"], True, id="namespace-flag-applies-to-objects-without-one"
        ),
    ],
)
def test_namespace_for_objects_without_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], selected: bool
) -> None:
    mig = mig_pod()
    del mig["metadata"]["namespace"]
    code, report = check_json(capsys, str(write(tmp_path / "p.yaml", mig)), *flags)
    assert code == (1 if selected else 0)
    assert report["results"][0]["namespace"] == ("snap" if selected else "default")


def test_object_namespace_wins_over_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = check_json(
        capsys, str(write(tmp_path / "p.yaml", mig_pod())), "--namespace", "other"
    )
    assert code == 1
    assert report["results"][0]["namespace"] == "snap"


def test_gke_version_flag_gates_gpu_whole_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deployment = ready_deployment()
    selector = deployment["spec"]["template"]["spec"]["nodeSelector"]
    selector["node.kubernetes.io/instance-type"] = "g2-standard-48"
    manifest = str(write(tmp_path / "d.yaml", deployment))
    # Unknown version: a GA one (every GA version allows a subset of a node's GPUs).
    assert check_json(capsys, manifest)[0] == 0
    code, report = check_json(capsys, manifest, "--gke-version", "1.34.1-gke.3084001")
    assert code == 1
    [finding] = [f for f in report["results"][0]["findings"] if f["rule"] == "gpu-whole-node"]
    assert "--gke-version" in finding["message"]
    assert check_json(capsys, manifest, "--gke-version", "1.35.0-gke.1738000")[0] == 0


def test_text_output_is_a_readable_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = write(tmp_path / "all.yaml", mig_pod(), ready_deployment())
    code, out, _ = run_check(capsys, str(manifest))
    assert code == 1
    first, *rest = out.splitlines()
    assert first == f"DENY  Pod/snap/mig-a100-1g5gb  (policy snap/llm-policy; {manifest}#0:1)"
    assert any(line.split()[:2] == ["deny", "gpu-mig"] for line in rest)
    assert any(line.startswith("WARN  Deployment/snap/ready") for line in rest)  # no PDB
    assert rest[-1] == "2 object(s): 1 denied, 1 allowed with warnings, 0 allowed"


def test_stdin_is_read_with_dash(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.dumps(mig_pod()).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    code, report = check_json(capsys, "-")
    assert code == 1
    assert report["results"][0]["source"] == "-#0"


def test_captured_admission_review_file_is_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    review = ROOT / "tests" / "data" / "reviews" / "13-deployment-create.json"
    code, report = check_json(capsys, str(review))
    assert code == 0
    assert report["results"][0]["kind"] == "Deployment"
    assert report["results"][0]["decision"] == "warn"


def test_snapshot_policy_objects_go_through_the_same_engine(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, report = check_json(capsys, str(EXAMPLES / "policies.yaml"))
    assert code in (0, 1)
    kinds = [(r["kind"], r["namespace"]) for r in report["results"]]
    assert kinds == [("PodSnapshotStorageConfig", None), ("PodSnapshotPolicy", "snap")]


@pytest.mark.parametrize(
    ("make_args", "needle", "line"),
    [
        pytest.param(
            lambda tmp: [str(tmp / "missing.yaml")], "cannot read", None, id="missing-file"
        ),
        pytest.param(
            lambda tmp: [str(write_text(tmp / "bad.yaml", "a: 1\nkind: [unclosed\n"))],
            "invalid YAML",
            3,
            id="invalid-yaml",
        ),
        pytest.param(
            lambda tmp: [str(write_text(tmp / "x.yaml", "just: a mapping\n"))],
            "not a Kubernetes object",
            1,  # the document's first line (the YAML parser's mark)
            id="document-without-kind",
        ),
        pytest.param(
            lambda tmp: [str(make_dir(tmp / "empty"))], "no .yaml", None, id="empty-directory"
        ),
    ],
)
def test_an_unreadable_input_is_one_error_row_and_the_rest_is_judged(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    make_args: Any,
    needle: str,
    line: int | None,
) -> None:
    good = write(tmp_path / "good" / "pod.yaml", mig_pod())
    args = [*make_args(tmp_path), str(good)]
    code, report = check_json(capsys, *args)
    assert code == 3  # unreadable (2) and denied (1): neither hides the other
    (error,) = report["errors"]
    assert needle in error["reason"]
    assert error["source"] == args[0] or error["source"].startswith(args[0] + "#")
    assert error["line"] == line
    assert error["hint"] is None
    (result,) = report["results"]
    assert (result["kind"], result["decision"]) == ("Pod", "deny")
    assert report["summary"]["unreadable"] == 1
    code, out, _ = run_check(capsys, *args)
    assert code == 3
    assert out.startswith("ERROR ")
    assert needle in out.splitlines()[0]
    assert "DENY  Pod/snap/mig-a100-1g5gb" in out
    assert out.splitlines()[-1].endswith("1 input(s) could not be read")


def test_a_syntax_error_keeps_the_documents_before_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = yaml.safe_dump(mig_pod()) + "---\nkind: [unclosed\n"
    code, report = check_json(capsys, str(write_text(tmp_path / "two.yaml", text)))
    assert code == 3  # the Pod before the error is denied, the rest unreadable
    assert [r["kind"] for r in report["results"]] == ["Pod"]
    # libyaml reports an unclosed flow sequence where the stream ends: the line after it.
    assert report["errors"][0]["line"] == text.count("\n") + 1


def test_a_helm_template_gets_the_render_first_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chart = tmp_path / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: demo\nversion: 0.1.0\n")
    template = chart / "templates" / "deploy.yaml"
    template.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n"
        '  name: {{ include "demo.fullname" . }}\n'
        "{{- if .Values.extra }}\n  labels: {}\n{{- end }}\n"
    )
    code, report = check_json(capsys, str(template))
    assert code == 2
    assert report["results"] == []
    (error,) = report["errors"]
    assert "helm template" in error["hint"]
    code, out, _ = run_check(capsys, str(chart))
    assert code == 2
    assert "  hint: this looks like a Helm template" in out


def test_invalid_settings_still_print_one_json_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = write_text(tmp_path / "ok.yaml", "kind: ConfigMap\n")
    code, out, err = run_check(capsys, str(manifest), "--gke-version", "soon", "--format", "json")
    assert code == 2
    report = json.loads(out)
    assert report["results"] == []
    assert "not a GKE version" in report["errors"][0]["reason"]
    assert "not a GKE version" in err
    code, out, err = run_check(capsys, str(manifest), "--gke-version", "soon")
    assert (code, out) == (2, "")
    assert err.startswith("snapready: ")


def test_bad_policy_directory_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = write(tmp_path / "d.yaml", ready_deployment())
    code = main(["check", str(manifest), "--policies", str(tmp_path / "nope")])
    assert code == 2
    assert "policy directory does not exist" in capsys.readouterr().err


def write_text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def make_dir(path: Path) -> Path:
    path.mkdir()
    return path


def test_console_entry_point_runs_check(tmp_path: Path) -> None:
    manifest = write(tmp_path / "p.yaml", mig_pod())
    result = subprocess.run(
        [sys.executable, "-m", "webhook", "check", str(manifest), "--policies", str(EXAMPLES)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert "gpu-mig" in result.stdout


def huge_gpu_pod(value: str) -> dict[str, Any]:
    pod = ready_pod()
    pod["spec"]["containers"][0]["resources"] = {"limits": {GPU: value}}
    return pod


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("1e99999999", id="huge-exponent-gpu-count-is-a-warning"),
        pytest.param("9" * 400, id="400-digit-gpu-count-is-a-warning"),
        pytest.param("1e-99999999", id="tiny-gpu-count-is-a-warning-like-1n"),
    ],
)
def test_absurd_gpu_quantity_is_a_finding_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    code, report = check_json(capsys, str(write(tmp_path / "p.yaml", huge_gpu_pod(value))))
    assert code == 0
    [result] = report["results"]
    assert result["decision"] == "warn"
    [finding] = [f for f in result["findings"] if f["rule"] == "gpu-machine"]
    assert "not a valid quantity" in finding["message"]
    assert len(finding["message"]) <= 200


def test_absurd_gpu_quantity_prints_no_traceback_from_the_console(tmp_path: Path) -> None:
    manifest = write(tmp_path / "p.yaml", huge_gpu_pod("1e99999999"))
    result = subprocess.run(
        [sys.executable, "-m", "webhook", "check", str(manifest), "--policies", str(EXAMPLES)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert "Traceback" not in result.stderr
    assert result.returncode == 0, result.stderr
    assert "not a valid quantity" in result.stdout


def _explode_on_boom(request: AdmissionRequest, endpoint: Any, engine: Engine) -> Decision:
    if request.name == "boom":
        raise RuntimeError("rule blew up on " + "9" * 400)
    return admit(request, endpoint, engine)


@pytest.mark.parametrize("output", ["json", "text"])
def test_unexpected_error_is_an_error_row_and_exit_3_beside_a_denial(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    output: str,
) -> None:
    # A rule bug is simulated by an admit that raises for one object; the others still run.
    monkeypatch.setattr(webhook.cli.check, "admit", _explode_on_boom)
    manifest = write(tmp_path / "all.yaml", ready_deployment("boom"), mig_pod())
    code, out, err = run_check(capsys, str(manifest), "--format", output)
    assert code == 3  # the error row (2) and the MIG pod's denial (1)
    assert "Traceback" not in out + err
    if output == "text":
        assert out.splitlines()[0].startswith("ERROR Deployment/snap/boom")
        assert "RuntimeError: rule blew up" in out
        assert out.splitlines()[-1].endswith(", 1 could not be checked")
        return
    report = json.loads(out)
    boom, mig = report["results"]
    assert set(boom) == RESULT_KEYS
    assert (boom["decision"], boom["name"], boom["kind"]) == ("error", "boom", "Deployment")
    assert "RuntimeError: rule blew up" in boom["message"]
    assert len(boom["message"]) <= 300
    assert mig["decision"] == "deny"
    assert report["summary"] == {
        "objects": 2,
        "denied": 1,
        "warned": 0,
        "allowed": 0,
        "errors": 1,
        "unreadable": 0,
    }


def test_embedded_example_policies_are_announced_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SNAPREADY_SOURCE__POLICY_DIR", raising=False)
    manifest = str(write(tmp_path / "d.yaml", ready_deployment()))
    assert main(["check", manifest]) == 0
    err = capsys.readouterr().err
    assert "embedded example policies" in err
    assert "--policies DIR" in err
    assert main(["check", manifest, "--policies", str(EXAMPLES)]) == 0
    assert "embedded" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "name"),
    [
        pytest.param("", "empty.yaml", id="empty-file-has-no-objects"),
        pytest.param("---\n---\n", "dashes.yaml", id="file-of-only-separators-has-no-objects"),
        pytest.param("# just a comment\n", "comment.yml", id="comment-only-file-has-no-objects"),
    ],
)
def test_no_objects_at_all_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, name: str
) -> None:
    path = write_text(tmp_path / name, text)
    code, out, err = run_check(capsys, str(path))
    assert code == 2
    assert out == ""
    assert f"no objects found in {path}" in err


def test_an_empty_input_beside_others_is_an_error_row_not_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing is silently dropped: ``check pod.json empty.yaml`` names the empty input."""
    pod = write_text(tmp_path / "pod.json", json.dumps(load_review("01")["request"]["object"]))
    empty = write_text(tmp_path / "empty.yaml", "")
    code, out, _ = run_check(capsys, str(pod), str(empty), "--format", "json")
    report = json.loads(out)
    assert [(row["source"], row["reason"]) for row in report["errors"]] == [
        (str(empty), "no objects found (an empty input?)")
    ]
    assert code == 2  # an unreadable input, as for any error row (--fail-on unreadable)


def test_empty_stdin_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    code, _, err = run_check(capsys, "-")
    assert code == 2
    assert "no objects found in stdin" in err


@pytest.mark.parametrize(
    "policy_text",
    [
        pytest.param("", id="empty-policy-directory-selects-nothing"),
        pytest.param(
            yaml.safe_dump(
                {
                    "apiVersion": "podsnapshot.gke.io/v1",
                    "kind": "PodSnapshotStorageConfig",
                    "metadata": {"name": "snaps"},
                    "spec": {"snapshotStorageConfig": {"gcs": {"bucket": "b"}}},
                }
            ),
            id="storage-config-only-directory-selects-nothing",
        ),
    ],
)
def test_policy_directory_without_policies_warns_and_keeps_the_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], policy_text: str
) -> None:
    policies = make_dir(tmp_path / "policies")
    write_text(policies / "storage.yaml", policy_text)
    manifest = write(tmp_path / "p.yaml", mig_pod())
    code = main(["check", str(manifest), "--policies", str(policies)])
    err = capsys.readouterr().err
    assert code == 0  # the MIG pod is denied only when a policy selects it
    assert "holds no PodSnapshotPolicy" in err
    assert "Traceback" not in err


def test_a_nan_pod_is_an_error_even_after_its_null_twin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """YAML ``.nan`` cannot be fingerprinted; a stamped twin with ``null`` checked first must
    not lend it its fingerprint (orjson writes both alike; review of issue 16's memo)."""
    stamp = {"snapready.io/spec-hash": "v1:sha256:" + "0" * 64}
    spec = {"runtimeClassName": "gvisor", "containers": [{"name": "c", "image": "x"}]}
    base: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "spec": spec}
    pods = []
    for name, user in (("a", None), ("b", float("nan"))):
        pod = copy.deepcopy(base)
        pod["metadata"] = {"name": name, "namespace": "snap", "annotations": stamp,
                           "labels": {"app": "llm", "snapready.io/selected": "true"}}  # fmt: skip
        pod["spec"]["securityContext"] = {"runAsUser": user}
        pods.append(pod)
    manifest = write(tmp_path / "twins.yaml", *pods)
    code, out, _ = run_check(capsys, str(manifest))
    assert code == 2
    assert "ERROR Pod/snap/b" in out and "not representable" in out


def _policy(selector: dict[str, str], name: str = "llm-policy") -> dict[str, Any]:
    return {
        "apiVersion": "podsnapshot.gke.io/v1",
        "kind": "PodSnapshotPolicy",
        "metadata": {"name": name, "namespace": "snap"},
        "spec": {
            "storageConfigName": "snapshots-us-central1",
            "selector": {"matchLabels": selector},
            "retentionConfig": {"lastAccessTimeout": "7d"},
        },
    }


def test_an_input_policy_replaces_the_directory_one_and_two_different_are_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The example directory's llm-policy selects app=llm in snap; the input's version of it
    # (what is being applied) selects app=web instead, as kubectl apply would leave it.
    deployment = ready_deployment()
    changed = write(tmp_path / "a" / "policy.yaml", _policy({"app": "web"}), deployment)
    code, report = check_json(capsys, str(changed))
    results = {r["kind"]: r for r in report["results"]}
    assert results["Deployment"]["policies"] == []
    assert report["errors"] == []
    clash = write(tmp_path / "b" / "two.yaml", _policy({"app": "web"}), _policy({"app": "x"}))
    code, report = check_json(capsys, str(clash))
    assert code == 2
    (error,) = report["errors"]
    assert error["source"] == f"{clash}#1"
    assert "duplicate PodSnapshotPolicy/snap/llm-policy with other content" in error["reason"]


def test_the_policy_directorys_own_findings_are_said_on_stderr_without_gating(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo in a ``--policies`` file (an enforcement annotation that is no mode) was silent:
    the pods were judged against the policy, the policy itself not. It is now a note on
    stderr naming the file and line, outside the report and the exit code (the directory is
    often another team's); not for a policy whose file is an input (judged there) or that an
    input replaces."""
    policies = make_dir(tmp_path / "policies")
    typo = _policy({"app": "llm"})
    typo["metadata"]["annotations"] = {"snapready.io/enforcement": "audti"}
    clean = _policy({"app": "web"}, name="web-policy")
    policy_file = write(policies / "policies.yaml", clean, typo)
    manifest = write(tmp_path / "deploy.yaml", ready_deployment())

    def judged(*args: str, fail_on: str = "warn") -> tuple[int, list[dict[str, Any]], str]:
        code = main(["check", *args, "--policies", str(policies), "--format", "json",
                     "--fail-on", fail_on])  # fmt: skip
        out, err = capsys.readouterr()
        return code, json.loads(out)["results"], err

    code, results, err = judged(str(manifest))
    assert code == 0, "the directory's warning must not fail a run that fails on warnings"
    assert [(r["kind"], r["name"]) for r in results] == [("Deployment", "ready")]
    assert results[0]["policies"] == ["snap/llm-policy"]
    (note,) = [line for line in err.splitlines() if "policy-enforcement" in line]
    assert note.startswith("snapready: note: policy directory: ")
    assert f"PodSnapshotPolicy/snap/llm-policy ({policy_file}#1:" in note and "'audti'" in note
    # the fixture's policies name a storage config the directory lacks: said for both
    assert err.count("policy-storage-config") == 2

    code, results, err = judged(str(manifest), str(policy_file))  # the file is an input too
    assert code == 1  # judged there: its warning fails --fail-on warn
    assert "policy directory" not in err
    assert sorted(r["name"] for r in results) == ["llm-policy", "ready", "web-policy"]

    change = write(tmp_path / "change.yaml", _policy({"app": "llm"}))  # the typo fixed
    _, results, err = judged(str(manifest), str(change), fail_on="deny,unreadable")
    assert "policy-enforcement" not in err  # the input's is in force, and it is said
    (replaced,) = [line for line in err.splitlines() if "llm-policy" in line]
    assert f"({policy_file}#1:" in replaced and f"replaced by the input's ({change}#0" in replaced
    assert "web-policy" in err
    assert [r["name"] for r in results] == ["ready", "llm-policy"]
    same = write(tmp_path / "same.yaml", clean)  # the same content: nothing to say
    _, results, err = judged(str(manifest), str(same), fail_on="deny,unreadable")
    assert "replaced" not in err and "policy-enforcement" in err  # the directory's llm-policy
    assert [r["name"] for r in results] == ["ready", "web-policy"]


def test_the_embedded_example_policies_are_not_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = write(tmp_path / "deploy.yaml", ready_deployment())
    assert main(["check", str(manifest)]) == 0
    assert "policy directory" not in capsys.readouterr().err
