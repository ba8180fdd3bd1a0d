"""The file policy source: multi-document YAML, clear errors, never a partial load."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, ROOT
from webhook.base.errors import ConfigError
from webhook.cluster.files import load_policy_dir

POLICY = """\
apiVersion: podsnapshot.gke.io/{version}
kind: PodSnapshotPolicy
metadata: {{name: {name}, namespace: snap}}
spec:
  selector: {{matchLabels: {{app: llm}}}}
  storageConfigName: store
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    (tmp_path / name).write_text(text)
    return tmp_path


def test_example_policies_load_and_select_the_captured_llm_pods() -> None:
    state = load_policy_dir(EXAMPLES, prefix="snapready.io/")
    assert state.synced
    assert [p.name for p in state.policies.select("snap", {"app": "llm"})] == ["llm-policy"]
    assert state.policies.select("snap", {"run": "plain"}) == ()
    assert "snapshots-us-central1" in state.storage_configs


def test_embedded_default_policies_equal_the_manifest_examples() -> None:
    embedded = ROOT / "webhook" / "assets" / "examples" / "policies.yaml"
    assert embedded.read_text() == (EXAMPLES / "policies.yaml").read_text()


def test_multi_document_files_and_v1alpha1_are_accepted(tmp_path: Path) -> None:
    text = (
        POLICY.format(version="v1", name="a")
        + "---\n"
        + POLICY.format(version="v1alpha1", name="b")
        + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: x}\n"
    )
    state = load_policy_dir(write(tmp_path, "p.yaml", text), prefix="snapready.io/")
    assert [p.name for p in state.policies.all()] == ["a", "b"]


def test_policy_enforcement_annotation_is_read_with_the_prefix(tmp_path: Path) -> None:
    text = POLICY.format(version="v1", name="a").replace(
        "namespace: snap}", "namespace: snap, annotations: {acme.io/enforcement: warn}}"
    )
    state = load_policy_dir(write(tmp_path, "p.yaml", text), prefix="acme.io/")
    assert state.policies.all()[0].enforcement == "warn"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        pytest.param("a: [unclosed", "invalid YAML", id="names-invalid-yaml"),
        pytest.param(
            POLICY.format(version="v1", name="a").replace("storageConfigName: store", ""),
            "spec.storageConfigName",
            id="names-missing-storage-config",
        ),
        pytest.param(
            POLICY.format(version="v1", name="a").replace(
                "selector: {matchLabels: {app: llm}}", "selector:"
            ),
            "spec.selector",
            id="names-null-selector",
        ),
        pytest.param(
            POLICY.format(version="v1", name="a").replace("{app: llm}", "{app: [x]}"),
            "matchLabels",
            id="names-bad-label-value",
        ),
        pytest.param(
            POLICY.format(version="v1", name="a") + "  snapshotScope: sometimes\n",
            "snapshotScope",
            id="names-bad-scope",
        ),
        pytest.param(
            POLICY.format(version="v1", name="a")
            + "---\n"
            + POLICY.format(version="v1", name="a").replace("app: llm", "app: other"),
            "duplicate PodSnapshotPolicy/snap/a with other content",
            id="names-duplicate-policy-with-other-content",
        ),
        pytest.param("- just\n- a list\n", "not a Kubernetes object", id="names-non-object"),
    ],
)
def test_malformed_files_fail_the_whole_load_naming_file_and_field(
    tmp_path: Path, text: str, fragment: str
) -> None:
    write(tmp_path, "good.yaml", POLICY.format(version="v1", name="good"))
    write(tmp_path, "bad.yaml", text)
    with pytest.raises(ConfigError, match=fragment) as raised:
        load_policy_dir(tmp_path, prefix="snapready.io/")
    assert "bad.yaml" in str(raised.value)


def test_an_identical_duplicate_is_one_policy(tmp_path: Path) -> None:
    # The same object in two files (a copy of an upstream policy kept beside the original, as in
    # the real-manifests policy directory) is what the API server would hold once.
    write(tmp_path, "a.yaml", POLICY.format(version="v1", name="a"))
    write(tmp_path, "b.yaml", POLICY.format(version="v1", name="a"))
    state = load_policy_dir(tmp_path, prefix="snapready.io/")
    assert [(p.namespace, p.name) for p in state.policies.all()] == [("snap", "a")]


def test_a_policy_without_namespace_lands_in_the_given_namespace(tmp_path: Path) -> None:
    # kubectl apply -n NS puts a namespaceless object in NS; the llm-d guide ships its policy so.
    write(
        tmp_path, "p.yaml", POLICY.format(version="v1", name="a").replace(", namespace: snap", "")
    )
    assert load_policy_dir(tmp_path, prefix="p/").policies.all()[0].namespace == "default"
    state = load_policy_dir(tmp_path, prefix="p/", namespace="llm-d-pod-snapshot")
    assert state.policies.all()[0].namespace == "llm-d-pod-snapshot"


def test_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_policy_dir(tmp_path / "nope", prefix="snapready.io/")


def test_an_alias_bomb_in_a_policy_file_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    """``serve --policies`` and ``check --policies`` read the same files: a billion-laughs
    document (9 levels of 10 aliases: 10**9 strings once expanded) is refused by the bounds of
    ``kube.yaml_bounds``, naming the file, instead of exhausting memory."""
    lines = ['a0: &a0 ["lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    write(tmp_path, "good.yaml", POLICY.format(version="v1", name="good"))
    write(tmp_path, "bomb.yaml", "\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match="refused") as raised:
        load_policy_dir(tmp_path, prefix="snapready.io/")
    assert "bomb.yaml" in str(raised.value)
