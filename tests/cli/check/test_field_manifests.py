"""``snapready check`` over real manifests (issue 23 "Done when", offline part).

Inputs are byte-for-byte copies from the shared real-manifest corpus (``tests/data/
field-manifests/``, provenance in its ``PROVENANCE.md``), with the policies that select them. The
expectations come from the field reports (docs/gke-facts.md#section-9), not from snapready's output:
Google's reference workloads run in production, so only the real problem (an env var from a
Secret) may be reported; MIG by resource name cannot be snapshotted; prefill and decode restore
each other's snapshots under an ungrouped policy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import DATA
from webhook.cli import main

FIELD = DATA / "field-manifests"
GOOGLE = FIELD / "GoogleCloudPlatform__accelerated-platforms"


def check(capsys: pytest.CaptureFixture[str], policies: Path, *files: Path) -> tuple[int, Any]:
    code = main(["check", *map(str, files), "--policies", str(policies), "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def by_kind(report: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r for r in report["results"] if r["kind"] == kind]


@pytest.mark.parametrize(
    ("manifest", "policies"),
    [
        pytest.param(
            "vllm-podsnapshot-fast-restore__rtx-pro-6000-gemma-4-31b-it__RENDERED.yaml",
            "policies-rtx",
            id="gemma-4-31b-on-g4-standard-48-rtx-pro-6000",
        ),
        pytest.param(
            "vllm-podsnapshot-fast-restore__l4-llama-3-1-8b-instruct__RENDERED.yaml",
            "policies-l4",
            id="llama-3-1-8b-on-l4",
        ),
    ],
)
def test_googles_reference_workloads_pass_with_only_the_secret_env_warning(
    capsys: pytest.CaptureFixture[str], manifest: str, policies: str
) -> None:
    code, report = check(capsys, GOOGLE / policies, GOOGLE / manifest)
    assert code == 0
    [deployment] = by_kind(report, "Deployment")
    assert deployment["policies"], "the reference policy must select the workload"
    assert [(f["rule"], f["path"]) for f in deployment["findings"]] == [
        ("stale-state", "spec.template.spec.containers[0].env")
    ]
    assert "HF_TOKEN" in deployment["findings"][0]["message"]


def test_mig_requested_by_resource_name_is_denied(capsys: pytest.CaptureFixture[str]) -> None:
    manifest = FIELD / "adopted" / "instaslice__vllm-mig-3g.20gb__gvisor.yaml"
    code, report = check(capsys, FIELD / "policies", manifest)
    assert code == 1
    [deployment] = by_kind(report, "Deployment")
    mig = [f for f in deployment["findings"] if f["rule"] == "gpu-mig"]
    assert [(f["outcome"], f["path"]) for f in mig] == [
        ("deny", 'spec.template.spec.containers[0].resources.limits["nvidia.com/mig-3g.20gb"]')
    ]


def test_prefill_and_decode_are_flagged_shared_fingerprint(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stack = FIELD / "vllm-project__production-stack"
    _, report = check(capsys, FIELD / "policies", *sorted(stack.glob("*.yaml")))
    deployments = {r["name"]: r for r in by_kind(report, "Deployment")}
    assert set(deployments) == {"decode", "prefill"}
    for name, other in (("decode", "prefill"), ("prefill", "decode")):
        shared = [f for f in deployments[name]["findings"] if f["rule"] == "shared-fingerprint"]
        assert len(shared) == 1, deployments[name]["findings"]
        assert f"Deployment {other}" in shared[0]["message"]
        assert shared[0]["severity"] == "warn"


def test_one_workload_alone_is_not_flagged(capsys: pytest.CaptureFixture[str]) -> None:
    stack = FIELD / "vllm-project__production-stack"
    _, report = check(capsys, FIELD / "policies", *sorted(stack.glob("*decode*.yaml")))
    [decode] = by_kind(report, "Deployment")
    assert "shared-fingerprint" not in {f["rule"] for f in decode["findings"]}


def test_a_grouped_policy_keeps_two_workloads_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The same two Deployments under a policy grouped by `app` (prefill vs decode): no finding.
    policies = tmp_path / "policies"
    policies.mkdir()
    grouped = (FIELD / "policies" / "10-default-serving.yaml").read_text()
    head, sep, rest = grouped.partition("  name: model-servers\n")
    assert sep, "the serving policy file changed"
    rest = rest.replace(
        "  triggerConfig:\n",
        "  snapshotGroupingRules:\n    groupByLabelValue:\n      labels: [app]\n  triggerConfig:\n",
        1,
    )
    (policies / "10.yaml").write_text(head + sep + rest)
    (policies / "00.yaml").write_text((FIELD / "policies" / "00-storage-configs.yaml").read_text())
    stack = FIELD / "vllm-project__production-stack"
    _, report = check(capsys, policies, *sorted(stack.glob("*.yaml")))
    for deployment in by_kind(report, "Deployment"):
        assert deployment["policies"] == ["default/model-servers"]
        assert "shared-fingerprint" not in {f["rule"] for f in deployment["findings"]}


@pytest.mark.parametrize(
    ("decode_pins", "prefill_pins", "shared"),
    [
        pytest.param({"cloud.google.com/machine-family": "g2"}, {}, True, id="one-unpinned"),
        pytest.param(
            {"cloud.google.com/machine-family": "g2"},
            {"node.kubernetes.io/instance-type": "g2-standard-8"},
            True,
            id="same-series-two-ways",
        ),
        pytest.param(
            {"cloud.google.com/machine-family": "g2"},
            {"cloud.google.com/machine-family": "a2"},
            False,
            id="other-series",
        ),
        pytest.param(
            {"kubernetes.io/arch": "amd64"}, {"kubernetes.io/arch": "arm64"}, False, id="other-arch"
        ),
    ],
)
def test_workloads_pinned_to_other_machines_do_not_restore_each_other(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    decode_pins: dict[str, str],
    prefill_pins: dict[str, str],
    shared: bool,
) -> None:
    """GKE restores only onto the snapshot's machine series and CPU architecture (domain.md
    section 3): the production-stack pair, each Deployment pinned by ``nodeSelector`` (not part
    of the fingerprint), shares snapshots only when some machine suits both (a new-user trial
    found an N2 and a C4A/arm64 pod told they restore each other's memory)."""
    stack = FIELD / "vllm-project__production-stack"
    files = []
    for path, pins in zip(
        sorted(stack.glob("*.yaml")), (decode_pins, prefill_pins), strict=True
    ):  # decode, then prefill
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        for doc in docs:
            if doc.get("kind") == "Deployment":
                spec = doc["spec"]["template"]["spec"]
                spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **pins}
        copy = tmp_path / path.name
        copy.write_text(yaml.safe_dump_all(docs))
        files.append(copy)
    _, report = check(capsys, FIELD / "policies", *files)
    for deployment in by_kind(report, "Deployment"):
        rules = {f["rule"] for f in deployment["findings"]}
        assert ("shared-fingerprint" in rules) == shared, deployment["findings"]


def test_each_finding_points_at_its_fields_line_in_every_format(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Code scanning shows a SARIF result on its ``startLine``: the Secret env var warning of
    Google's L4 manifest belongs on its ``env:`` key (line 38 of the file, read by eye), not on
    the Deployment's first line (7, after the provenance comment)."""
    manifest = GOOGLE / "vllm-podsnapshot-fast-restore__l4-llama-3-1-8b-instruct__RENDERED.yaml"
    policies = GOOGLE / "policies-l4"
    assert manifest.read_text().splitlines()[37] == "          env:"
    _, report = check(capsys, policies, manifest)
    [deployment] = by_kind(report, "Deployment")
    assert deployment["line"] == 7
    assert [(f["path"], f["line"]) for f in deployment["findings"]] == [
        ("spec.template.spec.containers[0].env", 38)
    ]
    main(["check", str(manifest), "--policies", str(policies), "--format", "sarif"])
    [result] = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["region"] == {"startLine": 38}
    main(["check", str(manifest), "--policies", str(policies)])
    assert "spec.template.spec.containers[0].env  (line 38)" in capsys.readouterr().out
