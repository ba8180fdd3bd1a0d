"""Bounds on YAML documents (``webhook.kube.yaml_bounds``) as the manifest reader applies them:
alias bombs, alias chains that nest without limit and recursive aliases are refused as that
document's error, naming the bound; real uses of anchors are read as before; each object keeps
its file, document index and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from webhook.kube.manifests import ManifestError, _KubeYamlLoader, parse_documents, parse_lenient
from webhook.kube.yaml_bounds import (
    ALIAS_EXPANSION_LIMIT,
    MAX_DEPTH,
    Budget,
    DocumentRefused,
    check_document,
)


def alias_bomb(levels: int, width: int = 9) -> str:
    """A Pod whose ``args`` nest ``levels`` levels of ``width`` aliases each."""
    anchors = ["&a0 [" + ",".join(["x"] * width) + "]"]
    for level in range(1, levels):
        anchors.append(f"&a{level} [" + ",".join([f"*a{level - 1}"] * width) + "]")
    return (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bomb\nspec:\n  containers:\n"
        "  - name: c\n    image: x\n    args: [" + ", ".join(anchors) + "]\n"
    )


def alias_chain(length: int) -> str:
    """Anchors that each wrap the previous one in a list: nesting grows by one per anchor while
    the text stays two levels deep."""
    lines = ["kind: ConfigMap", "a0: &a0 [x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}]" for i in range(1, length)]
    return "\n".join(lines) + "\n"


def _compose(text: str) -> yaml.Node:
    node = yaml.compose(text, Loader=yaml.CSafeLoader)
    assert node is not None
    return node


@pytest.mark.parametrize(
    ("text", "bound", "words"),
    [
        pytest.param(alias_bomb(9), "aliases", "alias expansion", id="nine-levels-of-nine-aliases"),
        pytest.param(alias_bomb(6), "aliases", "alias expansion", id="six-levels-already-refused"),
        pytest.param(alias_chain(MAX_DEPTH + 5), "nesting", "nest more than", id="alias-chain"),
        pytest.param(
            "kind: X\nv: " + "[" * 300 + "]" * 300, "nesting", "nest more than", id="written-deep"
        ),
        pytest.param("kind: X\na: &a [1, *a]\n", "recursive alias", "contains", id="self-alias"),
    ],
)
def test_a_document_beyond_a_bound_is_refused_naming_the_bound(
    text: str, bound: str, words: str
) -> None:
    with pytest.raises(DocumentRefused) as refused:
        check_document(_compose(text), Budget())
    assert refused.value.bound == bound
    assert words in refused.value.reason
    assert refused.value.reason.startswith("refused: ")


def test_the_bomb_is_one_error_row_with_its_line_and_the_next_document_is_still_read() -> None:
    text = alias_bomb(9) + "---\nkind: Service\nmetadata: {name: after}\n"
    objects, errors = parse_lenient(text.encode(), "pr.yaml")
    (error,) = errors
    assert error.source == "pr.yaml#0"
    assert error.line == 9  # the `args:` line, where the aliases are expanded
    assert "alias expansion" in error.reason and "1,000,000" in error.reason
    (service,) = objects
    assert (service.kind, service.file, service.document, service.line) == (
        "Service",
        "pr.yaml",
        1,
        11,
    )


def test_the_strict_reader_raises_the_refusal() -> None:
    with pytest.raises(ManifestError, match="alias expansion"):
        parse_documents(alias_bomb(8).encode(), "bomb.yaml")


def test_the_alias_budget_is_shared_by_the_documents_of_one_input() -> None:
    # Each document alone adds ~640,000 units (8**6 one-character strings, 2 units each, and
    # the lists holding them): one passes the 1,000,000 budget of the input, two do not.
    one = alias_bomb(6, width=8).replace("name: bomb", "name: {name}")
    budget = Budget()
    check_document(_compose(one.format(name="a")), budget)
    assert 300_000 < budget.remaining < 400_000
    with pytest.raises(DocumentRefused, match="alias expansion"):
        check_document(_compose(one.format(name="b")), budget)
    objects, errors = parse_lenient(
        (one.format(name="a") + "---\n" + one.format(name="b")).encode(), "two.yaml"
    )
    assert [o.name for o in objects] == ["a"]
    assert [e.source for e in errors] == ["two.yaml#1"]


def test_anchors_as_manifests_use_them_are_read_as_before() -> None:
    text = """\
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers:
      - name: a
        image: x
        env: &env
        - {name: A, value: "1"}
        - {name: B, value: "2"}
        resources: &res {limits: {cpu: "1"}}
      - name: b
        image: y
        env: *env
        resources:
          <<: *res
          requests: {cpu: "1"}
