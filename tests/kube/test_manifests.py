"""webhook.kube.manifests: multi-document YAML/JSON input, source labels, errors, pod views."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATA, REVIEWS
from webhook.base.errors import ConfigError
from webhook.cli.common.inputs import load_objects
from webhook.kube.manifests import LoadedObject, parse_documents, parse_lenient
from webhook.kube.workloads import pod_views

MANIFESTS = DATA / "manifests"


def test_multi_document_yaml_keeps_order_and_labels_each_document() -> None:
    objects = load_objects([str(MANIFESTS / "llm-server.yaml")])
    assert [(o.kind, o.name) for o in objects] == [
        ("Service", "llm-server"),
        ("Deployment", "llm-server"),
    ]
    # the trailing '---' is an empty document: skipped, not an error
    assert [o.source for o in objects] == [
        f"{MANIFESTS / 'llm-server.yaml'}#0",
        f"{MANIFESTS / 'llm-server.yaml'}#1",
    ]


def test_empty_documents_still_count_in_the_index() -> None:
    objects = parse_documents(b"kind: Pod\n---\n---\nkind: Service\n", "x.yaml")
    assert [o.source for o in objects] == ["x.yaml#0", "x.yaml#2"]


def test_several_files_are_read_in_order() -> None:
    names = [str(MANIFESTS / "llm-l4x4.yaml"), str(MANIFESTS / "workloads.yaml")]
    kinds = [o.kind for o in load_objects(names)]
    assert kinds == ["Pod", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob", "ConfigMap"]


def test_json_list_is_expanded_into_items() -> None:
    objects = load_objects([str(MANIFESTS / "pods-list.json")])
    assert [o.name for o in objects] == ["a", "b"]
    assert objects[1].source.endswith("pods-list.json#0.items[1]")


def test_admission_review_yields_its_request_object() -> None:
    path = REVIEWS / "13-deployment-create.json"
    (loaded,) = load_objects([str(path)])
    assert loaded.kind == "Deployment"
    assert loaded.source == f"{path}#0.request.object"


def test_stdin_is_read_for_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(b"kind: Pod\nmetadata: {name: from-stdin}\n"))
    monkeypatch.setattr(sys, "stdin", stdin)
    (loaded,) = load_objects(["-"])
    assert (loaded.name, loaded.source) == ("from-stdin", "-#0")


def test_yaml_is_read_the_kubernetes_way() -> None:
    text = b"kind: Pod\nspec:\n  args: [2024-01-01, '0400']\n  mode: 0400\n"
    (loaded,) = parse_documents(text, "t.yaml")
    # unquoted dates stay strings (sigs.k8s.io/yaml has no timestamp type); 0400 is YAML 1.1 octal
    assert loaded.obj["spec"] == {"args": ["2024-01-01", "0400"], "mode": 256}


@pytest.mark.parametrize(
    ("metadata", "ref"),
    [
        pytest.param({"name": "p", "namespace": "ns"}, "Pod/ns/p", id="kind-namespace-name"),
        pytest.param({"name": "p"}, "Pod/p", id="no-namespace-gives-kind-and-name"),
        pytest.param({"generateName": "web-"}, "Pod/web-*", id="generate-name-gets-a-star"),
        pytest.param(None, "Pod/?", id="no-metadata-gives-a-question-mark"),
    ],
)
def test_reference_of_an_object(metadata: Any, ref: str) -> None:
    assert LoadedObject(source="s#0", obj={"kind": "Pod", "metadata": metadata}).ref == ref


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(
            b"kind: Pod\nmetadata:\n  name: x\n spec: [\n",
            "t.yaml: invalid YAML at line 4, column 2",
            id="broken-yaml-names-line-and-column",
        ),
        pytest.param(b"- a\n- b\n", "t.yaml#0[0]: not a Kubernetes object", id="list-of-strings"),
        pytest.param(b"just text\n", "t.yaml#0: not a Kubernetes object", id="plain-scalar"),
        pytest.param(b"metadata: {name: x}\n", "t.yaml#0: not a Kubernetes object", id="no-kind"),
        pytest.param(b"\xff\xfe\x00kind", "t.yaml: not UTF-8", id="binary-input"),
        pytest.param(
            b'{"kind": "AdmissionReview", "request": {"uid": "1"}}',
            "t.yaml#0: AdmissionReview without request.object",
            id="review-without-object",
        ),
    ],
)
def test_bad_input_raises_a_clear_config_error(data: bytes, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_documents(data, "t.yaml")
    assert str(caught.value).startswith(message)


def test_missing_file_raises_a_config_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    with pytest.raises(ConfigError, match=r"missing\.yaml: cannot read: No such file"):
        load_objects([str(missing)])


def _template(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c"}], **spec}}


@pytest.mark.parametrize(
    ("obj", "spec_path", "indexed"),
    [
        pytest.param({"kind": "Pod", "spec": {}}, "spec", False, id="pod-is-its-own-view"),
        pytest.param(
            {"kind": "Deployment", "spec": {"template": _template()}},
            "spec.template.spec",
            False,
            id="deployment-template",
        ),
        pytest.param(
            {"kind": "StatefulSet", "spec": {"template": _template()}},
            "spec.template.spec",
            False,
            id="statefulset-template",
        ),
        pytest.param(
            {"kind": "DaemonSet", "spec": {"template": _template()}},
            "spec.template.spec",
            False,
            id="daemonset-template",
        ),
        pytest.param(
            {"kind": "ReplicaSet", "spec": {"template": _template()}},
            "spec.template.spec",
            False,
            id="replicaset-template",
        ),
        pytest.param(
            {"kind": "Job", "spec": {"template": _template()}},
            "spec.template.spec",
            False,
            id="non-indexed-job",
        ),
        pytest.param(
            {"kind": "Job", "spec": {"completionMode": "Indexed", "template": _template()}},
            "spec.template.spec",
            True,
            id="indexed-job",
        ),
        pytest.param(
            {
                "kind": "CronJob",
                "spec": {"jobTemplate": {"spec": {"completionMode": "Indexed", "template": {}}}},
            },
            "spec.jobTemplate.spec.template.spec",
            True,
            id="indexed-cronjob",
        ),
    ],
)
def test_pod_views_of_pods_and_controllers(
    obj: dict[str, Any], spec_path: str, indexed: bool
) -> None:
    (view,) = pod_views(obj)
    assert view.spec_path == spec_path
    assert view.metadata_path == spec_path.removesuffix("spec") + "metadata"
    assert view.indexed_job is indexed


def test_pod_view_is_the_template_itself_not_a_copy() -> None:
    template = _template()
    (view,) = pod_views({"kind": "Deployment", "spec": {"template": template}})
    assert view.pod is template


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param({"kind": "Service", "spec": {}}, id="service-has-no-pod-spec"),
        pytest.param({"kind": "Deployment", "spec": {}}, id="deployment-without-template"),
        pytest.param({"kind": "CronJob", "spec": {"jobTemplate": None}}, id="null-job-template"),
        pytest.param({"kind": "Deployment", "spec": "oops"}, id="spec-not-a-mapping"),
    ],
)
def test_objects_without_a_pod_spec_have_no_view(obj: dict[str, Any]) -> None:
    assert pod_views(obj) == []


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(
            b"kind: Pod\nmetadata: {name: a}\nspec: {replicas: " + b"9" * 5000 + b"}\n"
            b"---\nkind: Pod\nmetadata: {name: b}\n",
            id="yaml",
        ),
        pytest.param(
            b'{"kind": "Pod", "metadata": {"name": "a"}, "spec": {"n": ' + b"9" * 5000 + b"}}",
            id="json",
        ),
    ],
)
def test_an_integer_too_long_to_read_is_that_documents_error(data: bytes) -> None:
    """A 5,000-digit integer (beyond CPython's 4,300-digit int() limit; the API server reads
    int64) is one error row naming the document, never an exception; later documents are read."""
    objects, errors = parse_lenient(data, "big.yaml")
    assert [e.source for e in errors] == ["big.yaml#0"]
    assert "cannot be read" in str(errors[0]) and "set_int_max_str_digits" not in str(errors[0])
    assert [o.obj["metadata"]["name"] for o in objects] == (["b"] if b"---" in data else [])
