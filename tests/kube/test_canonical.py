"""``webhook.kube.canonical``: the orjson fast path writes exactly the bytes of
``rfc8785.dumps``."""

from __future__ import annotations

from typing import Any

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from webhook.kube.canonical import canonical_json


@given(
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
        ),
        max_leaves=10,
    )
)
def test_property_fast_path_is_byte_identical_to_rfc8785(value: Any) -> None:
    try:
        expected = rfc8785.dumps(value)
    except ValueError:
        with pytest.raises(ValueError):
            canonical_json(value)
        return
    assert canonical_json(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),
        {"a": [1, float("inf")]},
        [float("-inf")],
        1e21,
        {"x": 1.5, "y": -0.0},
        2**53,
        {"big": -(2**60)},
        {"z": None, "é": 1},
        {"\U0001f600": 1, "\uff61": 2},  # UTF-16 order differs from code-point order
        {"s": ":1.5 and :null inside a string"},
    ],
    ids=repr,
)
def test_values_the_fast_path_must_not_answer_alone(value: Any) -> None:
    """Each of these has orjson bytes that are not the JCS bytes (or JCS refuses it): NaN and
    infinities (orjson writes ``null``), floats (number formatting), integers beyond 2**53,
    non-ASCII keys (sort order); the last is a string that only looks risky."""
    try:
        expected = rfc8785.dumps(value)
    except ValueError:
        with pytest.raises(ValueError):
            canonical_json(value)
        return
    assert canonical_json(value) == expected