"""
    (loaded,) = parse_documents(text.encode(), "web.yaml")
    first, second = loaded.obj["spec"]["template"]["spec"]["containers"]
    assert (
        second["env"] == first["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    )
    assert second["resources"] == {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}


def test_bounds_leave_room_for_deep_real_objects() -> None:
    # 150 levels of nesting as written (CRD schemas nest a few dozen) and 10,000 aliases of a
    # small block are read.
    deep = "kind: X\nv: " + "[" * 150 + "]" * 150 + "\n"
    assert parse_documents(deep.encode(), "deep.yaml")[0].kind == "X"
    many = "kind: X\nbase: &b {a: 1, b: 2}\nitems:\n" + "- *b\n" * 10_000
    (loaded,) = parse_documents(many.encode(), "many.yaml")
    assert len(loaded.obj["items"]) == 10_000
    assert ALIAS_EXPANSION_LIMIT > 10_000 * 5


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        pytest.param("# header\n\nkind: Pod\n---\n\nkind: Service\n", [3, 6], id="documents"),
        pytest.param(
            "kind: List\nitems:\n- kind: Pod\n  metadata: {name: a}\n- kind: Pod\n",
            [3, 5],
            id="list",
        ),
        pytest.param('\n\n{"kind": "Pod"}\n', [3], id="json"),
    ],
)
def test_each_object_keeps_the_line_where_it_starts(text: str, lines: list[int]) -> None:
    objects = parse_documents(text.encode(), "in.yaml")
    assert [o.line for o in objects] == lines
    assert {o.file for o in objects} == {"in.yaml"}


def test_a_deep_document_without_anchors_is_refused_by_the_reader() -> None:
    # libyaml allows 1,000 levels as written; the consumers (the fingerprint's canonical form,
    # orjson) recurse, so the reader refuses beyond MAX_DEPTH even without any alias.
    deep = "kind: Pod\nspec:\n  args: " + "[" * 900 + "]" * 900 + "\n"
    objects, errors = parse_lenient(deep.encode(), "deep.yaml")
    assert objects == []
    (error,) = errors
    assert "nest more than 200" in error.reason
    assert error.line == 3


DATA = Path(__file__).parents[1] / "data"


def _pyyaml_documents(data: bytes) -> list[Any]:
    return list(yaml.load_all(data.decode("utf-8-sig"), Loader=_KubeYamlLoader))


@pytest.mark.parametrize(
    "path",
    sorted(p for p in DATA.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file()),
    ids=lambda p: str(p.relative_to(DATA)),
)
def test_the_fast_builder_reads_every_manifest_as_pyyaml_does(path: Path) -> None:
    """``yaml_build.build`` (anchor-free documents) against PyYAML's own constructor, over every
    YAML file of tests/data (field and real manifests, policies, settings): same values, same
    types (``True`` is not ``1``), same key order."""
    data = path.read_bytes()
    try:
        expected = _pyyaml_documents(data)
    except yaml.YAMLError:
        pytest.skip("not valid YAML (a Helm template or a broken fixture)")
    objects, errors = parse_lenient(data, "x")
    documents = [d for d in expected if d is not None]
    built = [o.obj for o in objects] if not errors else None
    if built is None or len(built) != len(documents):
        pytest.skip("documents that are not single Kubernetes objects")
    assert orjson.dumps(built) == orjson.dumps(documents)
    assert repr(built) == repr(documents)


def test_tags_outside_the_plain_subset_are_built_by_pyyaml() -> None:
    text = (
        b"kind: X\nbin: !!binary aGk=\nbase: {a: 1}\nm:\n  <<: {b: 2}\n  c: 3\n"
        b"f: 1.5\nn: ~\nt: yes\n"
    )
    (loaded,) = parse_documents(text, "x.yaml")
    assert loaded.obj == {
        "kind": "X", "bin": b"hi", "base": {"a": 1}, "m": {"b": 2, "c": 3}, "f": 1.5, "n": None,
        "t": True,
    }  # fmt: skip


def test_deep_json_is_refused_too() -> None:
    deep = b'\n{"kind": "Pod", "spec": ' + b"[" * 300 + b"]" * 300 + b"}"
    objects, errors = parse_lenient(deep, "deep.json")
    assert objects == []
    (error,) = errors
    assert (error.source, error.line) == ("deep.json#0", 2)
    assert "nest more than 200" in error.reason
    (pod,) = parse_documents(b'{"kind": "Pod", "spec": ' + b"[" * 150 + b"]" * 150 + b"}", "ok")
    assert pod.kind == "Pod"


def test_aliases_of_one_long_scalar_count_every_time_they_expand() -> None:
    # 400 KB of `*s` naming a 10,000-character string: a gigabyte once written out (JSON, the
    # fingerprint), though the parser shares one string.
    text = "kind: X\ns: &s " + "x" * 10_000 + "\nv: [" + ", ".join(["*s"] * 100_000) + "]\n"
    with pytest.raises(DocumentRefused, match="alias expansion"):
        check_document(_compose(text), Budget())
    few = "kind: X\ns: &s " + "x" * 10_000 + "\nv: [" + ", ".join(["*s"] * 50) + "]\n"
    check_document(_compose(few), Budget())
