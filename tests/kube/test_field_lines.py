"""``webhook.kube.field_lines``: the line of a finding's field in the manifest it came from.

The expected lines are counted by hand in the texts below (each line of a text is numbered in
a comment where it matters), not taken from the code under test.
"""

from __future__ import annotations

import pytest

from webhook.kube import field_lines
from webhook.kube.field_lines import FieldLocator, path_steps
from webhook.kube.manifests import LoadedObject, parse_lenient

STREAM = """\
# line 1: a comment before the first document
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    dev.gvisor.flag: "on"
spec:
  template:
    spec:
      containers:
        - name: a
          image: busybox
        - name: b
          image: nginx
          resources:
            limits:
              nvidia.com/gpu: 1
---
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Pod
    metadata: {name: first}
    spec:
      containers: [{name: c, image: one}]
  - apiVersion: v1
    kind: Pod
    metadata:
      name: second
    spec:
      containers:
        - name: d
          image: two
"""
# Deployment: object line 2; metadata.annotations["dev.gvisor.flag"] 7; containers[1] 14 (its
# "- name: b" line), containers[1].image 15, the GPU limit 18. List ("---" is 19): items[0]
# starts on 23 (its spec on 26, its one flow-style container on 27), items[1] on 28, its
# containers[0].image on 35.


def objects(text: str, *, locate: bool = True) -> list[LoadedObject]:
    found, errors = parse_lenient(text.encode(), "in.yaml", locate=locate)
    assert errors == []
    return found


def test_a_field_path_reads_as_keys_and_indexes() -> None:
    assert path_steps('spec.template.spec.containers[1].resources.limits["nvidia.com/gpu"]') == [
        "spec", "template", "spec", "containers", 1, "resources", "limits", "nvidia.com/gpu",
    ]  # fmt: skip
    assert path_steps('metadata.annotations["a/b.c"]') == ["metadata", "annotations", "a/b.c"]


@pytest.mark.parametrize("garbage", ["", "[", '["open', "a..b", "]]", "x[-1]", "\x00[", "." * 999])
def test_a_path_that_is_not_path_syntax_never_raises(garbage: str) -> None:
    steps = path_steps(garbage)
    assert all(isinstance(step, (str, int)) for step in steps)


def test_each_finding_gets_the_line_of_its_field() -> None:
    deployment, first, second = objects(STREAM)
    locator = FieldLocator()
    assert deployment.line == 2
    assert locator.lines(
        deployment.anchor,
        [
            'metadata.annotations["dev.gvisor.flag"]',
            "spec.template.spec.containers[1]",
            "spec.template.spec.containers[1].image",
            'spec.template.spec.containers[1].resources.limits["nvidia.com/gpu"]',
        ],
    ) == {
        'metadata.annotations["dev.gvisor.flag"]': 7,
        "spec.template.spec.containers[1]": 14,
        "spec.template.spec.containers[1].image": 15,
        'spec.template.spec.containers[1].resources.limits["nvidia.com/gpu"]': 18,
    }
    # Items of a List: the path is the object's own, the anchor leads to the item.
    assert locator.lines(first.anchor, ["spec.containers[0]"]) == {"spec.containers[0]": 27}
    assert locator.lines(second.anchor, ["spec.containers[0].image"]) == {
        "spec.containers[0].image": 35
    }


def test_a_field_the_manifest_lacks_is_put_on_its_nearest_parent() -> None:
    [deployment, *_] = objects(STREAM)
    lines = FieldLocator().lines(
        deployment.anchor,
        ["spec.template.spec.runtimeClassName", "spec.template.spec.containers[7].image", "x.y"],
    )
    # "spec:" of the template is line 10; containers[7] does not exist: "containers:" is 11;
    # a path that starts wrong stays on the object's first line.
    assert lines == {
        "spec.template.spec.runtimeClassName": 10,
        "spec.template.spec.containers[7].image": 11,
        "x.y": 2,
    }


def test_lines_are_counted_in_characters_after_non_ascii_text() -> None:
    text = "# é€😀 — three documents\nkind: A\nv: ünïcode\n---\nkind: B\nspec:\n  x: 1\n"
    _, second = objects(text)
    assert second.line == 5
    assert FieldLocator().lines(second.anchor, ["spec.x"]) == {"spec.x": 7}


def test_a_duplicate_key_is_placed_where_the_decoded_value_came_from() -> None:
    text = "kind: Pod\nspec:\n  image: old\n  image: new\n"
    [pod] = objects(text)
    assert pod.obj["spec"]["image"] == "new"
    assert FieldLocator().lines(pod.anchor, ["spec.image"]) == {"spec.image": 4}


