"""``snapready check``/``hash`` over real public manifests (``tests/data/real-manifests``, a copy
of the shared corpus; ``PROVENANCE.md`` says where each file comes from; ``derived/`` holds the
pods the controllers would create from the upstream templates).

The verdicts named by issue 24 hold: every custom resource's templates are judged under the
policies selecting their pods, the Jobs are denied like their pods, one unparsable file leaves
the rest judged in one JSON document, the llm-d guide's namespaceless policy selects its
Deployment with ``--namespace``, the E2-only ComputeClass in the input is denied, and a template
hashes like the pod its controller makes from it.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATA
from webhook.cli import main
from webhook.cli.check.reading import read_inputs

CORPUS = DATA / "real-manifests"
POLICIES = CORPUS / "policies"
CR_POLICIES = DATA / "real-manifests-crs"
SAMPLES = CORPUS / "GoogleCloudPlatform__kubernetes-engine-samples"
SANDBOX = CORPUS / "kubernetes-sigs__agent-sandbox"
INVALID = SAMPLES / "ai-ml__gke-model-armor__preparing-the-model__vllm-gemma-deployment.yaml"
"""Upstream file that is not valid YAML (mis-indented nodeSelectorTerms; kubectl rejects it)."""
CLAUDE = SAMPLES / "ai-ml__anthropic-agent-sandbox__deploy__base__sandbox-template.yaml"
CLAUDE_POD = (
    CORPUS
    / "derived"
    / "k-e-samples__anthropic-agent-sandbox__pod-claude-agent-worker-pool-4hx2m.yaml"
)
LLM_D_GUIDE = (
    CORPUS / "zetxqx__llm-d" / "guides__pod-snapshot__modelserver__gpu__vllm__gke__RENDERED.yaml"
)
CUSTOM_KINDS = {
    "SandboxTemplate",
    "LeaderWorkerSet",
    "RayService",
    "InferenceService",
    "LLMInferenceService",
}


def check(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, dict[str, Any]]:
    code = main(["check", *map(str, args), "--format", "json"])
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return code, report


def by_ref(report: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["kind"], r["name"]): r for r in report["results"]}


def deny_rules(result: dict[str, Any]) -> set[str]:
    return {f["rule"] for f in result["findings"] if f["outcome"] == "deny"}


def test_every_file_is_read_and_only_the_invalid_one_is_an_error() -> None:
    objects, errors = read_inputs([str(CORPUS)])
    files = {p for p in CORPUS.rglob("*") if p.suffix in (".yaml", ".yml", ".json")}
    sources = {Path(o.source.partition("#")[0]) for o in objects}
    assert [Path(e["source"]) for e in errors] == [INVALID]
    assert errors[0]["line"] == 37
    assert sources | {INVALID} == files  # every other file gave objects
    assert {o.kind for o in objects} >= CUSTOM_KINDS


def test_the_whole_corpus_is_one_json_document_with_every_object_judged(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, report = check(capsys, CORPUS, "--policies", POLICIES)
    assert code == 3  # the invalid file (2), and the corpus holds denied objects (1)
    assert report["summary"]["denied"] > 0
    sources = {Path(e["source"].partition("#")[0]) for e in report["errors"]}
    assert INVALID in sources
    # The experiment variants redefine objects of the main directories with other content: a
    # cluster cannot hold both, so each is an error row, and the first one is used.
    assert all("duplicate" in e["reason"] for e in report["errors"] if Path(e["source"]) != INVALID)
    kinds = {r["kind"] for r in report["results"]}
    assert kinds >= CUSTOM_KINDS
    assert report["summary"]["objects"] == len(report["results"]) > 80
    assert report["summary"]["errors"] == 0  # nothing crashed


def test_claude_agent_worker_template_is_denied_like_its_pod(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ("--policies", POLICIES, "--namespace", "claude-agents")
    _, template = check(capsys, CLAUDE, *args)
    _, pod = check(capsys, CLAUDE_POD, *args)
    (result,) = template["results"]
    assert (result["kind"], result["decision"]) == ("SandboxTemplate", "deny")
    assert result["policies"] == ["claude-agents/claude-agent-workers"]
    assert "gcsfuse" in deny_rules(result)
    assert deny_rules(result) == deny_rules(pod["results"][0])
    paths = {f["path"] for f in result["findings"] if f["rule"] == "gcsfuse"}
    assert all(p.startswith("spec.podTemplate.") for p in paths)


@pytest.mark.parametrize(
    ("job", "pod"),
    [
        pytest.param(
            "ai-ml__llm-finetuning-gemma__finetune.yaml",
            "k-e-samples__finetune-job__pod-q4z7r.yaml",
            id="finetune-job-8xl4",
        ),
        pytest.param(
            "ai-ml__llm-training-jax-tpu-gemma3__training_singlehost.yaml",
            "k-e-samples__jax-gemma3-train-singlehost__pod-m3n8d.yaml",
            id="jax-tpu-gcsfuse-job",
        ),
    ],
)
def test_jobs_selected_by_controller_labels_are_denied_like_their_pods(
    capsys: pytest.CaptureFixture[str], job: str, pod: str
) -> None:
    # The policy training-jobs selects batch.kubernetes.io/job-name, which only the Job
    # controller sets (to the Job's name).
    code, report = check(capsys, SAMPLES / job, "--policies", POLICIES)
    _, pods = check(capsys, CORPUS / "derived" / pod, "--policies", POLICIES)
    (result,) = report["results"]
    assert (code, result["decision"], result["policies"]) == (1, "deny", ["default/training-jobs"])
    assert deny_rules(result) == deny_rules(pods["results"][0])


def test_one_bad_file_leaves_the_rest_judged_in_one_document(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["check", str(INVALID), str(CLAUDE), "--policies", str(POLICIES)])
    out = capsys.readouterr().out
    assert code == 2
    assert out.startswith(f"ERROR {INVALID}:37  invalid YAML")
    code, report = check(capsys, INVALID, CLAUDE, "--policies", POLICIES)
    assert code == 2
    assert [r["kind"] for r in report["results"]] == ["SandboxTemplate"]
    assert len(report["errors"]) == 1


def test_the_llm_d_namespaceless_policy_selects_its_deployment_with_namespace(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The guide applies its policy (no metadata.namespace) with kubectl apply -n.
    policies = CORPUS / "policies-variants" / "llm-d-guide-as-applied"
    guide_policy = "llm-d-pod-snapshot/pod-snapshot-policy"

    for flag in ("--namespace", "-n"):
        # The rendered objects have no namespace either: all of them land in the flag's.
        _, report = check(capsys, LLM_D_GUIDE, "--policies", policies, flag, "llm-d-pod-snapshot")
        (deployment,) = [r for r in report["results"] if r["kind"] == "Deployment"]
        assert deployment["namespace"] == "llm-d-pod-snapshot"
        assert guide_policy in deployment["policies"]


def test_a_kustomize_render_checks_itself(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # kubectl kustomize | snapready check -: the stream holds the guide's policy, and the
    # policy directory only its storage config.
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(LLM_D_GUIDE.read_bytes())))
    storage = CORPUS / "policies-variants" / "storage-only"
    _, report = check(capsys, "-", "--policies", storage, "--namespace", "llm-d-pod-snapshot")
    deployments = [r for r in report["results"] if r["kind"] == "Deployment"]
    assert [d["policies"] for d in deployments] == [
        ["llm-d-pod-snapshot/pod-snapshot-nvidia-gpu-vllm-pod-snapshot-policy"]
    ]


def test_the_e2_only_compute_class_in_the_input_is_denied(
    capsys: pytest.CaptureFixture[str],
) -> None:
    e2 = CORPUS / "adopted" / "k-e-samples__ccc-reservations-e2__gvisor.yaml"
    code, report = check(capsys, e2, "--policies", POLICIES)
    results = by_ref(report)
    compute_class = results[("ComputeClass", "ccc-reservations")]
    assert compute_class["namespace"] is None  # cluster-scoped: shown without a namespace
    deployment = results[("Deployment", "ccc-reservations")]
    assert code == 1
    assert "machine-family" in deny_rules(deployment)
    assert not any("not known here" in w for w in deployment["warnings"])


@pytest.mark.parametrize(
    ("manifest", "namespace", "paths"),
    [
        pytest.param(
            SAMPLES / "ai-ml__gke-ray__rayserve__llm__llama-3-8b__ray-service.yaml",
            "default",
            {
                "spec.rayClusterConfig.headGroupSpec.template.spec.runtimeClassName",
                "spec.rayClusterConfig.workerGroupSpecs[0].template.spec.runtimeClassName",
            },
            id="rayservice-head-and-worker-group",
        ),
        pytest.param(
            SAMPLES / "ai-ml__llm-multihost-gpus__vllm-llama3-405b-A3.yaml",
            "default",
            {
                "spec.leaderWorkerTemplate.leaderTemplate.spec.runtimeClassName",
                "spec.leaderWorkerTemplate.workerTemplate.spec.runtimeClassName",
            },
            id="leaderworkerset-selected-by-its-controller-label",
        ),
        pytest.param(
            CORPUS / "kserve__kserve" / "docs__samples__accelerators__tensorflow-gpu.yaml",
            "default",
            {"spec.predictor.runtimeClassName"},
            id="inferenceservice-predictor-pod-spec",
        ),
        pytest.param(
            CORPUS
            / "kserve__kserve"
            / "docs__samples__llmisvc__agentic-tool-calling__llmisvc-single-gpu.yaml",
            "llm",
            {"spec.template.runtimeClassName"},
            id="llminferenceservice-template-pod-spec",
        ),
    ],
)
def test_custom_resources_are_judged_under_the_policies_selecting_their_pods(
    capsys: pytest.CaptureFixture[str], manifest: Path, namespace: str, paths: set[str]
) -> None:
    # None of these upstream samples sets runtimeClassName: gvisor, so every template is denied
    # for gvisor-runtime, at its own path in the custom resource.
    code, report = check(capsys, manifest, "--policies", CR_POLICIES, "--namespace", namespace)
    (result,) = [r for r in report["results"] if r["kind"] in CUSTOM_KINDS]
    assert (code, result["decision"]) == (1, "deny")
    assert result["policies"]
    found = {f["path"] for f in result["findings"] if f["rule"] == "gvisor-runtime"}
    assert found == paths


def test_a_selector_on_a_per_pod_value_depends_on_the_pod(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sts = (
        CORPUS
        / "llm-d__llm-d"
        / ("guides__agentic-serving__modelserver__gpu__sglang__kimi-k3__base__statefulset.yaml")
    )
    code, report = check(capsys, sts, "--policies", CR_POLICIES)
    (result,) = report["results"]
    assert (code, result["decision"], result["policies"]) == (0, "warn", [])
    assert any("depends on the pod" in w for w in result["warnings"])


@pytest.mark.parametrize(
    ("template", "pod"),
    [
        pytest.param(
            SANDBOX / "site__content__docs__sandbox__snapshots__source__template.yaml",
            CORPUS
            / "derived"
            / "agent-sandbox__simple-sandbox__pod-simple-sandbox-pool-9q8rw.yaml",
            id="sandbox-template-and-its-warm-pool-pod",
        ),
        pytest.param(
            SAMPLES / "ai-ml__llm-finetuning-gemma__finetune.yaml",
            CORPUS / "derived" / "k-e-samples__finetune-job__pod-q4z7r.yaml",
            id="job-and-its-pod",
        ),
    ],
)
def test_a_template_hashes_like_the_pod_its_controller_makes(
    capsys: pytest.CaptureFixture[str], template: Path, pod: Path
) -> None:
    assert main(["hash", str(template), str(pod)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert lines[0].split()[1] == lines[1].split()[1]


def test_a_kserve_model_framework_finding_names_its_own_block(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The sample's only GPU request is in spec.predictor.tensorflow (KServe turns it into the
    # kserve-container): a GPU finding points there, not at a container the object lacks.
    isvc = CORPUS / "kserve__kserve" / "docs__samples__accelerators__tensorflow-gpu.yaml"
    _, report = check(capsys, isvc, "--policies", CR_POLICIES)
    (result,) = report["results"]
    gpu_paths = [f["path"] for f in result["findings"] if f["rule"].startswith("gpu")]
    assert gpu_paths
    assert all(p.startswith("spec.predictor.tensorflow.resources") for p in gpu_paths)
    assert not any("containers[" in f["path"] for f in result["findings"])
