"""``webhook.mutation.patch``: pointer escaping and the recording copy-on-write ``Draft``.

Every case checks the two promises: the recorded operations, applied by the ``jsonpatch``
library to the original, give exactly ``draft.doc``; and the original is never modified.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jsonpatch
import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.base.types import JsonPatchOp, RawObject
from webhook.mutation.patch import Draft, coalesced, escape, pointer


@pytest.mark.parametrize(
    ("token", "escaped"),
    [
        pytest.param("plain", "plain", id="plain-token-unchanged"),
        pytest.param("snapready.io/policy", "snapready.io~1policy", id="slash-becomes-tilde-1"),
        pytest.param("a~b", "a~0b", id="tilde-becomes-tilde-0"),
        pytest.param("~1", "~01", id="tilde-escaped-before-slash-so-tilde-1-survives"),
        pytest.param("/~/", "~1~0~1", id="mixed-slashes-and-tildes"),
        pytest.param(3, "3", id="list-index"),
        pytest.param("", "", id="empty-key"),
    ],
)
def test_escape(token: str | int, escaped: str) -> None:
    assert escape(token) == escaped


def test_pointer_joins_escaped_tokens() -> None:
    assert pointer(("metadata", "annotations", "a/b~c")) == "/metadata/annotations/a~1b~0c"
    assert pointer(()) == ""


@dataclass(frozen=True)
class Edit:
    """A document, edits on a draft of it, and the operations they must record (by hand)."""

    doc: RawObject
    edit: Callable[[Draft], object]
    ops: list[JsonPatchOp]


EDITS = [
    pytest.param(
        Edit(
            {"metadata": {"name": "p"}},
            lambda d: d.put(("metadata", "annotations"), "a/b", "1"),
            [{"op": "add", "path": "/metadata/annotations", "value": {"a/b": "1"}}],
        ),
        id="absent-annotations-map-is-created-whole",
    ),
    pytest.param(
        Edit(
            {"metadata": {"annotations": None}},
            lambda d: d.put(("metadata", "annotations"), "k", "v"),
            [{"op": "add", "path": "/metadata/annotations", "value": {"k": "v"}}],
        ),
        id="null-annotations-map-is-replaced-by-add",
    ),
    pytest.param(
        Edit(
            {"kind": "Pod"},
            lambda d: d.put(("metadata", "annotations"), "k", "v"),
            [{"op": "add", "path": "/metadata", "value": {"annotations": {"k": "v"}}}],
        ),
        id="absent-metadata-is-created-with-the-nested-map",
    ),
    pytest.param(
        Edit(
            {"metadata": {"annotations": {"x~y/z": "keep"}}},
            lambda d: d.put(("metadata", "annotations"), "p/q", "new"),
            [{"op": "add", "path": "/metadata/annotations/p~1q", "value": "new"}],
        ),
        id="existing-map-gets-one-escaped-add",
    ),
    pytest.param(
        Edit(
            {"metadata": {"annotations": {"h": "old"}}},
            lambda d: d.put(("metadata", "annotations"), "h", "new"),
            [{"op": "replace", "path": "/metadata/annotations/h", "value": "new"}],
        ),
        id="different-value-is-replaced",
    ),
    pytest.param(
        Edit(
            {"metadata": {"annotations": {"h": "same"}}},
            lambda d: d.put(("metadata", "annotations"), "h", "same"),
            [],
        ),
        id="equal-value-records-nothing",
    ),
    pytest.param(
        Edit(
            {"spec": {"containers": [{"name": "a"}]}},
            lambda d: d.extend(("spec", "containers", 0, "env"), [{"name": "X"}, {"name": "Y"}]),
            [
                {
                    "op": "add",
                    "path": "/spec/containers/0/env",
                    "value": [{"name": "X"}, {"name": "Y"}],
                }
            ],
        ),
        id="absent-list-is-created-with-all-items-in-one-add",
    ),
    pytest.param(
        Edit(
            {"spec": {"volumes": [{"name": "v"}]}},
            lambda d: d.extend(("spec", "volumes"), [{"name": "w"}]),
            [{"op": "add", "path": "/spec/volumes/-", "value": {"name": "w"}}],
        ),
        id="existing-list-is-appended-with-dash",
    ),
    pytest.param(
        Edit({"spec": {"volumes": []}}, lambda d: d.extend(("spec", "volumes"), []), []),
        id="extending-with-nothing-records-nothing",
    ),
    pytest.param(
        Edit(
            {"spec": {"initContainers": [{"name": "a"}, {"name": "b"}]}},
            lambda d: d.insert(("spec", "initContainers"), 0, {"name": "first"}),
            [{"op": "add", "path": "/spec/initContainers/0", "value": {"name": "first"}}],
        ),
        id="insert-first-shifts-existing-items",
    ),
    pytest.param(
        Edit(
            {"spec": {"initContainers": None}},
            lambda d: d.insert(("spec", "initContainers"), 0, {"name": "first"}),
            [{"op": "add", "path": "/spec/initContainers", "value": [{"name": "first"}]}],
        ),
        id="insert-into-null-list-creates-it",
    ),
]


@pytest.mark.parametrize("case", EDITS)
def test_draft_records_the_operations_that_rebuild_the_working_copy(case: Edit) -> None:
    before = copy.deepcopy(case.doc)
    draft = Draft(case.doc)
    case.edit(draft)
    assert draft.ops == case.ops
    assert case.doc == before
    assert jsonpatch.apply_patch(before, draft.ops) == draft.doc


def test_indices_recorded_after_an_insert_point_at_the_shifted_items() -> None:
    doc: RawObject = {"spec": {"initContainers": [{"name": "a", "env": None}]}}
    draft = Draft(doc)
    draft.insert(("spec", "initContainers"), 0, {"name": "first"})
    draft.extend(("spec", "initContainers", 1, "env"), [{"name": "E", "value": "1"}])
    assert draft.ops[1]["path"] == "/spec/initContainers/1/env"
    assert jsonpatch.apply_patch(doc, draft.ops) == draft.doc
    assert draft.doc["spec"]["initContainers"][1] == {
        "name": "a",
        "env": [{"name": "E", "value": "1"}],
    }


def test_later_edits_never_change_an_operation_already_recorded() -> None:
    draft = Draft({"metadata": {}})
    draft.put(("metadata", "annotations"), "first", "1")
    draft.put(("metadata", "annotations"), "second", "2")
    assert draft.ops == [
        {"op": "add", "path": "/metadata/annotations", "value": {"first": "1"}},
        {"op": "add", "path": "/metadata/annotations/second", "value": "2"},
    ]


def test_untouched_subtrees_are_shared_not_copied() -> None:
    containers: list[Any] = [{"name": "a"}, {"name": "b"}]
    volumes: list[Any] = [{"name": "v"}]
    draft = Draft({"spec": {"containers": containers, "volumes": volumes}})
    draft.extend(("spec", "containers", 1, "env"), [{"name": "X"}])
    assert draft.doc["spec"]["volumes"] is volumes
    assert draft.doc["spec"]["containers"][0] is containers[0]
    assert containers[1] == {"name": "b"}


def test_get_reads_the_working_copy_and_tolerates_missing_steps() -> None:
    draft = Draft({"spec": {"containers": [{"name": "a"}], "volumes": None}})
    assert draft.get("spec", "containers", 0, "name") == "a"
    assert draft.get("spec", "containers", 5, "name") is None
    assert draft.get("spec", "volumes", 0) is None
    assert draft.get("metadata", "annotations") is None


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(
            lambda d: d.extend(("spec", "containers", 3, "env"), [1]),
            id="cannot-create-a-missing-list-item",
        ),
        pytest.param(
            lambda d: d.insert(("spec", "containers"), 9, {}), id="cannot-insert-past-the-end"
        ),
    ],
)
def test_impossible_edits_raise_index_error(edit: Callable[[Draft], object]) -> None:
    with pytest.raises(IndexError):
        edit(Draft({"spec": {"containers": [{"name": "a"}]}}))


def test_coalesced_folds_edits_of_a_created_map_and_nothing_else() -> None:
    ops: list[Any] = [
        {"op": "add", "path": "/metadata/annotations", "value": {"a": "1"}},
        {"op": "add", "path": "/metadata/labels/x", "value": "y"},
        {"op": "add", "path": "/metadata/annotations/b~1c", "value": "2"},
        {"op": "replace", "path": "/metadata/annotations/a", "value": "3"},
        {"op": "add", "path": "/spec/containers/-", "value": {"name": "n"}},
        {"op": "add", "path": "/spec/containers/-/x", "value": 1},  # not a created map's key
    ]
    original = copy.deepcopy(ops)
    out = coalesced(ops)
    assert ops == original  # the input and its values are untouched
    assert out == [
        {"op": "add", "path": "/metadata/annotations", "value": {"a": "3", "b/c": "2"}},
        {"op": "add", "path": "/metadata/labels/x", "value": "y"},
        {"op": "add", "path": "/spec/containers/-", "value": {"name": "n"}},
        {"op": "add", "path": "/spec/containers/-/x", "value": 1},
    ]


def test_coalesced_stops_at_an_operation_on_the_map_or_its_parent() -> None:
    ops: list[Any] = [
        {"op": "add", "path": "/metadata/annotations", "value": {"a": "1"}},
        {"op": "add", "path": "/metadata", "value": {"fresh": {}}},
        {"op": "add", "path": "/metadata/annotations/b", "value": "2"},
    ]
    assert coalesced(ops) == ops
    shifted: list[Any] = [  # an insert moves item 1 to 2: ".../1/resources" is another map then
        {"op": "add", "path": "/spec/initContainers/1/resources", "value": {}},
        {"op": "add", "path": "/spec/initContainers/0", "value": {"name": "first"}},
        {"op": "add", "path": "/spec/initContainers/1/resources/limits", "value": {}},
    ]
    assert coalesced(shifted) == shifted


@given(st.lists(st.sampled_from(["a", "b", "a/b", "~"]), max_size=6), st.booleans())
def test_property_coalesced_patch_applies_to_the_same_document(
    keys: list[str], start: bool
) -> None:
    doc: dict[str, Any] = {"metadata": {"labels": {}}} if start else {"metadata": {}}
    draft = Draft(doc)
    for index, key in enumerate(keys):
        draft.put(("metadata", "annotations"), key, str(index))
        draft.put(("metadata", "labels"), key, "l")
    expected = jsonpatch.apply_patch(doc, draft.ops)
    assert jsonpatch.apply_patch(doc, coalesced(draft.ops)) == expected == draft.doc