def test_pretty_printed_json_gets_field_lines_too() -> None:
    text = '\n\n{\n  "kind": "Pod",\n  "spec": {\n    "hostNetwork": true\n  }\n}\n'
    [pod] = objects(text)
    assert pod.line == 3
    assert FieldLocator().lines(pod.anchor, ["spec.hostNetwork"]) == {"spec.hostNetwork": 6}


def test_without_locate_no_text_is_kept_and_nothing_is_placed() -> None:
    [deployment, *_] = objects(STREAM, locate=False)
    assert deployment.anchor is None
    assert FieldLocator().lines(deployment.anchor, ["spec.template"]) == {}


def test_composing_again_is_bounded_per_document_and_per_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(field_lines, "MAX_DOCUMENT_CHARS", 300)
    monkeypatch.setattr("webhook.kube.manifests.MAX_DOCUMENT_CHARS", 300)
    deployment, first, _ = objects(STREAM)
    assert deployment.anchor is None  # the Deployment's ~370 characters are over 300
    assert first.anchor is not None
    size = first.anchor.end - first.anchor.start
    locator = FieldLocator(budget_chars=size - 1)
    assert locator.lines(first.anchor, ["spec.containers[0]"]) == {}  # over the run's budget
    locator = FieldLocator(budget_chars=size)
    assert locator.lines(first.anchor, ["spec.containers[0]"]) == {"spec.containers[0]": 27}
    assert locator.budget_chars == 0


def test_an_anchor_that_does_not_lead_to_the_object_places_nothing() -> None:
    [deployment, *_] = objects(STREAM)
    assert deployment.anchor is not None
    wrong = deployment.anchor.under("items").under(3)
    assert FieldLocator().lines(wrong, ["spec"]) == {}


POD = "kind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n    - name: c\n      image: x\n"
# spec on line 4, containers[0].image on line 7 (of POD alone)


def test_json_libyaml_would_refuse_is_placed_all_the_same() -> None:
    """Valid JSON that libyaml cannot read as it is: an emoji as escaped UTF-16 surrogates
    (Python's ``json.dumps``), a DEL and a U+FEFF inside strings, an escaped backslash."""
    text = (
        "{\n"  # 1
        '  "kind": "Pod",\n'  # 2
        '  "metadata": {"name": "j",'  # 3
        ' "annotations": {"e": "\\ud83d\\ude00", "d": "a\x7fb\ufeff"}},\n'
        '  "x": "\\\\ud83d",\n'  # 4
        '  "spec": {\n'  # 5
        '    "containers": [{"name": "c", "image": "x"}]\n'  # 6
        "  }\n"
        "}\n"
    )
    [pod] = objects(text)
    assert pod.obj["metadata"]["annotations"]["e"] == "\U0001f600"
    assert FieldLocator().lines(pod.anchor, ["spec.containers[0].image", "x"]) == {
        "spec.containers[0].image": 6,
        "x": 4,
    }


@pytest.mark.parametrize("odd", ["\u2028", "\u2029", "\x85"])
def test_lines_are_counted_as_editors_count_them(odd: str) -> None:
    """libyaml breaks lines at U+0085, U+2028 and U+2029 too; editors and code scanning do
    not: a tenant's annotation must not move every later line."""
    text = f"kind: A\nnote: 'a{odd}b'\n---\n" + POD
    _, pod = objects(text)
    assert pod.line == 4
    assert FieldLocator().lines(pod.anchor, ["spec", "spec.containers[0].image"]) == {
        "spec": 7,
        "spec.containers[0].image": 10,
    }
    value = f"kind: Pod\nmetadata:\n  annotations: {{n: 'a{odd}b'}}\nspec:\n  x: 1\n"
    [pod] = objects(value)
    assert FieldLocator().lines(pod.anchor, ["spec.x"]) == {"spec.x": 5}


def test_a_carriage_return_alone_ends_a_line_before_the_document() -> None:
    text = "# c\n---\r" + POD  # the document's root starts on line 3, after the lone CR
    [pod] = objects(text)
    assert pod.line == 3
    assert FieldLocator().lines(pod.anchor, ["spec.containers[0].image"]) == {
        "spec.containers[0].image": 9
    }


def test_an_object_under_a_duplicate_key_is_the_one_decoding_keeps() -> None:
    text = (
        "kind: List\n"  # 1
        "items:\n"  # 2
        "  - {kind: ConfigMap, metadata: {name: decoy}}\n"  # 3
        "items:\n"  # 4
        "  - kind: Pod\n"  # 5
        "    spec: {x: 1}\n"  # 6
    )
    [pod] = objects(text)
    assert pod.kind == "Pod"
    assert pod.line == 5
    assert FieldLocator().lines(pod.anchor, ["spec.x"]) == {"spec.x": 6}
